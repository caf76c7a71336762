//! Cutting secrets out of text a provider sent back.

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
