//! [`Models`]: the catalog, the credential store and the provider registry in one
//! handle that gives a pipeline client per catalog model.
//!
//! A provider is built on the first call to one of its models, once, even when many
//! tasks ask at the same moment; a provider whose models are never called is never
//! built and never asks the store for credentials. Every client runs its calls through
//! the pipeline ([`crate::pipeline`]) with the model's one limiter and circuit breaker.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::catalog::{Catalog, KnownProviders, ModelEntry, ModelKind};
use crate::client::{DecisionClient, EmbeddingsClient, LlmClient};
use crate::credentials::{CredentialStore, MemoryCredentialStore};
use crate::error::{Error, Result};
use crate::limit::{FallbackChain, InProcessLimiters, LimiterBackend, LimiterFactory};
use crate::pipeline::{
    CircuitBreaker, FallbackChat, FallbackOptions, JobContext, ModelRuntime, PipelineChat,
    PipelineConfig, PipelineDecision, PipelineEmbeddings, Recorder,
};
use crate::provider::{Provider, ProviderContext, ProviderRegistry, ProviderTransports};

mod assemble;

type BuiltProvider = Arc<OnceCell<Arc<dyn ProviderTransports>>>;

/// The entry point: `models.chat("claude-sonnet").await?` gives a client for that
/// catalog model. Cheap to clone; clones share built providers, limiters and breakers.
///
/// Build one per process from a catalog, a credential store and the providers linked
/// into the binary; every client it hands out reserves on the model's limiter before
/// sending, retries by error type and records the call.
///
/// ```
/// use tollgate::{Catalog, Conversation, Models, SamplingParams};
/// use tollgate_fake as _; // links the `fake` provider (offline, scripted answers)
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tollgate::Result<()> {
/// let catalog = Catalog::from_toml_str(r#"
///     [models.assistant]
///     provider = "fake"
///     max_output_tokens = 1024
///     rpm = 60
///     options = { replies = ["Hello!"] }
/// "#)?;
/// let models = Models::builder().catalog(catalog).build()?;
/// let chat = models.chat("assistant").await?; // builds the `fake` provider, once
///
/// let request = Conversation::new().user("Hi").request("assistant", SamplingParams::new())?;
/// assert_eq!(chat.single_response(&request).await?.text(), "Hello!");
/// // The call was reserved on the model's buckets before it was sent.
/// assert_eq!(models.limiter("assistant")?.snapshot().await?.grants, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Models {
    inner: Arc<Inner>,
    job: Option<JobContext>,
}

struct Inner {
    catalog: Arc<Catalog>,
    runtimes: HashMap<String, Arc<ModelRuntime>>,
    config: Arc<PipelineConfig>,
    credentials: Arc<dyn CredentialStore>,
    registry: ProviderRegistry,
    /// Where the models' buckets are built (kept for [`Models::reloaded`]).
    factories: Factories,
    built: Mutex<HashMap<&'static str, BuiltProvider>>,
}

/// The limiter factories: the default, and those given for some models (by catalog id).
struct Factories {
    default: Arc<dyn LimiterFactory>,
    for_model: HashMap<String, Arc<dyn LimiterFactory>>,
}

impl fmt::Debug for Models {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Models")
            .field(
                "models",
                &self
                    .inner
                    .catalog
                    .models()
                    .map(|m| &m.id)
                    .collect::<Vec<_>>(),
            )
            .field("providers", &self.inner.registry)
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

/// Builds [`Models`].
#[derive(Default)]
pub struct ModelsBuilder {
    catalog: Option<Catalog>,
    credentials: Option<Arc<dyn CredentialStore>>,
    providers: Vec<Arc<dyn Provider>>,
    config: PipelineConfig,
    limiters: Option<Arc<dyn LimiterFactory>>,
    limiters_for: HashMap<String, Arc<dyn LimiterFactory>>,
}

impl fmt::Debug for ModelsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelsBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ModelsBuilder {
    /// The catalog (required).
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The credential store (default: an empty in-memory store).
    pub fn credentials(mut self, store: impl CredentialStore + 'static) -> Self {
        self.credentials = Some(Arc::new(store));
        self
    }

    /// The credential store, shared.
    pub fn credentials_arc(mut self, store: Arc<dyn CredentialStore>) -> Self {
        self.credentials = Some(store);
        self
    }

    /// A provider instance to use instead of (or beside) the linked ones, e.g. a
    /// scripted `tollgate_fake::FakeProvider`.
    pub fn provider(mut self, provider: impl Provider) -> Self {
        self.providers.push(Arc::new(provider));
        self
    }

    /// How calls are run: retries, timeouts, circuit breakers, corrections.
    pub fn pipeline(mut self, config: PipelineConfig) -> Self {
        self.config = config;
        self
    }

    /// Where every model's buckets live (default: [`InProcessLimiters`], in this
    /// process). A shared backend, e.g. `tollgate_redis`, lets many processes share one
    /// provider quota.
    pub fn limiter_backend(mut self, factory: impl LimiterFactory + 'static) -> Self {
        self.limiters = Some(Arc::new(factory));
        self
    }

