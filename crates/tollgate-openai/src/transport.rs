//! The providers and their chat transport: encode, send once, decode. Everything else is
//! the kit's ([`tollgate::http`]); [`Endpoint`] adds the model and its options to the
//! kit's endpoint for the chat, embeddings and decision transports.

use std::sync::Arc;

use tollgate::http::{Framing, HttpClient, OPENAI_RATE_LIMITS};
use tollgate::pipeline::{
    ChatTransport, DecisionTransport, EmbeddingsTransport, Signals, TiktokenEstimator,
    TokenEstimator,
};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{Error, LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::codec::{self, EncodeOptions, StreamDecoder};
use crate::decision::OpenAiDecision;
use crate::embeddings::OpenAiEmbeddings;
use crate::options::OpenAiOptions;

/// The `openai` or `openai-compatible` provider (one type, two registrations: they share
/// the codec and differ only in [`crate::Quirks`] and whether a credential is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenAiProvider {
    key: &'static str,
}

impl OpenAiProvider {
    /// The `openai` provider.
    pub const OPENAI: OpenAiProvider = OpenAiProvider { key: crate::KEY };
    /// The `openai-compatible` provider.
    pub const COMPATIBLE: OpenAiProvider = OpenAiProvider {
        key: crate::COMPATIBLE_KEY,
    };
}

#[tollgate::async_trait]
impl Provider for OpenAiProvider {
    fn key(&self) -> &'static str {
        self.key
    }

    /// `openai` for both keys: the conventions name the API an instrumentation speaks
    /// when the server behind it is unknown (`server.address` tells the servers apart).
    fn conventions_name(&self) -> &'static str {
        "openai"
    }

    /// The model's `base_url`. `Models::build` asks this of every catalog model of the
    /// provider, before any call: for a model whose input is counted with tiktoken it
    /// also starts loading the model's table on a thread of its own
    /// ([`TiktokenEncoding::warm_up`](tollgate::pipeline::TiktokenEncoding::warm_up)), so
    /// that the first call does not pay for the load (about 150 ms of CPU in a release
    /// build, 0.5–2 s in a debug one on a busy machine); build does not wait for it.
    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        OpenAiOptions::from_model(model).ok().map(|o| o.base_url)
    }

    /// Starts loading the model's tiktoken table in the background, so that the process's
    /// first call does not load it on its way out (`openai-compatible` loads nothing).
    fn prepare(&self, model: &ModelEntry) {
        if OpenAiOptions::from_model(model).is_ok_and(|o| o.quirks.tiktoken) {
            TiktokenEstimator::for_model(&model.name).warm_up();
        }
    }

    /// `openai-compatible` servers often take no key; a model may still name one.
    fn requires_credential(&self) -> bool {
        self.key == crate::KEY
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(OpenAiClients {
            key: self.key,
            http: HttpClient::new(context)?,
        }))
    }
}

#[derive(Debug)]
struct OpenAiClients {
    key: &'static str,
    http: HttpClient,
}

impl OpenAiClients {
    fn endpoint(&self, model: &ModelEntry) -> Result<Endpoint> {
        let options = OpenAiOptions::from_model(model)?;
        let mut http = self
            .http
            .endpoint(model, &options.base_url, codec::read_error)
            .rate_limits(OPENAI_RATE_LIMITS);
        if self.key == crate::KEY {
            http = http.require_credential()?;
        }
        if let Some(org) = &options.organization {
            http = http.header("OpenAI-Organization", org);
        }
        if let Some(project) = &options.project {
            http = http.header("OpenAI-Project", project);
        }
        Ok(Endpoint {
            http,
            model: model.clone(),
            options,
        })
    }
}

impl ProviderTransports for OpenAiClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(OpenAiChat {
            endpoint: self.endpoint(model)?,
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Ok(Arc::new(OpenAiEmbeddings::new(self.endpoint(model)?)))
    }

    /// Refuses a model whose options say its server returns no logprobs.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let endpoint = self.endpoint(model)?;
        if !endpoint.options.quirks.logprobs {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "decision (the decision client reads logprobs, and this model's \
                             catalog entry says its server returns none: `options.logprobs = false`)"
                    .into(),
            });
        }
        Ok(Arc::new(OpenAiDecision::new(endpoint)))
    }
}

/// One model's kit endpoint, entry and options.
#[derive(Debug)]
pub(crate) struct Endpoint {
    http: tollgate::http::Endpoint,
    pub(crate) model: ModelEntry,
    pub(crate) options: OpenAiOptions,
}

impl Endpoint {
    /// The output limit to send when the request has none.
    pub(crate) fn default_output_limit(&self) -> Option<u64> {
        self.model.output_limit(None)
    }

    /// POSTs `body` to `{base_url}{path}` once, reads the whole answer and decodes it
    /// with `decode` (the key redacted from what an undecodable answer keeps).
    pub(crate) async fn post_decoded<T>(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
        decode: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        self.http.post_decoded(path, body, signals, decode).await
    }

    /// Input tokens of `text`: tiktoken for OpenAI's models, tollgate's conservative
    /// estimate for other servers' (whose tokenizers are unknown).
    pub(crate) fn estimate_text(&self, text: &str) -> u64 {
        if self.options.quirks.tiktoken {
            TiktokenEstimator::for_model(&self.model.name).estimate_text(text)
        } else {
            tollgate::pipeline::DefaultEstimator.estimate_text(text)
        }
    }
}

/// The chat transport of one `openai` or `openai-compatible` model.
#[derive(Debug)]
pub struct OpenAiChat {
    endpoint: Endpoint,
}

impl OpenAiChat {
    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
        let quirks = self.endpoint.options.quirks;
        codec::encode_request(
            request,
            &EncodeOptions {
                model: self.endpoint.model.name.clone(),
                max_tokens: self.endpoint.default_output_limit(),
                output_limit_field: quirks.output_limit_field,
                stream,
                stream_usage: quirks.stream_usage,
                tool_choice: self.endpoint.options.tool_choice.clone(),
            },
        )
    }
}

const CHAT_PATH: &str = "/v1/chat/completions";

#[tollgate::async_trait]
impl ChatTransport for OpenAiChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        self.endpoint
            .post_decoded(CHAT_PATH, &body, signals, codec::decode_response)
            .await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        let decoder =
            StreamDecoder::new().requiring_done(self.endpoint.options.quirks.done_required);
        self.endpoint
            .http
            .stream(CHAT_PATH, &body, signals, Framing::Sse, decoder)
            .await
    }

    /// Tiktoken's exact count for OpenAI's models (plus tollgate's per-message and
    /// per-request overheads); the conservative default for other servers.
    fn estimate_input_tokens(&self, request: &LlmRequest) -> u64 {
        if self.endpoint.options.quirks.tiktoken {
            TiktokenEstimator::for_model(&self.endpoint.model.name).estimate_request(request)
        } else {
            tollgate::pipeline::DefaultEstimator.estimate_request(request)
        }
    }

    // `accounting` is the default: OpenAI counts the reserved output limit against
    // output TPM at request time, so output settles at the reservation.
}
