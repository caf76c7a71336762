//! [`Models`]: the catalog, the credential store and the provider registry in one
//! handle that gives a client per catalog model.
//!
//! A provider is built on the first call to one of its models, once, even when many
//! tasks ask at the same moment; a provider whose models are never called is never
//! built and never asks the store for credentials.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::catalog::{Catalog, KnownProviders, ModelEntry, ModelKind};
use crate::client::{
    Decision, DecisionClient, DecisionRequest, Embedding, EmbeddingPurpose, EmbeddingsClient,
    LlmClient,
};
use crate::credentials::{CredentialStore, MemoryCredentialStore};
use crate::error::{Error, Result};
use crate::limit::{FallbackChain, TokenBucketRateLimiter};
use crate::provider::{
    ClientProvider, ProviderClients, ProviderContext, ProviderRegistry, RawEmbeddingsClient,
};
use crate::request::LlmRequest;
use crate::response::LlmResponse;
use crate::stream::ResponseStream;

type BuiltProvider = Arc<OnceCell<Arc<dyn ProviderClients>>>;

/// The entry point: `models.chat("claude-sonnet").await?` gives a client for that
/// catalog model. Cheap to clone; clones share built providers.
#[derive(Clone)]
pub struct Models {
    inner: Arc<Inner>,
}

struct Inner {
    catalog: Arc<Catalog>,
    limiters: HashMap<String, TokenBucketRateLimiter>,
    credentials: Arc<dyn CredentialStore>,
    registry: ProviderRegistry,
    built: Mutex<HashMap<&'static str, BuiltProvider>>,
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
            .finish_non_exhaustive()
    }
}

/// Builds [`Models`].
#[derive(Default)]
pub struct ModelsBuilder {
    catalog: Option<Catalog>,
    credentials: Option<Arc<dyn CredentialStore>>,
    providers: Vec<Arc<dyn ClientProvider>>,
}

