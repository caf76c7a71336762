//! Token estimates before sending: the limiter and the spend cap need a number before
//! the provider has counted anything.
//!
//! The default is deliberately conservative (it over-counts), because an under-estimate
//! becomes debt in the limiter and a surprise in the spend cap, while an over-estimate is
//! simply refunded at settle time. Provider crates with a real tokenizer override
//! [`super::ChatTransport::estimate_input_tokens`].

use crate::conversation::Block;
use crate::request::LlmRequest;

/// Estimates tokens for text and requests.
pub trait TokenEstimator: Send + Sync {
    /// Tokens in `text`.
    fn estimate_text(&self, text: &str) -> u64;

    /// Input tokens of a whole request: every block, tool definitions and a per-message
    /// overhead for role markers.
    fn estimate_request(&self, request: &LlmRequest) -> u64 {
        let blocks: u64 = request
            .messages()
            .iter()
            .flat_map(|m| &m.content)
            .map(|b| self.estimate_block(b) + MESSAGE_OVERHEAD_TOKENS)
            .sum();
        let tools: u64 = request
            .tools_schema()
            .iter()
            .map(|t| {
                self.estimate_text(&t.name)
                    + self.estimate_text(&t.description)
                    + self.estimate_text(&t.input_schema.canonical())
            })
            .sum();
        blocks + tools + REQUEST_OVERHEAD_TOKENS
    }

    /// Tokens of one block.
    fn estimate_block(&self, block: &Block) -> u64 {
        match block {
            Block::Text { text, .. } | Block::Thinking { text, .. } => self.estimate_text(text),
            Block::ToolUse { name, input, .. } => {
                self.estimate_text(name) + self.estimate_text(&input.canonical())
            }
            Block::ToolResult { content, .. } => {
                content.iter().map(|b| self.estimate_block(b)).sum()
            }
            Block::Image { .. } => IMAGE_TOKENS,
        }
    }
}

/// Tokens added per message for role and framing.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Tokens added per request.
pub const REQUEST_OVERHEAD_TOKENS: u64 = 8;
/// Tokens assumed for an image (a large image at Anthropic is about 1,600 tokens).
pub const IMAGE_TOKENS: u64 = 1_600;

/// One token per three bytes of UTF-8, rounded up: above the ~4 characters per token of
/// English text for the common tokenizers, so estimates err high.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultEstimator;

impl TokenEstimator for DefaultEstimator {
    fn estimate_text(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, SamplingParams};

    #[test]
    fn default_estimate_errs_high_for_english_text() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(20);
        // ~4 characters per token in cl100k for English prose.
        assert!(DefaultEstimator.estimate_text(&text) >= text.len() as u64 / 4);
    }

    #[test]
    fn request_estimate_counts_every_message_and_overheads() {
        let r = LlmRequest::new(
            "m",
            vec![Message::system("abc"), Message::user("abcdef")],
            vec![],
            SamplingParams::new(),
        )
        .unwrap();
        assert_eq!(
            DefaultEstimator.estimate_request(&r),
            1 + 2 + 2 * MESSAGE_OVERHEAD_TOKENS + REQUEST_OVERHEAD_TOKENS
        );
    }
}
