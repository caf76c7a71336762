//! Cohere's v2 wire format: chat request bodies, chat answers, stream events, embed
//! bodies and error bodies, to and from tollgate's neutral types. No I/O here.
//!
//! - [`encode_request`] turns an [`LlmRequest`](tollgate::LlmRequest) into a `/v2/chat`
//!   body: leading system messages become one `system` message, tool results `tool`
//!   messages, an assistant's text before its tool calls its `tool_plan`, a response
//!   shape `response_format` with a `json_schema`. A setting Cohere cannot carry
//!   (a named forced tool, `parallel_tool_calls`, a reasoning effort, a loose shape, …)
//!   is refused with [`Error::UnsupportedSetting`](tollgate::Error::UnsupportedSetting)
//!   before anything is sent.
//! - [`decode_response`] turns an answer into an [`LlmResponse`](tollgate::LlmResponse):
//!   the content items (thinking, text) and the `tool_plan` as blocks, then the tool
//!   calls, assembled by the kit's `BlockAssembler` as a stream's are; usage from
//!   `usage.billed_units` (what Cohere bills), else `usage.tokens`. A `finish_reason` of
//!   `ERROR` or `TIMEOUT` is the provider failing ([`read_failed_finish`]), retried.
//! - [`StreamDecoder`] (the kit's shell around [`Events`]) turns the SSE events
//!   (`message-start` … `message-end`) into [`StreamEvent`](tollgate::StreamEvent)s.
//!   Nothing is emitted before the first content, so a failure before it fails the
//!   stream before its first event (and the pipeline retries).
//! - [`encode_embeddings`] and [`decode_embeddings`] are `/v2/embed`'s body and answer.
//! - [`read_error`] reads an error status and body (`{"message": …}`) into a neutral
//!   [`WireError`](tollgate::provider::WireError) by status; the core decides what it
//!   means. The one message read is a context overflow's, whose only sign is its
//!   documented wording ([`OVERFLOW_WORDING`]).

mod embeddings;
mod errors;
mod request;
mod response;
mod stream;

pub use embeddings::{decode_embeddings, encode_embeddings, input_type};
pub use errors::{OVERFLOW_WORDING, is_overflow, read_error, read_failed_finish};
pub use request::{EncodeOptions, MAX_P, MAX_STOP_SEQUENCES, MIN_P, encode_request};
pub use response::{WireUsage, decode_response, stop_reason};
pub use stream::{Events, StreamDecoder};
/// `tool_choice`, the core's neutral form (re-exported for [`EncodeOptions`]).
pub use tollgate::provider::ToolChoice;
