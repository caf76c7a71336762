//! The Anthropic dialect: `POST /v1/messages`, whole or streamed, and
//! `POST /v1/messages/count_tokens`. Any catalog model answers, whatever its provider.

mod handlers;
mod request;
mod response;

pub use handlers::TOKEN_COUNT_HEADER;
pub(crate) use handlers::{COUNT_TOKENS, MESSAGES, count_tokens, messages};
