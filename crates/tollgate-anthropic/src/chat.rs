//! The chat transport: encode, send once, decode. Everything else is the kit's
//! ([`tollgate::provider::http`]).

use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{
    AccountingRule, CacheReadAccounting, ChatTransport, OutputAccounting, Signals,
};
use tollgate::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

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

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
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

    /// Anthropic counts output actually produced against output TPM, and cache reads do
    /// not count against input TPM.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::NotCounted,
        }
    }
}
