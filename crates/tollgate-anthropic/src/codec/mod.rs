//! The Anthropic Messages wire format: request bodies, response bodies, stream events
//! and error bodies, to and from tollgate's neutral types. No I/O here, so that
//! `tollgate-bedrock` reuses it for Claude on Bedrock (whose body is the same, minus
//! `model` and `stream`, plus its own `anthropic_version`) and `tollgate-gemini` for
//! Claude on Vertex AI (minus `model`, plus its `anthropic_version`): [`Host`] says which.
//!
//! - [`encode_request`] turns an [`LlmRequest`](tollgate::LlmRequest) into the JSON body: system messages go
//!   to the top-level `system` field, [`CacheMark`](tollgate::CacheMark)s become `cache_control` (at most
//!   [`MAX_CACHE_MARKS`], checked before anything is sent), a response shape becomes
//!   `output_config.format`.
//! - [`decode_response`] turns a response body into an [`LlmResponse`](tollgate::LlmResponse), with usage in
//!   tollgate's convention ([`Usage::from_cache_exclusive`](tollgate::Usage::from_cache_exclusive): Anthropic's `input_tokens`
//!   already excludes cache reads and writes; 5-minute and 1-hour writes are kept apart).
//!   A `refusal` stop with `stop_details` is [`Error::ProviderRefusal`](tollgate::Error::ProviderRefusal).
//! - [`StreamDecoder`] (the kit's shell around [`Chunks`]) turns stream events (`message_start` … `message_stop`) into
//!   [`StreamEvent`](tollgate::StreamEvent)s. Nothing is emitted before the first content, so that an error
//!   event before it fails the stream before its first event (and the pipeline retries).
//! - [`encode_count_request`] and [`decode_count`] are the token counter's
//!   (`count_tokens`) body and answer.
//! - [`read_error`] reads an error status and body into a neutral [`WireError`](tollgate::provider::WireError) by
//!   status and `error.type`; the core decides what it means. The one message read is a
//!   context overflow's, whose only sign is its documented wording ([`OVERFLOW_WORDING`]).

mod count;
mod errors;
mod request;
mod response;
mod stream;

pub use count::{COUNT_TOKENS_PATH, decode_count, encode_count_request};
pub use errors::{OVERFLOW_WORDING, is_overflow, read_error, read_stream_error};
pub use request::{
    ANTHROPIC_VERSION, DEFAULT_MAX_TOKENS, EncodeOptions, Host, MAX_CACHE_MARKS, MAX_TEMPERATURE,
    encode_request,
};
pub use response::{decode_response, decode_response_from, stop_reason};
pub use stream::{Chunks, StreamDecoder};
/// `tool_choice`, the core's neutral form (re-exported for [`EncodeOptions`]).
pub use tollgate::provider::ToolChoice;
