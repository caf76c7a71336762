//! A model's terms on its provider's batch API (`[models.ID.batch]`).

use super::price::Price;

/// A model's terms on its provider's batch API (`[models.ID.batch]`), read by
/// `tollgate run --via batch`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct BatchTerms {
    /// The batch price (`batch.price`); `None`: half the model's `price`, what OpenAI,
    /// Anthropic, Gemini and Mistral charge.
    pub price: Option<Price>,
    /// The provider's cap on input tokens enqueued for this model across every pending
    /// batch of the account (`batch.queue_tokens`, OpenAI's "enqueued tokens"); `None`:
    /// unlimited.
    pub queue_tokens: Option<u64>,
    /// Batches pending at once for this model, at most (`batch.max_batches`); `None`:
    /// unlimited.
    pub max_batches: Option<u64>,
    /// Requests per batch, at most (`batch.max_requests`); `None`: the provider's cap.
    pub max_requests: Option<u64>,
    /// Bytes per batch, at most (`batch.max_bytes`); `None`: the provider's cap.
    pub max_bytes: Option<u64>,
}

impl BatchTerms {
    /// The price of a call through the batch API: `batch.price`, else half of `price`.
    pub fn price(&self, live: Option<&Price>) -> Option<Price> {
        self.price.or_else(|| {
            live.map(|p| Price {
                input: p.input / 2.0,
                output: p.output / 2.0,
                cache_read: p.cache_read / 2.0,
                cache_write: p.cache_write / 2.0,
                cache_write_1h: p.cache_write_1h.map(|c| c / 2.0),
            })
        })
    }
}
