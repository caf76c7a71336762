//! Cutting secrets out of text a provider sent back, and out of the errors that carry
//! such text.

use crate::error::{Error, ProviderError};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// `text` with every non-empty secret replaced by [`REDACTED`]. An empty secret redacts
/// nothing (replacing `""` would put the marker between every character).
pub fn redact<S: AsRef<str>>(text: &str, secrets: impl IntoIterator<Item = S>) -> String {
    secrets
        .into_iter()
        .fold(text.to_owned(), |text, secret| match secret.as_ref() {
            "" => text,
            s => text.replace(s, REDACTED),
        })
}

impl Error {
    /// This error with every non-empty secret cut out of the text a provider failure
    /// carries ([`ProviderError::redacted`]), also inside a stream interruption.
    pub fn redacted(self, secrets: &[&str]) -> Self {
        match self {
            Error::Provider(p) => Error::Provider(p.redacted(secrets)),
            Error::StreamInterrupted {
                model_id,
                delivered_events,
                cause,
            } => Error::StreamInterrupted {
                model_id,
                delivered_events,
                cause: Box::new(cause.redacted(secrets)),
            },
            other => other,
        }
    }
}

impl ProviderError {
    /// This failure with every non-empty secret cut out of the text it carries (a
    /// malformed answer's bytes, a connection failure's detail).
    pub fn redacted(self, secrets: &[&str]) -> Self {
        match self {
            ProviderError::Malformed { what, raw, raw_len } => ProviderError::Malformed {
                what: redact(&what, secrets),
                raw: redact(&raw, secrets),
                raw_len,
            },
            ProviderError::Connection { cause, detail } => ProviderError::Connection {
                cause,
                detail: redact(&detail, secrets),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced() {
        assert_eq!(
            redact("key sk-1 and tok", ["sk-1", "tok"]),
            "key [redacted] and [redacted]"
        );
    }

    #[test]
    fn empty_stored_key_redacts_nothing() {
        assert_eq!(redact("invalid x-api-key", [""]), "invalid x-api-key");
    }
}
