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

    use proptest::prelude::*;

    /// Text around a key: pieces of ordinary text with the key between them `k` times,
    /// at the edges when the first or last piece is empty.
    fn with_key(pieces: &[String], key: &str) -> String {
        pieces.join(key)
    }

    proptest! {
        /// Wherever a key shows in a message (at either edge, repeated, next to itself),
        /// every occurrence is replaced by the marker and nothing else changes.
        #[test]
        fn every_occurrence_of_a_key_is_redacted_and_nothing_else_changes(
            key in "[A-Z0-9_-]{8,40}",
            pieces in proptest::collection::vec("[ a-z:,.{}\"]{0,12}", 1..6),
        ) {
            let text = with_key(&pieces, &key);
            let out = redact(&text, [key.as_str()]);
            prop_assert!(!out.contains(&key), "{out}");
            // Keys and pieces share no character, so the occurrences are exactly the
            // joins.
            prop_assert_eq!(out.matches(REDACTED).count(), pieces.len() - 1);
            prop_assert_eq!(out, pieces.join(REDACTED));
        }

        /// An empty key redacts nothing, whatever the message.
        #[test]
        fn an_empty_key_leaves_any_message_as_it_was(text in ".{0,80}") {
            prop_assert_eq!(redact(&text, [""]), text);
        }

        /// A key and its session token are both cut out, in either order.
        #[test]
        fn several_secrets_are_all_redacted(
            key in "[A-Z0-9]{16,32}",
            token in "[a-z0-9/+=]{16,48}",
            around in "[ .:]{0,8}",
        ) {
            let text = format!("{around}{token}{around}{key}{around}{key}{token}");
            let out = redact(&text, [key.as_str(), token.as_str()]);
            prop_assert!(!out.contains(&key) && !out.contains(&token), "{out}");
        }
    }
}
