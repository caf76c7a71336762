//! The Anthropic dialect: `POST /v1/messages`, whole or streamed. Any catalog model
//! answers, whatever its provider.

mod handlers;
mod request;
mod response;

pub(crate) use handlers::messages;
