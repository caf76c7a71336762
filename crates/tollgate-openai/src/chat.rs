//! The chat transport: encode, send once, decode. Everything else is the kit's
//! ([`tollgate::provider::http`]).

use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{ChatTransport, Signals, StreamDecoder};
use tollgate::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::codec::{self, Chunks, EncodeOptions, ResponsesEvents, ResponsesOptions};
use crate::options::{Api, OpenAiOptions, provisional_limit};

/// Where Chat Completions are posted.
pub(crate) const CHAT_PATH: &str = "/v1/chat/completions";

/// Where Responses are posted.
pub(crate) const RESPONSES_PATH: &str = "/v1/responses";

/// The chat transport of one `openai` or `openai-compatible` model.
#[derive(Debug)]
pub struct OpenAiChat {
    endpoint: Endpoint,
    model: ModelEntry,
    options: OpenAiOptions,
}

impl OpenAiChat {
    pub(crate) fn new(endpoint: Endpoint, model: &ModelEntry, options: OpenAiOptions) -> Self {
        OpenAiChat {
            endpoint,
            model: model.clone(),
            options,
        }
    }

    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
        if self.options.api == Api::Responses {
            return codec::encode_responses_request(
                request,
                &ResponsesOptions {
                    model: self.model.name.clone(),
                    max_tokens: self.model.output_limit(None),
                    stream,
                    tool_choice: self.options.tool_choice.clone(),
                },
            );
        }
        let quirks = self.options.quirks;
        codec::encode_request(
            request,
            &EncodeOptions {
                model: self.model.name.clone(),
                max_tokens: self.model.output_limit(None),
                output_limit_field: quirks.output_limit_field,
                stream,
                stream_usage: quirks.stream_usage,
                tool_choice: self.options.tool_choice.clone(),
            },
        )
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for OpenAiChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        match self.options.api {
            Api::Chat => {
                self.endpoint
                    .post_decoded(CHAT_PATH, &body, signals, codec::decode_response)
                    .await
            }
            Api::Responses => {
                self.endpoint
                    .post_decoded(
                        RESPONSES_PATH,
                        &body,
                        signals,
                        codec::decode_responses_response,
                    )
                    .await
            }
        }
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        if self.options.api == Api::Responses {
            return self
                .endpoint
                .stream(
                    RESPONSES_PATH,
                    &body,
                    signals,
                    Framing::Sse,
                    StreamDecoder::with(ResponsesEvents::default()),
                )
                .await;
        }
        let chunks = Chunks::default().requiring_done(self.options.quirks.done_required);
        self.endpoint
            .stream(
                CHAT_PATH,
                &body,
                signals,
                Framing::Sse,
                StreamDecoder::with(chunks),
            )
            .await
    }

    /// Tiktoken's exact count for OpenAI's models (plus tollgate's per-message and
    /// per-request overheads); the conservative default for other servers. Until the
    /// process has loaded the table, a small request is counted by its bytes instead
    /// (up to `provisional_limit`), so the first call does not wait for the load.
    fn estimate_input_tokens(&self, request: &LlmRequest) -> u64 {
        let output = self
            .model
            .output_limit(request.sampling_params().max_output_tokens())
            .unwrap_or(0);
        let limit = provisional_limit(&self.model, output);
        self.options
            .count(&self.model, limit, |e| e.estimate_request(request))
    }

    // `accounting` is the default: OpenAI counts the reserved output limit against
    // output TPM at request time, so output settles at the reservation.
}
