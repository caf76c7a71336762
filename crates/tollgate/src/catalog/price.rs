//! A model's prices, live and through the batch API.

use crate::usage::Usage;

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Price {
    /// Input at the full price.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache (default, 5-minute lifetime).
    pub cache_write: f64,
    /// Input written to the prompt cache with a one-hour lifetime; when not set in the
    /// catalog, `cache_write` applies.
    pub cache_write_1h: Option<f64>,
}

impl Price {
    /// The cost of `usage` in USD: each kind of token at its own price, none counted twice.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(usage.input_tokens, self.input)
            + per(usage.cache_read_tokens, self.cache_read)
            + per(usage.cache_write_tokens, self.cache_write)
            + per(
                usage.cache_write_1h_tokens,
                self.cache_write_1h.unwrap_or(self.cache_write),
            )
            + per(usage.output_tokens, self.output)
    }
}
