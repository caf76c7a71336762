//! The `bedrock-converse` codec: tollgate's neutral types to and from the SDK's Converse
//! types. No I/O here (the SDK sends); Claude over InvokeModel reuses
//! `tollgate_anthropic::codec` instead.
//!
//! - [`encode`]: a request as Converse's messages, system blocks, tools, inference and
//!   output config ([`request`]), and the settings beyond sampling ([`settings`]);
//! - [`decode`]: a Converse answer, with its stop reason and usage ([`response`]);
//! - [`ConverseStreamDecoder`]: ConverseStream's events, its blocks from the kit's
//!   [`BlockAssembler`](tollgate::provider::BlockAssembler) ([`stream`]);
//! - Smithy documents to and from JSON ([`document`]).

mod document;
mod request;
mod response;
mod settings;
mod stream;

pub(crate) use request::encode;
pub(crate) use response::decode;
pub(crate) use stream::ConverseStreamDecoder;
