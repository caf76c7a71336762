//! Cutting secrets out of text a provider sent back, and out of the errors that carry
//! such text.

use futures::StreamExt;

use crate::error::{Error, ProviderError, ProviderRequestError};
use crate::stream::ResponseStream;

mod forms;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// `text` with every non-empty secret replaced by [`REDACTED`], in every form a server
/// may write it in: raw, JSON-escaped (`\/`, `\u002F` in either case, surrogate pairs,
/// doubled backslashes), URL-encoded (`%2F` in either case, `%252F`, `+` for a space) or
/// as an HTML character reference, each character in any of them. An empty secret
/// redacts nothing (replacing `""` would put the marker between every character).
pub fn redact<S: AsRef<str>>(text: &str, secrets: impl IntoIterator<Item = S>) -> String {
    secrets.into_iter().fold(text.to_owned(), |text, secret| {
        match redact_bytes(text.as_bytes(), secret.as_ref()) {
            // Every form starts and ends on a character boundary (its first and last
            // bytes are ASCII or the secret's own whole characters), so the text stays
            // UTF-8.
            Some(bytes) => String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            None => text,
        }
    })
}

/// `bytes` (UTF-8 or not) with every form of `secret` replaced by [`REDACTED`], or
/// `None` when none is there (so the caller keeps its bytes, uncopied).
pub fn redact_bytes(bytes: &[u8], secret: &str) -> Option<Vec<u8>> {
    let found = forms::occurrences(bytes, secret);
    if found.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for (start, end) in found {
        out.extend_from_slice(&bytes[from..start]);
        out.extend_from_slice(REDACTED.as_bytes());
        from = end;
    }
    out.extend_from_slice(&bytes[from..]);
    Some(out)
}

/// `stream` with every error it yields [`Error::redacted`] of `secrets`: what every
/// transport puts around the stream it hands the pipeline, so that no error a decoder
/// builds from an event can carry them.
pub fn redacted_stream(stream: ResponseStream, secrets: Vec<String>) -> ResponseStream {
    if secrets.iter().all(String::is_empty) {
        return stream;
    }
    ResponseStream::new(stream.map(move |event| {
        event.map_err(|e| {
            let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
            e.redacted(&secrets)
        })
    }))
}

/// `text` redacted of `secrets` ([`redact`]).
fn cut(text: String, secrets: &[&str]) -> String {
    redact(&text, secrets.iter().copied())
}

