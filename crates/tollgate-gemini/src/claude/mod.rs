//! `anthropic-vertex`: Claude on Vertex AI. Anthropic's Messages wire format (the codec of
//! `tollgate-anthropic`, as `anthropic-bedrock` reuses it) over Vertex's `rawPredict`
//! routes, with the same Google OAuth as `vertex` ([`crate::auth`]).
//!
//! - `POST {base}/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict`
//!   (`:streamRawPredict` for a stream, answered with Anthropic's SSE events); the base is
//!   the region's address ([`VertexPlace::base_url`](crate::VertexPlace::base_url):
//!   `global` → `aiplatform.googleapis.com`).
//! - The body is the Messages body without `model`, with
//!   `"anthropic_version": "vertex-2023-10-16"` ([`VERTEX_ANTHROPIC_VERSION`]) and no
//!   `anthropic-version` header; `options.beta` goes as the `anthropic-beta` header, as
//!   Anthropic's own Vertex client sends it.
//! - Errors come in two shapes, read by [`read_error`]: Google's `google.rpc.Status`
//!   (quota 429s, auth, a model not enabled) and Anthropic's `{"type":"error",…}` (the
//!   model's own errors).
//! - Vertex sends no rate-limit headers for Claude (none of Anthropic's
//!   `anthropic-ratelimit-*`): none are read; limits show as 429s.

mod chat;
mod errors;
mod options;
mod provider;

pub use chat::{AnthropicVertexChat, VERTEX_ANTHROPIC_VERSION};
pub use errors::read_error;
pub use options::AnthropicVertexOptions;
pub use provider::AnthropicVertexProvider;
