//! The providers and their chat transport: encode, send once, decode. Everything else is
//! the kit's ([`tollgate::http`]); [`Endpoint`] adds the model, its options and its
//! paths to the kit's endpoint for the chat, embeddings and decision transports.

use std::sync::Arc;

use tollgate::http::{Auth, Framing, HttpClient, OPENAI_RATE_LIMITS};
use tollgate::limit::{AccountingRule, CacheReadAccounting, OutputAccounting};
use tollgate::pipeline::{ChatTransport, DecisionTransport, EmbeddingsTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{Error, LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::auth::TokenSource;
use crate::codec::{self, EncodeOptions, StreamDecoder};
use crate::decision::GeminiDecision;
use crate::embeddings::GeminiEmbeddings;
use crate::options::{GeminiOptions, model_name};

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

#[tollgate::async_trait]
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

fn is_model_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}

impl GeminiClients {
    fn endpoint(&self, model: &ModelEntry) -> Result<Endpoint> {
        let options = GeminiOptions::from_model(model)?;
        let name = model_name(model);
        if !is_model_name(&name) {
            return Err(Error::Catalog(
                tollgate::catalog::CatalogError::InvalidField {
                    model_id: model.id.clone(),
                    field: "name".into(),
                    reason: "must be a Gemini model name (letters, digits, `-`, `_`, `.`, `@`), \
                         e.g. `gemini-2.5-flash`"
                        .into(),
                },
            ));
        }
        let mut http = match &self.tokens {
            None => self
                .http
                .endpoint(model, &options.base_url, codec::read_error)
                .require_credential()?
                .auth(Auth::Header("x-goog-api-key"))
                // The Gemini API documents no rate-limit headers (its limits are per
                // project, seen through 429s); a gateway or mock in front of it may send
                // OpenAI's: read when present, nothing when absent.
                .rate_limits(OPENAI_RATE_LIMITS),
            Some(tokens) => {
                let source = crate::auth::ModelTokens::new(tokens.clone(), model);
                self.http
                    .endpoint(model, &options.base_url, codec::read_vertex_error)
                    .secret_source(Arc::new(source))
                    .rate_limits(OPENAI_RATE_LIMITS)
            }
        };
        if let Some(project) = options
            .vertex
            .as_ref()
            .and_then(|v| v.quota_project.clone())
        {
            http = http.header("x-goog-user-project", project);
        }
        Ok(Endpoint {
            http,
            model: model.clone(),
            name,
            options,
        })
    }
}

impl ProviderTransports for GeminiClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(GeminiChat {
            endpoint: self.endpoint(model)?,
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Ok(Arc::new(GeminiEmbeddings::new(self.endpoint(model)?)))
    }

    /// Refuses a model whose catalog entry does not say it returns logprobs
    /// (`options.logprobs = true`): availability differs per model and per API.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let endpoint = self.endpoint(model)?;
        if !endpoint.options.logprobs {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "decision (the decision client reads logprobs, which only some \
                             Gemini models return; set `options.logprobs = true` for a model \
                             that does)"
                    .into(),
            });
        }
        Ok(Arc::new(GeminiDecision::new(endpoint)))
    }
}

/// One model's kit endpoint, entry, name and options.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) http: tollgate::http::Endpoint,
    pub(crate) model: ModelEntry,
    pub(crate) name: String,
    pub(crate) options: GeminiOptions,
}

impl Endpoint {
    /// The path of `method` (`generateContent`, `batchEmbedContents`, …) for this model.
    pub(crate) fn path(&self, method: &str) -> String {
        match &self.options.vertex {
            Some(place) => place.path(&self.name, method),
            None => format!("/v1beta/models/{}:{method}", self.name),
        }
    }

    /// POSTs `body` to `method` once and reads the whole answer.
    pub(crate) async fn post_json(
        &self,
        method: &str,
        body: &serde_json::Value,
        signals: &Signals,
    ) -> Result<Vec<u8>> {
        self.http.post_json(&self.path(method), body, signals).await
    }

    /// The catalog's `thinkingConfig`, as JSON, if it sets one.
    pub(crate) fn thinking_json(&self) -> Option<serde_json::Value> {
        self.options.thinking.to_json()
    }

    /// The codec's options from the catalog entry.
    pub(crate) fn encode_options(&self) -> EncodeOptions {
        let o = &self.options;
        EncodeOptions {
            max_output_tokens: self.model.output_limit(None),
            tool_choice: o.tool_choice.clone(),
            top_k: o.top_k,
            thinking: o.thinking.clone(),
            cached_content: o.cached_content.clone(),
            missing_signature: o.missing_signature,
        }
    }
}

/// The chat transport of one `gemini` or `vertex` model.
#[derive(Debug)]
pub struct GeminiChat {
    endpoint: Endpoint,
}

#[tollgate::async_trait]
impl ChatTransport for GeminiChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = codec::encode_request(request, &self.endpoint.encode_options())?;
        let bytes = self
            .endpoint
            .post_json("generateContent", &body, signals)
            .await?;
        codec::decode_response(&bytes)
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = codec::encode_request(request, &self.endpoint.encode_options())?;
        let path = self.endpoint.path("streamGenerateContent?alt=sse");
        self.endpoint
            .http
            .stream(&path, &body, signals, Framing::Sse, StreamDecoder::new())
            .await
    }

    /// Gemini's TPM counts input tokens only (the catalog sets `input_tpm`, never an
    /// output limit; see [`GeminiOptions::from_model`]); implicit cache hits count as
    /// input as far as is known.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::CountAsInput,
        }
    }
}