    /// Where the buckets of the catalog models `model_ids` live, overriding
    /// [`ModelsBuilder::limiter_backend`] for them: some models on Redis, others in
    /// process.
    pub fn limiter_backend_for<I, S>(
        mut self,
        model_ids: I,
        factory: impl LimiterFactory + 'static,
    ) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let factory: Arc<dyn LimiterFactory> = Arc::new(factory);
        for id in model_ids {
            self.limiters_for.insert(id.into(), factory.clone());
        }
        self
    }

    /// Where call and attempt records go (shorthand for the pipeline's `recorder`).
    pub fn recorder(mut self, recorder: Arc<dyn Recorder>) -> Self {
        self.config.recorder = recorder;
        self
    }

    /// Builds the handle. Fails if no catalog was given or if two linked crates register
    /// one key.
    pub fn build(self) -> Result<Models> {
        let catalog = self.catalog.ok_or_else(|| Error::InvalidRequest {
            field: "catalog".into(),
            reason: "is required: call ModelsBuilder::catalog".into(),
        })?;
        let mut registry = ProviderRegistry::linked()?;
        for provider in self.providers {
            registry = registry.with(provider);
        }
        let credentials = self
            .credentials
            .unwrap_or_else(|| Arc::new(MemoryCredentialStore::new()));
        let config = Arc::new(self.config);
        let catalog = Arc::new(catalog);
        // A name resolves to its model (an alias or pattern too); a typo names the
        // model, not a silent default.
        let mut limiters_for = HashMap::new();
        for (name, factory) in self.limiters_for {
            limiters_for.insert(catalog.get(&name)?.id.clone(), factory);
        }
        let default: Arc<dyn LimiterFactory> =
            self.limiters.unwrap_or_else(|| Arc::new(InProcessLimiters));
        let factories = Factories {
            default,
            for_model: limiters_for,
        };
        let runtimes = assemble::runtimes(&catalog, &registry, &config, &factories, None)?;
        Ok(Models {
            inner: Arc::new(Inner {
                catalog,
                runtimes,
                config,
                credentials,
                registry,
                factories,
                built: Mutex::new(HashMap::new()),
            }),
            job: None,
        })
    }
}

impl Models {
    /// Starts a builder.
    pub fn builder() -> ModelsBuilder {
        ModelsBuilder::default()
    }

