//! Each catalog model's runtime (its deployments' buckets, its breaker), built for a
//! new [`Models`] or for [`Models::reloaded`], which keeps the buckets of every model
//! whose limits did not change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{Factories, Inner, Models};
use crate::catalog::{Catalog, ModelEntry};
use crate::error::Result;
use crate::limit::{LimiterBackend, LimiterConfig};
use crate::pipeline::{DeploymentRuntime, ModelRuntime, PipelineConfig, Server};
use crate::provider::ProviderRegistry;

/// A model's (or one of its deployments') limiter config, named as its buckets are.
fn limiter_config(model: &ModelEntry, deployment: Option<&str>) -> LimiterConfig {
    let mut config = LimiterConfig::for_model(model);
    if let Some(name) = deployment {
        config.model_id = format!("{}/{name}", model.id);
    }
    config
}

/// The runtime of every model of `catalog`. With `old`, the runtimes of the handle
/// being reloaded: a deployment whose limiter config is what it was (the same limits,
/// window, burst, throttle settings) keeps its limiter, so its level, learned limits
/// and queue go on; any other is built afresh.
pub(super) fn runtimes(
    catalog: &Arc<Catalog>,
    registry: &ProviderRegistry,
    config: &Arc<PipelineConfig>,
    factories: &Factories,
    old: Option<&HashMap<String, Arc<ModelRuntime>>>,
) -> Result<HashMap<String, Arc<ModelRuntime>>> {
    let mut runtimes = HashMap::new();
    for m in catalog.models() {
        let factory = factories.for_model.get(&m.id).unwrap_or(&factories.default);
        let provider = registry.get(&m.provider);
        // Where a model's (or deployment's) calls go, for `server.address`.
        let server = |entry: &ModelEntry| {
            if let Some(p) = provider {
                p.prepare(entry);
            }
            provider
                .and_then(|p| p.base_url(entry))
                .and_then(|url| Server::of(&url))
        };
        let previous = old.and_then(|o| o.get(&m.id));
        let limiter = |deployment: Option<&str>| -> Result<Arc<dyn LimiterBackend>> {
            let wanted = limiter_config(m, deployment);
            let kept = previous.and_then(|runtime| {
                runtime
                    .deployments
                    .iter()
                    .find(|d| d.name.as_deref() == deployment)
                    .filter(|_| limiter_config(&runtime.entry, deployment) == wanted)
                    .map(|d| d.limiter.clone())
            });
            match kept {
                Some(limiter) => Ok(limiter),
                None => factory.build(&wanted),
            }
        };
        let deployments = if m.deployments.is_empty() {
            vec![DeploymentRuntime::new(
                None,
                m.clone(),
                limiter(None)?,
                server(m),
            )]
        } else {
            m.deployments
                .iter()
                .map(|d| {
                    let entry = m.for_deployment(d);
                    let server = server(&entry);
                    Ok(DeploymentRuntime::new(
                        Some(d.name.clone()),
                        entry,
                        limiter(Some(&d.name))?,
                        server,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
        };
        runtimes.insert(
            m.id.clone(),
            Arc::new(ModelRuntime::new(
                m.clone(),
                catalog.clone(),
                config.clone(),
                deployments,
                // An unlinked provider fails the model's first call: no conventions name.
                provider.map_or("_OTHER", |p| p.conventions_name()),
            )),
        );
    }
    Ok(runtimes)
}

impl Models {
    /// A handle over `catalog` with everything else of this one (providers, credential
    /// store, pipeline config and recorder, limiter backends): what a server gives new
    /// requests when its catalog file changes, while calls in flight finish on this
    /// handle. A model whose limiter config did not change keeps its limiter (its
    /// level, learned limits and queue), shared by both handles; a new model, or one
    /// whose limits changed, gets fresh buckets. Providers are built again on first use
    /// (their options may have changed). Fails as [`super::ModelsBuilder::build`] does, and
    /// this handle is untouched.
    pub fn reloaded(&self, catalog: Catalog) -> Result<Models> {
        let inner = &self.inner;
        let catalog = Arc::new(catalog);
        let mut for_model = HashMap::new();
        for (id, factory) in &inner.factories.for_model {
            // A model given its own backend keeps it while the catalog still has it.
            if let Some(entry) = catalog.model(id) {
                for_model.insert(entry.id.clone(), factory.clone());
            }
        }
        let factories = Factories {
            default: inner.factories.default.clone(),
            for_model,
        };
        let runtimes = runtimes(
            &catalog,
            &inner.registry,
            &inner.config,
            &factories,
            Some(&inner.runtimes),
        )?;
        Ok(Models {
            inner: Arc::new(Inner {
                catalog,
                runtimes,
                config: inner.config.clone(),
                credentials: inner.credentials.clone(),
                registry: inner.registry.clone(),
                factories,
                built: Mutex::new(HashMap::new()),
            }),
            job: None,
        })
    }
}
