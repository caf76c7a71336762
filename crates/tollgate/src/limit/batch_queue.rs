//! A provider's queue limits for its batch API: the input tokens enqueued for a model
//! (OpenAI's "enqueued tokens") and the batches pending at once. Unlike a rate, a queue
//! limit does not refill with time: a batch holds its share from before it is submitted
//! until it ends, and gives it back then. So it is a ledger of holds, one per pending
//! batch (a lease), not a bucket: [`QueueLedger`], in this process
//! ([`MemoryQueueLedger`]) or shared by many on Redis (`tollgate-redis`).
//!
//! A hold outlives the process that made it (a batch stays queued at the provider when
//! the command that submitted it stops), so each carries an expiry past the batch's
//! completion window, and a resumed run adopts the holds of the batches it finds.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Mutex;
use std::time::Duration;

use crate::clock;
use crate::error::Result;
use tokio::time::Instant;

/// A model's queue limits on its batch API (from the catalog's `[models.ID.batch]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueCaps {
    /// Input tokens enqueued across pending batches, at most; `None`: unlimited.
    pub tokens: Option<u64>,
    /// Batches pending at once, at most; `None`: unlimited.
    pub batches: Option<u64>,
}

/// What a [`QueueLedger::hold`] answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAnswer {
    /// The hold is in place (or already was, under the same lease).
    Held,
    /// It does not fit beside the holds in place now: try again when one ends.
    Full {
        /// Tokens held by the pending batches.
        held_tokens: u64,
        /// Pending batches.
        held_batches: u64,
    },
}

/// Where a model's batch-queue holds are kept. An `account` names one queue (a provider
/// account's model: the command uses `<provider>:<model name>`), a `lease` one batch.
#[async_trait::async_trait]
pub trait QueueLedger: Send + Sync + Debug {
    /// Holds `tokens` (and one batch) on `account` for `lease` if that fits under `caps`
    /// beside every unexpired hold; a lease already held answers [`QueueAnswer::Held`]
    /// and keeps its amount. The hold lapses after `ttl` unless released first.
    async fn hold(
        &self,
        account: &str,
        lease: &str,
        tokens: u64,
        caps: QueueCaps,
        ttl: Duration,
    ) -> Result<QueueAnswer>;

    /// Records `lease`'s hold whatever the caps say: a batch already at the provider (a
    /// resumed run's), which holds its share whether or not it fits.
    async fn adopt(&self, account: &str, lease: &str, tokens: u64, ttl: Duration) -> Result<()>;

    /// Gives `lease`'s hold back (its batch ended, or was never submitted).
    async fn release(&self, account: &str, lease: &str) -> Result<()>;
}

#[derive(Debug, Clone, Copy)]
struct Hold {
    tokens: u64,
    until: Instant,
}

/// The in-process [`QueueLedger`]: holds shared by the calls of one process.
#[derive(Debug, Default)]
pub struct MemoryQueueLedger {
    accounts: Mutex<HashMap<String, HashMap<String, Hold>>>,
}

impl MemoryQueueLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        MemoryQueueLedger::default()
    }

    fn with<T>(&self, account: &str, f: impl FnOnce(&mut HashMap<String, Hold>) -> T) -> T {
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        let holds = accounts.entry(account.to_owned()).or_default();
        let now = clock::now();
        holds.retain(|_, h| h.until > now);
        f(holds)
    }
}

#[async_trait::async_trait]
impl QueueLedger for MemoryQueueLedger {
    async fn hold(
        &self,
        account: &str,
        lease: &str,
        tokens: u64,
        caps: QueueCaps,
        ttl: Duration,
    ) -> Result<QueueAnswer> {
        Ok(self.with(account, |holds| {
            if holds.contains_key(lease) {
                return QueueAnswer::Held;
            }
            let held_tokens: u64 = holds.values().map(|h| h.tokens).sum();
            let held_batches = holds.len() as u64;
            let over_tokens = caps
                .tokens
                .is_some_and(|cap| held_tokens.saturating_add(tokens) > cap);
            let over_batches = caps.batches.is_some_and(|cap| held_batches + 1 > cap);
            if over_tokens || over_batches {
                return QueueAnswer::Full {
                    held_tokens,
                    held_batches,
                };
            }
            holds.insert(
                lease.to_owned(),
                Hold {
                    tokens,
                    until: clock::now() + ttl,
                },
            );
            QueueAnswer::Held
        }))
    }

    async fn adopt(&self, account: &str, lease: &str, tokens: u64, ttl: Duration) -> Result<()> {
        self.with(account, |holds| {
            holds.insert(
                lease.to_owned(),
                Hold {
                    tokens,
                    until: clock::now() + ttl,
                },
            );
        });
        Ok(())
    }

    async fn release(&self, account: &str, lease: &str) -> Result<()> {
        self.with(account, |holds| holds.remove(lease));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[tokio::test(start_paused = true)]
    async fn queue_tokens_cap_refuses_a_batch_that_does_not_fit_until_one_is_released() {
        let ledger = MemoryQueueLedger::new();
        let caps = QueueCaps {
            tokens: Some(1_000),
            batches: None,
        };
        assert_eq!(
            ledger.hold("openai:m", "a", 600, caps, DAY).await.unwrap(),
            QueueAnswer::Held
        );
        assert_eq!(
            ledger.hold("openai:m", "b", 500, caps, DAY).await.unwrap(),
            QueueAnswer::Full {
                held_tokens: 600,
                held_batches: 1
            }
        );
        // Another account's queue is its own.
        assert_eq!(
            ledger.hold("openai:n", "b", 500, caps, DAY).await.unwrap(),
            QueueAnswer::Held
        );
        ledger.release("openai:m", "a").await.unwrap();
        assert_eq!(
            ledger.hold("openai:m", "b", 500, caps, DAY).await.unwrap(),
            QueueAnswer::Held
        );
    }

    #[tokio::test(start_paused = true)]
    async fn pending_batches_cap_counts_batches_and_a_lease_held_twice_counts_once() {
        let ledger = MemoryQueueLedger::new();
        let caps = QueueCaps {
            tokens: None,
            batches: Some(2),
        };
        for lease in ["a", "b", "a"] {
            assert_eq!(
                ledger.hold("acct", lease, 10, caps, DAY).await.unwrap(),
                QueueAnswer::Held
            );
        }
        assert!(matches!(
            ledger.hold("acct", "c", 10, caps, DAY).await.unwrap(),
            QueueAnswer::Full {
                held_batches: 2,
                ..
            }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn adopted_hold_counts_whatever_the_caps_and_a_hold_lapses_after_its_ttl() {
        let ledger = MemoryQueueLedger::new();
        let caps = QueueCaps {
            tokens: Some(100),
            batches: None,
        };
        ledger.adopt("acct", "old", 500, DAY).await.unwrap();
        assert!(matches!(
            ledger.hold("acct", "new", 10, caps, DAY).await.unwrap(),
            QueueAnswer::Full {
                held_tokens: 500,
                ..
            }
        ));
        tokio::time::advance(DAY + Duration::from_secs(1)).await;
        assert_eq!(
            ledger.hold("acct", "new", 10, caps, DAY).await.unwrap(),
            QueueAnswer::Held
        );
    }
}
