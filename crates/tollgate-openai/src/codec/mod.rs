//! The OpenAI Chat Completions, Responses and Embeddings wire formats: request bodies, response
//! bodies, stream chunks, error bodies and rate-limit header values, to and from
//! tollgate's neutral types. No I/O here.
//!
//! - [`encode_request`] turns an [`LlmRequest`](tollgate::LlmRequest) into a Chat Completions body: system
//!   messages stay `system` messages, tool results become `tool` messages, tool uses
//!   become `tool_calls`, a response shape becomes `response_format` with a JSON schema.
//!   Cache marks are dropped (OpenAI caches prompts automatically); thinking blocks are
//!   dropped (Chat Completions takes no reasoning input).
//! - [`decode_response`] turns a response body into an [`LlmResponse`](tollgate::LlmResponse), with usage in
//!   tollgate's convention ([`Usage::from_cache_inclusive`](tollgate::Usage::from_cache_inclusive): `prompt_tokens` includes
//!   `cached_tokens`). A non-empty `message.refusal` is [`Error::ProviderRefusal`](tollgate::Error::ProviderRefusal), and
//!   so is `finish_reason: "refusal"` (not OpenAI's, but sent by some compatible servers).
//! - [`StreamDecoder`] (the kit's shell around [`Chunks`]) turns `chat.completion.chunk`s into [`StreamEvent`](tollgate::StreamEvent)s. Nothing is
//!   emitted before the first content, so an error before it fails the stream before
//!   its first event (and the pipeline retries).
//! - [`read_error`] reads an error status and body into a neutral [`WireError`](tollgate::provider::WireError) by
//!   status, `error.type` and `error.code` (never by message text); the core decides
//!   what it means.
//!
//! - [`encode_responses_request`], [`decode_responses_response`] and [`ResponsesEvents`]
//!   do the same for the Responses API (`POST /v1/responses`, stateless: `store: false`).
//!
//! Wire types sit beside their decoders: a decision answer is read by its own types
//! ([`decode_decision`]), not through the chat answer's.

mod decision;
mod embeddings;
mod errors;
mod request;
mod response;
mod responses;
mod responses_stream;
mod stream;

pub use decision::{decode_decision, decode_decision_in, encode_decision};
pub use embeddings::{decode_embeddings, encode_embeddings};
pub use errors::{QUOTA_CODES, read_error, read_stream_error};
pub use request::{EncodeOptions, encode_request};
pub use response::{WireUsage, decode_response, decode_response_in, stop_reason};
pub use responses::{
    ResponsesOptions, decode_responses_response, encode_responses_request, reasoning_signature,
};
pub use responses_stream::{ResponsesEvents, ResponsesStreamDecoder};
pub use stream::{Chunks, StreamDecoder};
/// `tool_choice`, the core's neutral form (re-exported for [`EncodeOptions`]).
pub use tollgate::provider::ToolChoice;
/// Reads `x-ratelimit-reset-*` values such as `6m0s` (the kit's parser).
pub use tollgate::provider::http::parse_go_duration;