impl fmt::Debug for ModelsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelsBuilder").finish_non_exhaustive()
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
    pub fn provider(mut self, provider: impl ClientProvider) -> Self {
        self.providers.push(Arc::new(provider));
        self
    }

    /// Builds the handle. Fails if no catalog was given, if two linked crates register
    /// one key, or if the catalog names a provider key that is neither known nor given.
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
        let limiters = catalog
            .models()
            .map(|m| (m.id.clone(), TokenBucketRateLimiter::for_model(m)))
            .collect();
        Ok(Models {
            inner: Arc::new(Inner {
                limiters,
                catalog: Arc::new(catalog),
                credentials,
                registry,
                built: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Models {
    /// Starts a builder.
    pub fn builder() -> ModelsBuilder {
        ModelsBuilder::default()
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The rate limiter of catalog model `model_id` (one per model, shared by every
    /// client and clone of this handle).
    pub fn limiter(&self, model_id: &str) -> Result<&TokenBucketRateLimiter> {
        self.inner.catalog.get(model_id)?;
        self.inner
            .limiters
            .get(model_id)
            .ok_or_else(|| Error::UnknownModel {
                model_id: model_id.into(),
                known: String::new(),
            })
    }

    /// The fallback chain the catalog gives `model_id` (the model, then its
    /// `fallbacks`), over this handle's limiters.
    pub fn fallback_chain(&self, model_id: &str) -> Result<FallbackChain> {
        FallbackChain::from_catalog(&self.inner.catalog, model_id, &self.inner.limiters)
    }

    /// The provider keys available (linked and given), sorted.
    pub fn provider_keys(&self) -> Vec<&'static str> {
        self.inner.registry.keys()
    }

    /// A chat client for catalog model `model_id`.
    pub async fn chat(&self, model_id: &str) -> Result<Arc<dyn LlmClient>> {
        let (entry, provider) = self.provider_for(model_id, ModelKind::Chat).await?;
        let inner = provider.chat(entry)?;
        Ok(Arc::new(ModelChat {
            model_id: entry.id.clone(),
            inner,
        }))
    }

    /// An embeddings client for catalog model `model_id`: every vector it returns is
    /// L2-normalized and of the catalog's `[embeddings] width`.
    pub async fn embeddings(&self, model_id: &str) -> Result<Arc<dyn EmbeddingsClient>> {
        let (entry, provider) = self.provider_for(model_id, ModelKind::Embeddings).await?;
        let inner = provider.embeddings(entry)?;
        let width = self
            .inner
            .catalog
            .embedding_width()
            .ok_or_else(|| Error::InvalidRequest {
                field: "embeddings.width".into(),
                reason: "is not set in the catalog".into(),
            })?;
        Ok(Arc::new(ModelEmbeddings {
            model_id: entry.id.clone(),
            width,
            dimensions: entry.embedding.dimensions_param.then_some(width),
            truncate: entry.embedding.truncation_safe,
            inner,
        }))
    }

    /// A decision client for catalog model `model_id`.
    pub async fn decision(&self, model_id: &str) -> Result<Arc<dyn DecisionClient>> {
        let (entry, provider) = self.provider_for(model_id, ModelKind::Decision).await?;
        let inner = provider.decision(entry)?;
        Ok(Arc::new(ModelDecision {
            model_id: entry.id.clone(),
            inner,
        }))
    }

    async fn provider_for(
        &self,
        model_id: &str,
        wanted: ModelKind,
    ) -> Result<(&ModelEntry, Arc<dyn ProviderClients>)> {
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
            let known = KnownProviders::linked();
            let hint = match known.crate_name(&entry.provider) {
                Some(krate) if krate != "(linked)" => format!(
                    "add `{krate}` to [dependencies] and the line `use {} as _;` to the binary",
                    krate.replace('-', "_")
                ),
                _ => "add the crate that registers it, or pass it with ModelsBuilder::provider"
                    .into(),
            };
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
                );
                tracing::debug!(provider = provider.key(), "building provider clients");
                provider.build(&context).await
            })
            .await?
            .clone();
        Ok((entry, clients))
    }
}

/// A chat client bound to one catalog model.
#[derive(Debug)]
struct ModelChat {
    model_id: String,
    inner: Arc<dyn LlmClient>,
}

impl ModelChat {
    fn check(&self, request: &LlmRequest) -> Result<()> {
        if request.model_id() == self.model_id {
            Ok(())
        } else {
            Err(Error::InvalidRequest {
                field: "model_id".into(),
                reason: format!(
                    "is `{}` but this client serves model `{}`; ask Models::chat for `{}`",
                    request.model_id(),
                    self.model_id,
                    request.model_id()
                ),
            })
        }
    }
}

#[async_trait::async_trait]
impl LlmClient for ModelChat {
    async fn single_response(&self, request: &LlmRequest) -> Result<LlmResponse> {
        self.check(request)?;
        self.inner.single_response(request).await
    }

    async fn stream_response(&self, request: &LlmRequest) -> Result<ResponseStream> {
        self.check(request)?;
        self.inner.stream_response(request).await
    }
}

/// An embeddings client bound to one model, enforcing the deployment's width.
#[derive(Debug)]
struct ModelEmbeddings {
    model_id: String,
    width: u64,
    dimensions: Option<u64>,
    truncate: bool,
    inner: Arc<dyn RawEmbeddingsClient>,
}

#[async_trait::async_trait]
impl EmbeddingsClient for ModelEmbeddings {
    async fn embed_batch(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Embedding>> {
        let raw = self
            .inner
            .embed_raw(texts, purpose, self.dimensions)
            .await?;
        if raw.len() != texts.len() {
            return Err(Error::ProviderRequest(crate::ProviderRequestError::new(
                200,
                format!(
                    "asked for {} embeddings, the provider returned {}",
                    texts.len(),
                    raw.len()
                ),
            )));
        }
        let width = usize::try_from(self.width).unwrap_or(usize::MAX);
        raw.into_iter()
            .map(|v| Embedding::normalize(&self.model_id, v, width, self.truncate))
            .collect()
    }
}

/// A decision client bound to one catalog model.
#[derive(Debug)]
struct ModelDecision {
    model_id: String,
    inner: Arc<dyn DecisionClient>,
}

#[async_trait::async_trait]
impl DecisionClient for ModelDecision {
    async fn decide(&self, request: &DecisionRequest) -> Result<Decision> {
        if request.model_id() != self.model_id {
            return Err(Error::InvalidRequest {
                field: "model_id".into(),
                reason: format!(
                    "is `{}` but this client serves model `{}`",
                    request.model_id(),
                    self.model_id
                ),
            });
        }
        self.inner.decide(request).await
    }
}
