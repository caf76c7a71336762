//! What a codec hands to the core, whatever carries its bytes (HTTP, an SDK): a failure
//! as a neutral [`WireError`] that one table turns into an [`Error`](crate::Error), a
//! stream as events fed to an [`EventDecoder`] and pumped by [`decode_events`], secrets
//! cut out of text by [`redact`], a model's catalog options read by [`ModelOptions`], and
//! blocks a wire format carries as text only read by [`text_only`].
//! An answer that does not decode is [`malformed`] (one constructor for every codec); a
//! transport failure is classified by type by [`connection_cause`].
//!
//! The HTTP plumbing built on these (the send-once endpoint, headers, the SSE and
//! NDJSON pumps) is [`crate::http`], behind the `http` feature.

mod connection;
mod error;
mod events;
mod malformed;
mod options;
mod redact;
mod text;

pub use connection::{DnsFailure, connection_cause, connection_error};
pub use error::WireError;
pub use events::{EventDecoder, decode_events};
pub use malformed::{MALFORMED_RAW_BYTES, keep_raw, malformed};
pub use options::{ModelOptions, ToolChoice};
pub use redact::{REDACTED, redact};
pub use text::text_only;
