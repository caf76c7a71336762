//! The chat transport: encode, send once, decode. Everything else is the kit's
//! ([`tollgate::provider::http`]).

use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{
    AccountingRule, CacheReadAccounting, ChatTransport, OutputAccounting, Signals, TokenCounting,
};
use tollgate::provider::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::codec::{self, EncodeOptions, StreamDecoder};
use crate::options::AnthropicOptions;

/// The chat transport of one `anthropic-direct` model. Holds the credential's id, never
/// the key: the key is fetched from the store for each request.
#[derive(Debug)]
pub struct AnthropicChat {
    endpoint: Endpoint,
    model: ModelEntry,
    options: AnthropicOptions,
}

const MESSAGES_PATH: &str = "/v1/messages";

impl AnthropicChat {
    pub(crate) fn new(endpoint: Endpoint, model: &ModelEntry, options: AnthropicOptions) -> Self {
        AnthropicChat {
            endpoint,
            model: model.clone(),
            options,
        }
    }

    /// The endpoint the model's requests go to (its address, key and fixed headers).
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The model's catalog entry.
    pub(crate) fn model(&self) -> &ModelEntry {
        &self.model
    }

    /// The model's options.
    pub(crate) fn options(&self) -> &AnthropicOptions {
        &self.options
    }

    /// The Messages body of `request`, streamed or not: what the live call sends, and
    /// what a batch request carries as its `params`.
    pub(crate) fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
        codec::encode_request(
            request,
            &EncodeOptions {
                model: Some(self.model.name.clone()),
                max_tokens: self
                    .model
                    .output_limit(None)
                    .unwrap_or(codec::DEFAULT_MAX_TOKENS),
                stream,
                top_k: self.options.top_k,
                tool_choice: self.options.tool_choice.clone(),
                host: codec::Host::Anthropic,
                mid_conversation_system: self.options.mid_conversation_system,
            },
        )
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for AnthropicChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        self.endpoint
            .post_decoded(MESSAGES_PATH, &body, signals, codec::decode_response)
            .await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        self.endpoint
            .stream(
                MESSAGES_PATH,
                &body,
                signals,
                Framing::Sse,
                StreamDecoder::new(),
            )
            .await
    }

    /// Anthropic's own counter, `POST /v1/messages/count_tokens`, with the same key and
    /// headers as the model's messages. Its answer's rate-limit headers are the
    /// counter's (Anthropic limits counting apart from messages), so they are not passed
    /// to the model's limiter.
    async fn count_input_tokens(&self, request: &LlmRequest) -> TokenCounting {
        let counted = async {
            let body = codec::encode_count_request(
                request,
                &self.model.name,
                self.options.tool_choice.clone(),
            )?;
            self.endpoint
                .post_decoded(
                    codec::COUNT_TOKENS_PATH,
                    &body,
                    &Signals::default(),
                    codec::decode_count,
                )
                .await
        };
        match counted.await {
            Ok(tokens) => TokenCounting::Counted(tokens),
            Err(e) => TokenCounting::Failed(e),
        }
    }

    /// Anthropic counts output actually produced against output TPM, and cache reads do
    /// not count against input TPM.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::NotCounted,
        }
    }
}
