//! Tokens used by one call, in the one convention every codec converts to.

use serde::{Deserialize, Serialize};

/// Tokens used by one call, in one convention for every provider.
///
/// `input_tokens` counts only the input billed at the full input price: cached reads and
/// cache writes are counted apart, so cost is computed once and nothing is dropped or
/// counted twice. Codecs convert (Anthropic's `input_tokens` already excludes cache;
/// OpenAI's `prompt_tokens` includes cached tokens, which the codec subtracts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Input billed at the full input price.
    pub input_tokens: u64,
    /// Input read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input written to the prompt cache with the default (5-minute) lifetime.
    pub cache_write_tokens: u64,
    /// Input written to the prompt cache with a one-hour lifetime.
    pub cache_write_1h_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Usage from a provider whose input count *excludes* cached tokens (Anthropic's
    /// `input_tokens`, and Bedrock's as far as is known): each count is taken as is.
    pub fn from_cache_exclusive(
        input_tokens: u64,
        cache_read_tokens: u64,
        cache_write_tokens: u64,
        cache_write_1h_tokens: u64,
        output_tokens: u64,
    ) -> Self {
        Usage {
            input_tokens,
            cache_read_tokens,
            cache_write_tokens,
            cache_write_1h_tokens,
            output_tokens,
        }
    }

    /// Usage from a provider whose input count *includes* cached tokens (OpenAI's
    /// `prompt_tokens` with `cached_tokens` and `cache_write_tokens` as sub-counts): the
    /// sub-counts are taken out of the total so nothing is counted twice.
    pub fn from_cache_inclusive(
        total_input_tokens: u64,
        cache_read_tokens: u64,
        cache_write_tokens: u64,
        output_tokens: u64,
    ) -> Self {
        let cache_read_tokens = cache_read_tokens.min(total_input_tokens);
        let cache_write_tokens = cache_write_tokens.min(total_input_tokens - cache_read_tokens);
        Usage {
            input_tokens: total_input_tokens - cache_read_tokens - cache_write_tokens,
            cache_read_tokens,
            cache_write_tokens,
            cache_write_1h_tokens: 0,
            output_tokens,
        }
    }

    /// All input tokens: full-price, cache reads and cache writes.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.cache_write_1h_tokens
    }

    /// Input and output together.
    pub fn total_tokens(&self) -> u64 {
        self.total_input_tokens() + self.output_tokens
    }
}
