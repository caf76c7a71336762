//! What a codec hands to the core, whatever carries its bytes (HTTP, an SDK): a failure
//! as a neutral [`WireError`] that one table turns into an [`Error`](crate::Error), a
//! stream as events fed to an [`EventDecoder`] and pumped by [`decode_events`], secrets
//! cut out of text by [`redact`], a model's catalog options read by [`ModelOptions`], and
//! blocks a wire format carries as text only read by [`text_only`].
//! An answer that does not decode is [`malformed`] (one constructor for every codec;
//! [`undecodable`] and [`parse_json`] for its parts); a transport failure is classified
//! by type by [`connection_cause`]. A text stream's codec writes a [`ChunkDecoder`] and
//! gets the rest from the [`StreamDecoder`] shell; its blocks are assembled from their
//! deltas by a [`BlockAssembler`].
//!
//! The HTTP plumbing built on these (the send-once endpoint, headers, the SSE and
//! NDJSON pumps) is [`crate::provider::http`], behind the `http` feature.

mod blocks;
mod connection;
mod decoder;
mod error;
mod events;
mod fold;
mod malformed;
mod options;
mod redact;
mod text;
mod unwritten;

pub use blocks::BlockAssembler;
pub use connection::{DnsFailure, connection_cause, connection_error};
pub use decoder::{ChunkDecoder, StreamDecoder};
pub use error::WireError;
pub use events::{EventDecoder, decode_events};
pub use fold::{folded_turns, has_later_system};
pub use malformed::{MALFORMED_RAW_BYTES, keep_raw, malformed, parse_json, undecodable};
pub use options::{ModelOptions, ToolChoice};
pub use redact::{REDACTED, redact, redact_bytes, redacted_stream};
pub use text::text_only;
pub use unwritten::{Setting, refuse_unwritten, unwritten};