impl Error {
    /// This error with every non-empty secret, in any form ([`redact`]), cut out of
    /// every text a provider's answer can reach: a rejection's or quota's message, a
    /// refusal's explanation, a malformed answer's bytes, a connection failure's detail,
    /// a request or embedding error's reason, also inside a stream interruption.
    pub fn redacted(self, secrets: &[&str]) -> Self {
        match self {
            Error::Provider(p) => Error::Provider(p.redacted(secrets)),
            Error::ProviderRequest(ProviderRequestError { status, message }) => {
                Error::ProviderRequest(ProviderRequestError {
                    status,
                    message: cut(message, secrets),
                })
            }
            Error::QuotaExhausted { provider, message } => Error::QuotaExhausted {
                provider,
                message: cut(message, secrets),
            },
            Error::ProviderRefusal {
                category,
                explanation,
                usage,
                delivered_events,
            } => Error::ProviderRefusal {
                category: cut(category, secrets),
                explanation: cut(explanation, secrets),
                usage,
                delivered_events,
            },
            Error::ShapeInvalid { errors } => Error::ShapeInvalid {
                errors: errors.into_iter().map(|e| cut(e, secrets)).collect(),
            },
            Error::InvalidRequest { field, reason } => Error::InvalidRequest {
                field: cut(field, secrets),
                reason: cut(reason, secrets),
            },
            Error::EmbeddingShape {
                model_id,
                expected,
                got,
                reason,
            } => Error::EmbeddingShape {
                model_id,
                expected,
                got,
                reason: cut(reason, secrets),
            },
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
    /// This failure with every non-empty secret, in any form ([`redact`]), cut out of
    /// the text it carries (a malformed answer's bytes, a connection failure's detail).
    pub fn redacted(self, secrets: &[&str]) -> Self {
        match self {
            ProviderError::Malformed { what, raw, raw_len } => ProviderError::Malformed {
                what: cut(what, secrets),
                raw: cut(raw, secrets),
                raw_len,
            },
            ProviderError::Connection { cause, detail } => ProviderError::Connection {
                cause,
                detail: cut(detail, secrets),
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

    const SLASHED: &str = "tEsT/SeCrEt+KeY=";

    #[test]
    fn a_json_escaped_slash_is_redacted() {
        assert_eq!(
            redact(r#"{"m": "bad tEsT\/SeCrEt+KeY="}"#, [SLASHED]),
            r#"{"m": "bad [redacted]"}"#
        );
    }

    #[test]
    fn unicode_escapes_of_any_character_in_either_case_are_redacted() {
        for text in [
            r"tEsT\u002FSeCrEt\u002bKeY\u003D",
            r"\u0074EsT\u002fSeCrEt\u002BKeY\u003d",
            r"\u0074\u0045\u0073\u0054\u002F\u0053\u0065\u0043\u0072\u0045\u0074\u002B\u004B\u0065\u0059\u003D",
        ] {
            assert_eq!(redact(text, [SLASHED]), REDACTED, "{text}");
        }
    }

    #[test]
    fn doubled_backslashes_of_a_twice_escaped_text_are_redacted() {
        assert_eq!(
            redact(r"a tEsT\\/SeCrEt\\u002bKeY=", [SLASHED]),
            "a [redacted]"
        );
    }

    #[test]
    fn a_url_encoded_key_in_either_case_or_encoded_twice_is_redacted() {
        for text in [
            "tEsT%2FSeCrEt%2BKeY%3D",
            "tEsT%2fSeCrEt%2bKeY%3d",
            "tEsT%252FSeCrEt%252BKeY%253D",
            "%74EsT/SeCrEt+KeY=",
        ] {
            assert_eq!(redact(text, [SLASHED]), REDACTED, "{text}");
        }
        assert_eq!(redact("key=a+b", ["a b"]), "key=[redacted]");
    }

    #[test]
    fn html_character_references_are_redacted() {
        assert_eq!(
            redact("tEsT&#47;SeCrEt&#x2b;KeY&#X3D;", [SLASHED]),
            REDACTED
        );
    }

    #[test]
    fn a_character_past_the_basic_plane_is_redacted_as_its_surrogate_pair() {
        assert_eq!(redact(r"k\ud83d\uDE00y", ["k\u{1F600}y"]), REDACTED);
    }

    #[test]
    fn a_partial_or_misspelled_form_is_left_alone() {
        for text in [
            r"tEsT\u002",
            "tEsT%2",
            r"tEsT\u002ESeCrEt+KeY=",
            "tEsT&#47SeCrEt+KeY=",
        ] {
            assert_eq!(redact(text, [SLASHED]), text);
        }
    }

    #[test]
    fn bytes_without_the_key_are_not_copied() {
        assert_eq!(redact_bytes(b"\\xff %zz &#;", SLASHED), None);
        assert_eq!(redact_bytes(b"k", ""), None);
    }

    #[test]
    fn a_long_run_of_backslashes_or_reencodings_is_scanned_and_left_alone() {
        // Each position looks at a bounded window, so a hostile body stays linear.
        let text = format!("{}{}", "\\".repeat(100_000), "%25".repeat(100_000));
        assert_eq!(redact_bytes(text.as_bytes(), SLASHED), None);
        let escaped = format!("{}/x", "\\".repeat(7));
        assert_eq!(redact(&escaped, ["/x"]), REDACTED);
    }

    #[test]
    fn every_error_variant_carrying_provider_text_is_redacted() {
        let quoted = "bad tEsT\\/SeCrEt+KeY=";
        let errors = [
            ProviderRequestError::new(400, quoted).into(),
            Error::QuotaExhausted {
                provider: "p".into(),
                message: quoted.into(),
            },
            Error::refusal(quoted, quoted, crate::usage::Usage::default()),
            Error::ShapeInvalid {
                errors: vec![quoted.into()],
            },
            Error::invalid_request(quoted, quoted),
            Error::EmbeddingShape {
                model_id: "m".into(),
                expected: 4,
                got: 3,
                reason: quoted.into(),
            },
            crate::provider::wire::malformed(quoted, quoted.as_bytes()),
            Error::StreamInterrupted {
                model_id: "m".into(),
                delivered_events: 1,
                cause: Box::new(ProviderRequestError::new(400, quoted).into()),
            },
        ];
        for error in errors {
            let text = format!("{0} {0:?}", error.redacted(&[SLASHED]));
            assert!(!text.contains("SeCrEt"), "{text}");
            assert!(text.contains(REDACTED), "{text}");
        }
    }

    use proptest::prelude::*;

    /// `key` with each character in the form `pick` chooses: raw, `\u` in either
    /// case, `\/` for a slash, or percent-encoded in either case.
    fn spelled(key: &str, pick: &[u8]) -> String {
        key.chars()
            .zip(pick.iter().cycle())
            .map(|(c, p)| match p % 6 {
                0 => c.to_string(),
                1 => format!("\\u{:04x}", c as u32),
                2 => format!("\\u{:04X}", c as u32),
                3 if c == '/' => "\\/".to_owned(),
                4 => format!("%{:02X}", c as u32),
                5 => format!("%{:02x}", c as u32),
                _ => c.to_string(),
            })
            .collect()
    }

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

        /// However each character of a key is spelled (raw, escaped, encoded, mixed),
        /// every occurrence is one marker and the text around it is kept.
        #[test]
        fn a_key_spelled_in_any_mix_of_forms_is_redacted(
            key in "[A-Za-z0-9/+=_-]{8,40}",
            pick in proptest::collection::vec(0u8..6, 1..16),
            pieces in proptest::collection::vec("[ :,.{}\"]{0,12}", 1..5),
        ) {
            let text = pieces.join(&spelled(&key, &pick));
            prop_assert_eq!(redact(&text, [key.as_str()]), pieces.join(REDACTED));
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
