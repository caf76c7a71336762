//! The retryable provider failures ([`ProviderError`]), what broke a connection
//! ([`ConnectionCause`]), and the provider's rejection of a request
//! ([`ProviderRequestError`]).

use std::fmt;
use std::time::Duration;

/// The retryable provider failures (DESIGN §4). Nothing else is retried. Exhaustive on
/// purpose, like [`crate::Error`]: a new variant must be decided everywhere it is matched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// HTTP 429 "slow down". `retry_after` is a lower bound for the next attempt.
    #[error("rate limited by the provider (HTTP 429){}; tollgate retries after a back-off", RetryAfter(*retry_after))]
    RateLimited {
        /// The provider's `retry-after`, if sent.
        retry_after: Option<Duration>,
    },
    /// HTTP 529 or the provider's "overloaded" (which some send with another status,
    /// e.g. a 503 whose body says `overloaded_error`).
    #[error("the provider is overloaded (HTTP {status}){}; tollgate retries after a back-off", RetryAfter(*retry_after))]
    Overloaded {
        /// The HTTP status the wire said: 529 as Anthropic sends it, or the 5xx that
        /// carried an "overloaded" body.
        status: u16,
        /// The provider's `retry-after`, if sent.
        retry_after: Option<Duration>,
    },
    /// A 5xx server error.
    #[error(
        "the provider failed with a server error (HTTP {status}){}; tollgate retries after a back-off",
        RetryAfter(*retry_after)
    )]
    Server {
        /// The HTTP status (500–599).
        status: u16,
        /// The provider's `retry-after`, if sent (a 503 often carries one).
        retry_after: Option<Duration>,
    },
    /// No answer arrived within the deadline (or the connection could not be made in time,
    /// or a stream went quiet for longer than the model's `stream_idle_timeout_secs`).
    #[error("the provider did not answer within the deadline{}", After(*after))]
    Timeout {
        /// The deadline that passed, if known.
        after: Option<Duration>,
    },
    /// A success answer (a body, or a stream event before any reached the reader) that
    /// does not decode. Retried: a garbled answer is a transient fault, and the next
    /// attempt usually decodes. Build one with [`crate::provider::wire::malformed`].
    #[error(
        "the provider sent an answer that does not decode ({what}); its first {} of {raw_len} \
         bytes: {raw:?}; tollgate retries after a back-off",
        raw.len()
    )]
    Malformed {
        /// What the decoder said was wrong.
        what: String,
        /// The answer's first bytes (at most [`crate::provider::wire::MALFORMED_RAW_BYTES`], as
        /// UTF-8 with invalid bytes replaced), with the credential redacted.
        raw: String,
        /// The whole answer's (or event's) length in bytes.
        raw_len: usize,
    },
    /// The connection failed before a whole answer arrived: refused, reset, closed
    /// early, no address for the host, or a TLS failure. `cause` is read from the
    /// error's type (never its message); `detail` is the innermost error's text, with
    /// the credential redacted.
    #[error(
        "the connection to the provider failed ({cause}): {detail}; tollgate retries after a back-off"
    )]
    Connection {
        /// What kind of failure it was.
        cause: ConnectionCause,
        /// The underlying error's text (no URL, no credential).
        detail: String,
    },
}

/// Why a connection failed ([`ProviderError::Connection`]), read from the error's type:
/// `std::io::ErrorKind`, hyper's and rustls' error types, the resolver's own error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionCause {
    /// Nothing listens there (connection refused).
    Refused,
    /// The peer reset or aborted the connection (or the pipe broke).
    Reset,
    /// The connection closed before the whole answer arrived (headers or body cut, a
    /// stream that ended before its last event).
    ClosedEarly,
    /// The host name did not resolve.
    Dns,
    /// The TLS handshake or session failed (certificate, protocol).
    Tls,
    /// Another transport failure.
    Other,
}

impl ConnectionCause {
    /// A stable snake_case name: `refused`, `reset`, `closed_early`, `dns`, `tls`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionCause::Refused => "refused",
            ConnectionCause::Reset => "reset",
            ConnectionCause::ClosedEarly => "closed_early",
            ConnectionCause::Dns => "dns",
            ConnectionCause::Tls => "tls",
            ConnectionCause::Other => "other",
        }
    }
}

impl fmt::Display for ConnectionCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnectionCause::Refused => "connection refused",
            ConnectionCause::Reset => "connection reset",
            ConnectionCause::ClosedEarly => "connection closed before the answer was complete",
            ConnectionCause::Dns => "the host name did not resolve",
            ConnectionCause::Tls => "TLS failure",
            ConnectionCause::Other => "transport failure",
        })
    }
}

impl ProviderError {
    /// A 529 "overloaded" with the provider's `retry-after`, if sent.
    pub fn overloaded(retry_after: Option<Duration>) -> Self {
        ProviderError::Overloaded {
            status: 529,
            retry_after,
        }
    }

    /// A server error with `status` (500–599) and no `retry-after`.
    pub fn server(status: u16) -> Self {
        ProviderError::Server {
            status,
            retry_after: None,
        }
    }

    /// A connection that closed before the whole answer arrived, with `detail`.
    pub fn closed_early(detail: impl Into<String>) -> Self {
        ProviderError::Connection {
            cause: ConnectionCause::ClosedEarly,
            detail: detail.into(),
        }
    }

    /// A stable snake_case name for the failure's kind (see [`crate::Error::kind`]).
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Overloaded { .. } => "overloaded",
            ProviderError::Server { .. } => "server_error",
            ProviderError::Timeout { .. } => "timeout",
            ProviderError::Malformed { .. } => "malformed",
            ProviderError::Connection { .. } => "connection",
        }
    }

    /// The HTTP status this failure stands for, as the wire said it: 429, the
    /// overloaded answer's status (529 or a 5xx), the 5xx; `None` for a timeout, a
    /// connection failure and a malformed answer (no error status was sent).
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::RateLimited { .. } => Some(429),
            ProviderError::Overloaded { status, .. } | ProviderError::Server { status, .. } => {
                Some(*status)
            }
            ProviderError::Timeout { .. }
            | ProviderError::Malformed { .. }
            | ProviderError::Connection { .. } => None,
        }
    }

    /// The provider's requested wait, if it sent one (on a 429, a 529 or any 5xx).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after }
            | ProviderError::Overloaded { retry_after, .. }
            | ProviderError::Server { retry_after, .. } => *retry_after,
            ProviderError::Timeout { .. }
            | ProviderError::Malformed { .. }
            | ProviderError::Connection { .. } => None,
        }
    }

    /// The provider's requested wait in whole milliseconds, if it sent one.
    pub fn retry_after_ms(&self) -> Option<u64> {
        self.retry_after()
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The provider rejected the request (a 4xx other than 429). Not a [`ProviderError`],
/// so never retried. (An undecodable success body is [`ProviderError::Malformed`].)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the provider rejected the request (HTTP {status}): {message}; fix the request, it is not retried"
)]
pub struct ProviderRequestError {
    /// The HTTP status, e.g. 400 (200 only for a rejection a codec finds in a success
    /// body, e.g. a tool call its model may not make).
    pub status: u16,
    /// What the provider said.
    pub message: String,
}

impl ProviderRequestError {
    /// A rejection with `status` and the provider's message.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ProviderRequestError {
            status,
            message: message.into(),
        }
    }
}

struct RetryAfter(Option<Duration>);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, ", retry after {} ms", d.as_millis()),
            None => Ok(()),
        }
    }
}

struct After(Option<Duration>);

impl fmt::Display for After {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, " of {d:?}"),
            None => Ok(()),
        }
    }
}
