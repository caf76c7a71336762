//! The gateway's `encrypted_content` for a reasoning item: the signed thinking block it
//! came from (its text, signature and signing provider), so a client that sends the item
//! back replays the block to the provider that signed it, and a codec drops it anywhere
//! else. Versioned and tagged (`tg1:` then base64 JSON), so a blob OpenAI wrote is never
//! taken for the gateway's and the gateway's is never sent to OpenAI as OpenAI's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tollgate::Block;

/// The prefix of the gateway's envelopes, with its version.
const PREFIX: &str = "tg1:";

/// The envelope of a thinking or redacted-thinking block; `None` for any other block.
pub(crate) fn seal(block: &Block) -> Option<String> {
    if !matches!(
        block,
        Block::Thinking { .. } | Block::RedactedThinking { .. }
    ) {
        return None;
    }
    let json = serde_json::to_vec(block).ok()?;
    Some(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json)))
}

/// Whether `text` is in the gateway's envelope format (readable or not).
pub(crate) fn is_sealed(text: &str) -> bool {
    text.starts_with(PREFIX)
}

/// The thinking block inside an envelope the gateway wrote; `None` for anything else.
pub(crate) fn open(text: &str) -> Option<Block> {
    let bytes = URL_SAFE_NO_PAD.decode(text.strip_prefix(PREFIX)?).ok()?;
    let block: Block = serde_json::from_slice(&bytes).ok()?;
    matches!(
        block,
        Block::Thinking { .. } | Block::RedactedThinking { .. }
    )
    .then_some(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_thinking_block_opens_to_the_same_block_with_its_signature_and_origin() {
        let block = Block::Thinking {
            text: "first, the sum".into(),
            signature: Some("sig-abc".into()),
            origin: Some("anthropic".into()),
            cache: None,
        };
        let sealed = seal(&block).expect("thinking is sealed");
        assert!(sealed.starts_with("tg1:"));
        assert_eq!(open(&sealed), Some(block));
        let redacted = Block::RedactedThinking {
            data: "opaque".into(),
            origin: Some("anthropic".into()),
        };
        assert_eq!(open(&seal(&redacted).unwrap()), Some(redacted));
    }

    #[test]
    fn only_thinking_is_sealed_and_a_foreign_blob_does_not_open() {
        assert_eq!(seal(&Block::text("hi")), None);
        assert_eq!(open("gAAAAABn-openai-encrypted"), None);
        assert_eq!(open("tg1:not base64!"), None);
        // A well-formed envelope of another block kind is not taken either.
        let text = serde_json::to_vec(&Block::text("hi")).unwrap();
        assert_eq!(open(&format!("tg1:{}", URL_SAFE_NO_PAD.encode(text))), None);
    }
}