    /// A handle whose clients make their calls for `job`: they share its retry budget
    /// and count against its spend cap. Limiters, breakers and built providers stay
    /// shared with `self`.
    pub fn for_job(&self, job: JobContext) -> Models {
        Models {
            inner: self.inner.clone(),
            job: Some(job),
        }
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The rate limiter of catalog model `model_id` (one per model, shared by every
    /// client and clone of this handle), for an [`crate::limit::Admission`], a snapshot
    /// or a look. For a model with several deployments, the first deployment's (see
    /// [`Models::limiters`]).
    pub fn limiter(&self, model_id: &str) -> Result<&Arc<dyn LimiterBackend>> {
        Ok(self.runtime(model_id)?.limiter())
    }

    /// Every deployment's limiter of catalog model `model_id`, in catalog order (one for
    /// a model without deployments); each one's [`LimiterBackend::model_id`] is
    /// `model/deployment`.
    pub fn limiters(&self, model_id: &str) -> Result<Vec<&Arc<dyn LimiterBackend>>> {
        Ok(self
            .runtime(model_id)?
            .deployments
            .iter()
            .map(|d| &d.limiter)
            .collect())
    }

    /// The circuit breaker of catalog model `model_id`.
    pub fn breaker(&self, model_id: &str) -> Result<&CircuitBreaker> {
        Ok(&self.runtime(model_id)?.breaker)
    }

    /// The fallback chain the catalog gives `model_id` (the model, then its
    /// `fallbacks`), over this handle's limiters.
    pub fn fallback_chain(&self, model_id: &str) -> Result<FallbackChain> {
        let limiters: HashMap<String, Arc<dyn LimiterBackend>> = self
            .inner
            .runtimes
            .iter()
            .map(|(id, rt)| (id.clone(), rt.limiter().clone()))
            .collect();
        FallbackChain::from_catalog(&self.inner.catalog, model_id, &limiters)
    }

    /// The provider keys available (linked and given), sorted.
    pub fn provider_keys(&self) -> Vec<&'static str> {
        self.inner.registry.keys()
    }

    /// The runtime of the model the name `model_id` resolves to (by id, alias or
    /// pattern): one per model, whatever name reaches it.
    fn runtime(&self, model_id: &str) -> Result<&Arc<ModelRuntime>> {
        let id = &self.inner.catalog.get(model_id)?.id;
        self.inner
            .runtimes
            .get(id)
            .ok_or_else(|| Error::UnknownModel {
                model_id: model_id.into(),
                known: String::new(),
            })
    }

    /// A chat client for catalog model `model_id`.
    pub async fn chat(&self, model_id: &str) -> Result<Arc<dyn LlmClient>> {
        let (_, provider) = self.provider_for(model_id, ModelKind::Chat).await?;
        let rt = self.runtime(model_id)?.clone();
        let transports = rt.chat_transports(|entry| provider.chat(entry))?;
        Ok(Arc::new(PipelineChat {
            transport: transports[0].clone(),
            transports,
            rt,
            job: self.job.clone(),
            in_chain: false,
        }))
    }

    /// A chat client over `model_id` and its catalog `fallbacks`: each call goes to the
    /// first model that can serve it now (circuit not open, bucket free: a model paused
    /// after a 429 is not), else the one that could soonest is waited for, or only the
    /// last remaining one ([`FallbackOptions::wait`], the catalog's `fallback_wait`). See
    /// [`FallbackOptions`] for moving on after a refusal.
    pub async fn chat_with_fallbacks(
        &self,
        model_id: &str,
        options: FallbackOptions,
    ) -> Result<Arc<dyn LlmClient>> {
        let entry = self.inner.catalog.get(model_id)?;
        let mut members = Vec::new();
        for id in std::iter::once(&entry.id).chain(&entry.fallbacks) {
            let (_, provider) = self.provider_for(id, ModelKind::Chat).await?;
            let rt = self.runtime(id)?.clone();
            let transports = rt.chat_transports(|entry| provider.chat(entry))?;
            members.push(PipelineChat {
                transport: transports[0].clone(),
                transports,
                rt,
                job: self.job.clone(),
                in_chain: true,
            });
        }
        Ok(Arc::new(FallbackChat { members, options }))
    }

    /// An embeddings client for catalog model `model_id`: every vector it returns is
    /// L2-normalized and of the catalog's `[embeddings] width`.
    pub async fn embeddings(&self, model_id: &str) -> Result<Arc<dyn EmbeddingsClient>> {
        let (_, provider) = self.provider_for(model_id, ModelKind::Embeddings).await?;
        let rt = self.runtime(model_id)?.clone();
        let transports = rt.embeddings_transports(|entry| provider.embeddings(entry))?;
        let width = self
            .inner
            .catalog
            .embedding_width()
            .ok_or_else(|| Error::InvalidRequest {
                field: "embeddings.width".into(),
                reason: "is not set in the catalog".into(),
            })?;
        Ok(Arc::new(PipelineEmbeddings {
            rt,
            transport: transports[0].clone(),
            transports,
            job: self.job.clone(),
            width,
        }))
    }

    /// A decision client for catalog model `model_id`.
    pub async fn decision(&self, model_id: &str) -> Result<Arc<dyn DecisionClient>> {
        let (_, provider) = self.provider_for(model_id, ModelKind::Decision).await?;
        let rt = self.runtime(model_id)?.clone();
        let transports = rt.decision_transports(|entry| provider.decision(entry))?;
        Ok(Arc::new(PipelineDecision {
            rt,
            transport: transports[0].clone(),
            transports,
            job: self.job.clone(),
        }))
    }

    /// The provider's batch API for chat model `model_id` (requests queued for hours at
    /// about half the price; see [`crate::provider::batch`]). Nothing here paces it: the
    /// caller reserves each batch on the model's queue limits.
    pub async fn batch(
        &self,
        model_id: &str,
    ) -> Result<Arc<dyn crate::provider::batch::BatchTransport>> {
        let (entry, provider) = self.provider_for(model_id, ModelKind::Chat).await?;
        provider.batch(entry)
    }

    async fn provider_for(
        &self,
        model_id: &str,
        wanted: ModelKind,
    ) -> Result<(&ModelEntry, Arc<dyn ProviderTransports>)> {
        let entry = self.inner.catalog.get(model_id)?;
        if entry.kind != wanted {
            return Err(Error::WrongModelKind {
                model_id: model_id.into(),
                actual: entry.kind.as_str().into(),
                wanted: wanted.as_str().into(),
                hint: format!(
                    "ask `Models::{}` for it, or set `kind` in the catalog",
                    entry.kind.as_str()
                ),
            });
        }
        let Some(provider) = self.inner.registry.get(&entry.provider) else {
            let hint = KnownProviders::hint_for(&entry.provider);
            return Err(Error::ProviderNotLinked {
                model_id: model_id.into(),
                provider: entry.provider.clone(),
                hint,
            });
        };
        let cell = {
            let mut built = self.inner.built.lock().unwrap_or_else(|e| e.into_inner());
            built.entry(provider.key()).or_default().clone()
        };
        let clients = cell
            .get_or_try_init(|| async {
                let context = ProviderContext::new(
                    provider.key(),
                    self.inner.catalog.clone(),
                    self.inner.credentials.clone(),
                )
                .with_connect_timeout(self.inner.config.connect_timeout);
                tracing::debug!(provider = provider.key(), "building provider clients");
                provider.build(&context).await
            })
            .await?
            .clone();
        Ok((entry, clients))
    }
}
