//! The chat transport: encode, send once, decode. Everything else is the kit's
//! ([`tollgate::provider::http`]).

use tollgate::provider::http::{Endpoint, Framing};
use tollgate::provider::{ChatTransport, Signals, StreamDecoder};
use tollgate::provider::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::codec::{self, Chunks, EncodeOptions, ResponsesEvents, ResponsesOptions};
use crate::dialect::{Dialect, Preset};
use crate::options::{Api, OpenAiOptions, provisional_limit};

/// The chat transport of one model of an OpenAI-like provider.
#[derive(Debug)]
pub struct OpenAiChat {
    endpoint: Endpoint,
    model: ModelEntry,
    options: OpenAiOptions,
    chat_path: String,
    responses_path: String,
    dialect: Dialect,
}

impl OpenAiChat {
    /// The transport of `model` through `endpoint` (its address, key and headers),
    /// posting to `preset`'s paths in its dialect. A provider crate whose paths depend
    /// on the model (Azure's deployments) sets them with [`OpenAiChat::at`].
    pub fn new(
        endpoint: Endpoint,
        model: &ModelEntry,
        options: OpenAiOptions,
        preset: &Preset,
    ) -> Self {
        OpenAiChat {
            endpoint,
            model: model.clone(),
            options,
            chat_path: preset.paths.chat.to_owned(),
            responses_path: preset.paths.responses.unwrap_or_default().to_owned(),
            dialect: preset.dialect,
        }
    }

    /// Posts Chat Completions to `chat` and Responses to `responses` (paths after the
    /// endpoint's base URL, a query string allowed).
    pub fn at(mut self, chat: impl Into<String>, responses: impl Into<String>) -> Self {
        self.chat_path = chat.into();
        self.responses_path = responses.into();
        self
    }

    /// The Chat Completions body a batch line carries: the live request's, never
    /// streamed (refused as a live call would be).
    pub(crate) fn batch_body(&self, request: &LlmRequest) -> Result<serde_json::Value> {
        self.encode(request, false)
    }

    /// A whole Chat Completions answer body, decoded as a live answer is (the batch
    /// results' answers go through here too).
    pub(crate) fn decode_answer(&self, body: &[u8]) -> Result<LlmResponse> {
        codec::decode_response_in(body, &self.dialect)
    }

    /// The endpoint it sends through: the batch API's requests go through it too (its
    /// address, key, headers and error reading).
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Its dialect (a batch's caps, and the error reader of a results line).
    pub(crate) fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    /// The chat path (a batch line's `url`, and its batch's endpoint).
    pub(crate) fn chat_path(&self) -> &str {
        &self.chat_path
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
                dialect: self.dialect,
                extra_body: self.options.extra_body.clone(),
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
                    .post_decoded(&self.chat_path, &body, signals, |bytes| {
                        self.decode_answer(bytes)
                    })
                    .await
            }
            Api::Responses => {
                self.endpoint
                    .post_decoded(
                        &self.responses_path,
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
                    &self.responses_path,
                    &body,
                    signals,
                    Framing::Sse,
                    StreamDecoder::with(ResponsesEvents::default()),
                )
                .await;
        }
        let chunks = Chunks::default()
            .requiring_done(self.options.quirks.done_required)
            .in_dialect(self.dialect);
        self.endpoint
            .stream(
                &self.chat_path,
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
