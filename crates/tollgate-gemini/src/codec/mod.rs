//! The Gemini wire format (`generateContent`, `streamGenerateContent?alt=sse`,
//! embeddings, `google.rpc.Status` errors), to and from tollgate's neutral types; the
//! same for the Gemini API and Vertex AI. No I/O here. Facts and their sources:
//! `shared/PROTOCOLS.md` §6.
//!
//! - [`encode_request`] turns an [`LlmRequest`](tollgate::LlmRequest) into a
//!   `GenerateContentRequest`: system text → `systemInstruction`, roles `user`/`model`
//!   only, images → `inlineData`/`fileData`, tool calls and results →
//!   `functionCall`/`functionResponse`, tools → `functionDeclarations` with
//!   `parametersJsonSchema`, tool choice → `toolConfig`, sampling, the output limit and
//!   a response shape (`responseJsonSchema`) → `generationConfig`. Thought signatures go
//!   back on the parts they came with. Cache marks are dropped (Gemini caches
//!   implicitly; an explicit cache is named by [`EncodeOptions::cached_content`]).
//! - [`decode_response`] and [`StreamDecoder`] (the kit's shell around [`Chunks`]) turn
//!   answers into an
//!   [`LlmResponse`](tollgate::LlmResponse): tool use from `functionCall` parts (the
//!   finish reason is `STOP`), every finish reason and prompt block mapped
//!   ([`finish_reason`]), usage in tollgate's convention ([`WireUsage::neutral`]).
//! - [`read_error`] / [`read_vertex_error`] read a `google.rpc.Status` by status, code
//!   name and typed details (`RetryInfo`, `QuotaFailure`, `ErrorInfo`) into a neutral
//!   [`WireError`](tollgate::provider::WireError); the core decides what it means. A 400
//!   worded as [`OVERFLOW_WORDING`] says is a context overflow.
//!
//! Wire types sit beside their decoders: a decision answer is read by its own types
//! ([`decode_decision`]), not through the chat answer's.

mod decision;
mod embeddings;
mod errors;
mod request;
mod response;
mod stream;

pub use decision::{TOP_LOGPROBS, decode_decision, encode_decision};
pub use embeddings::{
    MAX_BATCH_EMBEDDINGS, decode_batch_embeddings, decode_embed_content, decode_vertex_predict,
    encode_batch_embeddings, encode_vertex_embed_content, encode_vertex_predict, task_type,
};
pub use errors::{
    ERROR_INFO, OVERFLOW_WORDING, QUOTA_FAILURE, RETRY_INFO, Status, is_overflow, parse_duration,
    parse_status, read_error, read_stream_error, read_vertex_error,
};
pub use request::{
    EncodeOptions, MissingSignature, SKIP_SIGNATURE_VALIDATOR, SYNTHETIC_ID_PREFIX, ThinkingConfig,
    encode_request,
};
pub use response::{
    INVALID_OUTPUT_REASONS, REFUSAL_REASONS, WireUsage, decode_response, finish_reason,
};
pub use stream::{Chunks, StreamDecoder};
/// `tool_choice`, the core's neutral form (re-exported for [`EncodeOptions`]).
pub use tollgate::provider::ToolChoice;
