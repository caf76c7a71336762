//! Where the catalog and credentials come from, and the one `Models` every command uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tollgate::catalog::KnownProviders;
use tollgate::credentials::{FileCredentialStore, MemoryCredentialStore};
use tollgate::limit::{LimiterBackend, LimiterConfig, LimiterFactory};
use tollgate::pipeline::{Recorder, SpendLedger};
use tollgate::{Catalog, CredentialStore, Models};
use tollgate_redis::{RedisConfig, RedisLimiters};

/// The embedded demo catalog (`src/demo.toml`).
pub(crate) const DEMO_CATALOG: &str = include_str!("demo.toml");

/// The catalog read when `--catalog` is not given, if it exists.
pub(crate) const DEFAULT_CATALOG: &str = "tollgate.toml";

/// The global options that say where the catalog and the credentials are, and where
/// the models' buckets live.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) catalog: Option<PathBuf>,
    pub(crate) credentials: Option<PathBuf>,
    /// Where every model's buckets live: `None` in this process, else a shared backend
    /// (`--redis`).
    pub(crate) limiters: Option<Arc<dyn LimiterFactory>>,
    /// Where shared spend caps keep their accounts (`--redis`: the same Redis), for
    /// `serve`'s per-key daily budgets.
    pub(crate) spend: Option<Arc<dyn SpendLedger>>,
    /// Where `run --via batch` keeps its batches' holds on the queue limits: this
    /// process's ledger, or Redis's (`--redis`) so that every run on the key counts.
    pub(crate) queues: Arc<dyn tollgate::limit::QueueLedger>,
}

/// A shared [`LimiterFactory`], as `ModelsBuilder::limiter_backend` takes one by value.
#[derive(Debug)]
struct Backend(Arc<dyn LimiterFactory>);

impl LimiterFactory for Backend {
    fn build(&self, config: &LimiterConfig) -> tollgate::Result<Arc<dyn LimiterBackend>> {
        self.0.build(config)
    }
}

/// The backend of `--redis URL`: every model's buckets in that Redis or Redis Cluster
/// (keys `<prefix>:{<model id>}:lim`, the prefix `tollgate` unless `--redis-prefix`
/// says), shared by every process using it; failing closed (a call whose reservation
/// Redis cannot answer is not sent).
pub(crate) fn redis(
    url: &str,
    prefix: Option<&str>,
) -> Result<RedisLimiters, Box<dyn std::error::Error>> {
    let mut config = RedisConfig::new(url);
    if let Some(prefix) = prefix {
        config = config.with_key_prefix(prefix);
    }
    let limiters = RedisLimiters::new(config)
        .map_err(|e| format!("--redis: {e}; give a URL such as redis://127.0.0.1:6379/ (a cluster: redis+cluster://host:7000, or redis://a:7000,redis://b:7001)"))?;
    Ok(limiters)
}

/// Which catalog was loaded, for messages.
#[derive(Debug, Clone)]
pub(crate) enum CatalogOrigin {
    File(PathBuf),
    Demo,
}

impl std::fmt::Display for CatalogOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogOrigin::File(p) => write!(f, "{}", p.display()),
            CatalogOrigin::Demo => f.write_str("the embedded demo catalog"),
        }
    }
}

impl Source {
    /// Loads the catalog: `--catalog`, else `tollgate.toml` here, else the demo.
    pub(crate) fn catalog(&self) -> Result<(Catalog, CatalogOrigin), Box<dyn std::error::Error>> {
        match self.catalog_file() {
            Some(p) => Ok((Catalog::from_toml_file(&p)?, CatalogOrigin::File(p))),
            None => Ok((Catalog::from_toml_str(DEMO_CATALOG)?, CatalogOrigin::Demo)),
        }
    }

    /// The catalog file: `--catalog`, else `tollgate.toml` here if there is one, else none
    /// (the embedded demo catalog).
    pub(crate) fn catalog_file(&self) -> Option<PathBuf> {
        match &self.catalog {
            Some(p) => Some(p.clone()),
            None => Some(PathBuf::from(DEFAULT_CATALOG)).filter(|p| Path::new(p).exists()),
        }
    }

    /// Builds `Models` over the catalog and the credentials file (none: an empty store),
    /// with `recorder` receiving every call and attempt.
    pub(crate) fn models(
        &self,
        recorder: Arc<dyn Recorder>,
    ) -> Result<(Models, CatalogOrigin), Box<dyn std::error::Error>> {
        let (catalog, origin) = self.catalog()?;
        let mut builder = Models::builder()
            .catalog(catalog)
            .recorder(recorder)
            .credentials_arc(self.store());
        if let Some(limiters) = &self.limiters {
            builder = builder.limiter_backend(Backend(limiters.clone()));
        }
        let models = builder.build()?;
        Ok((models, origin))
    }

    /// The credential store: the `--credentials` file, or an empty one.
    pub(crate) fn store(&self) -> Arc<dyn CredentialStore> {
        match &self.credentials {
            Some(path) => Arc::new(FileCredentialStore::new(path)),
            None => Arc::new(MemoryCredentialStore::new()),
        }
    }

    /// Fails before any call if a model in `model_ids` names a credential its provider
    /// needs and the store does not have it, naming the model and the id.
    pub(crate) async fn check_credentials(
        &self,
        models: &Models,
        model_ids: &[String],
    ) -> Result<(), Box<dyn std::error::Error>> {
        let store = self.store();
        let known = KnownProviders::linked();
        for id in model_ids {
            let entry = models.catalog().get(id)?;
            if known.requires_credential(&entry.provider) != Some(true) {
                continue;
            }
            let ids = entry.credential.iter().chain(
                entry
                    .deployments
                    .iter()
                    .filter_map(|d| d.credential.as_ref()),
            );
            for credential in ids {
                if let Err(e) = store.get(credential).await {
                    let hint = match &self.credentials {
                        Some(p) => format!("add `{credential} = \"...\"` to {}", p.display()),
                        None => {
                            format!("pass --credentials FILE with a line `{credential} = \"...\"`")
                        }
                    };
                    return Err(format!(
                        "model `{id}` needs credential `{credential}`: {e}; {hint}"
                    )
                    .into());
                }
            }
        }
        Ok(())
    }
}
