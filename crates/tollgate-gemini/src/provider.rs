//! The `gemini` and `vertex` providers: one [`GeminiProvider`] type, two registrations,
//! and the transports it builds per model over the kit's endpoint. The Gemini API
//! documents no rate-limit headers (its limits are per project, seen through 429s); a
//! gateway or mock in front of it may send OpenAI's, so those are read when present
//! ([`OPENAI_RATE_LIMITS`]).

use std::sync::Arc;

use tollgate::provider::batch::BatchTransport;
use tollgate::provider::http::{Auth, Endpoint, HttpClient, OPENAI_RATE_LIMITS};
use tollgate::provider::{
    ChatTransport, DecisionTransport, EmbeddingsTransport, Provider, ProviderContext,
    ProviderTransports,
};
use tollgate::provider::{Error, ModelEntry, Result};

use crate::auth::TokenSource;
use crate::batch::GeminiBatch;
use crate::chat::GeminiChat;
use crate::codec;
use crate::decision::GeminiDecision;
use crate::embeddings::GeminiEmbeddings;
use crate::options::{GeminiModel, GeminiOptions};

/// The `gemini` or `vertex` provider (one type, two registrations: they share the codec
/// and differ in address, path and authentication).
#[derive(Debug, Clone)]
pub struct GeminiProvider {
    key: &'static str,
    tokens: Option<Arc<dyn TokenSource>>,
}

impl GeminiProvider {
    /// The `gemini` provider (the Gemini API, `x-goog-api-key`).
    pub const GEMINI: GeminiProvider = GeminiProvider {
        key: crate::KEY,
        tokens: None,
    };

    /// The `vertex` provider with Google's credentials: a service-account key from the
    /// credential store when the model names one, else Application Default Credentials.
    #[cfg(feature = "vertex")]
    pub const VERTEX: GeminiProvider = GeminiProvider {
        key: crate::VERTEX_KEY,
        tokens: None,
    };

    /// The `vertex` provider with access tokens from `tokens` (an application's own token
    /// broker, or a test's); give it to `ModelsBuilder::provider`.
    pub fn vertex_with_tokens(tokens: Arc<dyn TokenSource>) -> Self {
        GeminiProvider {
            key: crate::VERTEX_KEY,
            tokens: Some(tokens),
        }
    }
}

#[tollgate::provider::async_trait]
impl Provider for GeminiProvider {
    fn key(&self) -> &'static str {
        self.key
    }

    /// `gcp.gemini` (the Gemini API) or `gcp.vertex_ai` (Vertex AI).
    fn conventions_name(&self) -> &'static str {
        if self.key == crate::VERTEX_KEY {
            "gcp.vertex_ai"
        } else {
            "gcp.gemini"
        }
    }

    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        GeminiOptions::from_model(model).ok().map(|o| o.base_url)
    }

    /// A `vertex` model without a credential uses Application Default Credentials.
    fn requires_credential(&self) -> bool {
        self.key == crate::KEY
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        let tokens = match (&self.tokens, self.key == crate::VERTEX_KEY) {
            (_, false) => None,
            (Some(tokens), true) => Some(tokens.clone()),
            (None, true) => Some(crate::auth::google_tokens(context)?),
        };
        Ok(Arc::new(GeminiClients {
            http: HttpClient::new(context)?,
            tokens,
        }))
    }
}

#[derive(Debug)]
struct GeminiClients {
    http: HttpClient,
    tokens: Option<Arc<dyn TokenSource>>,
}

impl GeminiClients {
    /// The model as its transports call it, and its endpoint: `x-goog-api-key` from the
    /// credential store (`gemini`) or a bearer token (`vertex`), and
    /// `x-goog-user-project` when the options name a quota project.
    fn endpoint(&self, entry: &ModelEntry) -> Result<(Endpoint, GeminiModel)> {
        let model = GeminiModel::new(entry)?;
        let base_url = &model.options.base_url;
        let mut endpoint = match &self.tokens {
            None => self
                .http
                .endpoint(entry, base_url, codec::read_error)
                .require_credential()?
                .auth(Auth::Header("x-goog-api-key")),
            Some(tokens) => {
                let source = crate::auth::ModelTokens::new(tokens.clone(), entry);
                self.http
                    .endpoint(entry, base_url, codec::read_vertex_error)
                    .secret_source(Arc::new(source))
            }
        }
        .rate_limits(OPENAI_RATE_LIMITS);
        if let Some(project) = model
            .options
            .vertex
            .as_ref()
            .and_then(|v| v.quota_project.clone())
        {
            endpoint = endpoint.header("x-goog-user-project", project);
        }
        Ok((endpoint, model))
    }
}

impl ProviderTransports for GeminiClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let (endpoint, model) = self.endpoint(model)?;
        Ok(Arc::new(GeminiChat::new(endpoint, model)))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let (endpoint, model) = self.endpoint(model)?;
        Ok(Arc::new(GeminiEmbeddings::new(endpoint, model)))
    }

    /// Refuses a model whose catalog entry does not say it returns logprobs
    /// (`options.logprobs = true`): availability differs per model and per API.
    fn decision(&self, entry: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let (endpoint, model) = self.endpoint(entry)?;
        if !model.options.logprobs {
            return Err(Error::Unsupported {
                model_id: entry.id.clone(),
                provider: entry.provider.clone(),
                capability: "decision (the decision client reads logprobs, which only some \
                             Gemini models return; set `options.logprobs = true` for a model \
                             that does)"
                    .into(),
            });
        }
        Ok(Arc::new(GeminiDecision::new(endpoint, model)))
    }

    /// The Gemini API's batch mode ([`GeminiBatch`]); `vertex` has none (Vertex AI's
    /// batch prediction jobs read and write Cloud Storage or BigQuery).
    fn batch(&self, entry: &ModelEntry) -> Result<Arc<dyn BatchTransport>> {
        if self.tokens.is_some() || entry.provider == crate::VERTEX_KEY {
            return Err(Error::Unsupported {
                model_id: entry.id.clone(),
                provider: entry.provider.clone(),
                capability: "batch (Vertex AI's batch prediction jobs read and write Cloud \
                             Storage or BigQuery, which tollgate does not; the `gemini` \
                             provider has the Gemini API's batch mode)"
                    .into(),
            });
        }
        let (endpoint, model) = self.endpoint(entry)?;
        Ok(Arc::new(GeminiBatch::new(endpoint, model)))
    }
}
