//! [`Reservation`]: the capacity a call holds, given back, settled or kept; and the
//! [`BucketLedger`] that issued it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::cost::{AccountingRule, Cost, CostDelta};
use crate::error::Error;
use crate::usage::Usage;

/// Why [`TokenBucketRateLimiter::try_reserve`](super::TokenBucketRateLimiter::try_reserve) (or `try_reserve_with`) did not reserve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TryReserveError {
    /// The cost is larger than a whole bucket: it can never be reserved.
    #[error(transparent)]
    TooLarge(Error),
    /// The limiter could not be asked: a shared backend (e.g. Redis) is unreachable or
    /// too slow ([`Error::LimiterUnavailable`]). Nothing was reserved; fail closed for
    /// this limiter (a fallback chain moves on to its next candidate).
    #[error(transparent)]
    Unavailable(Error),
    /// Not now; the earliest time it could be, if nothing else changes.
    #[error("the bucket cannot serve this cost now; earliest in {ready_in:?}")]
    WouldWait {
        /// How long until it could fit, counting the waiters that would go before it.
        ready_in: Duration,
    },
}

impl From<TryReserveError> for Error {
    fn from(e: TryReserveError) -> Self {
        match e {
            TryReserveError::TooLarge(e) | TryReserveError::Unavailable(e) => e,
            // The limiter's own answer, never dressed as a provider's 429.
            TryReserveError::WouldWait { ready_in } => Error::WouldWait { ready_in },
        }
    }
}

/// Gives capacity back to (or takes more from) whatever issued a [`Reservation`]. The
/// seam that lets a shared backend (e.g. Redis) issue reservations too.
pub trait BucketLedger: Send + Sync {
    /// Applies a correction: negative amounts give capacity back, positive take more.
    fn adjust(&self, delta: CostDelta);

    /// Gives all of `cost` back (a reservation dropped before its request was sent).
    /// The default adjusts by [`CostDelta::refund`]; a ledger may do it faster.
    fn refund(&self, cost: &Cost) {
        self.adjust(CostDelta::refund(cost));
    }

    /// A reservation on this ledger was made (counts what is held, for
    /// [`LimiterSnapshot::held`](super::LimiterSnapshot::held)). By default nothing.
    fn opened(&self) {}

    /// A reservation on this ledger ended: settled, given back, or dropped (exactly once
    /// per [`BucketLedger::opened`]). By default nothing.
    fn closed(&self) {}
}

/// Capacity held for one call.
///
/// - dropped before [`Reservation::mark_sent`]: everything is given back;
/// - [`Reservation::settle`] after the answer: reconciled with what the provider counts;
/// - dropped after sending without settling: the charge stays (the provider counted it).
#[must_use = "a reservation gives its capacity back when dropped"]
pub struct Reservation {
    ledger: Option<Arc<dyn BucketLedger>>,
    cost: Cost,
    sent: bool,
}

impl Reservation {
    /// A reservation issued by `ledger` for `cost`.
    pub fn new(ledger: Arc<dyn BucketLedger>, cost: Cost) -> Self {
        ledger.opened();
        Reservation {
            ledger: Some(ledger),
            cost,
            sent: false,
        }
    }

    /// A reservation whose ledger needs no [`BucketLedger::opened`] call (the in-process
    /// limiter counts reservations by the `Arc` each holds, sparing the fast path a call).
    pub(crate) fn counted(ledger: Arc<dyn BucketLedger>, cost: Cost) -> Self {
        Reservation {
            ledger: Some(ledger),
            cost,
            sent: false,
        }
    }

    /// A reservation that holds nothing (an unlimited model).
    pub fn unlimited(cost: Cost) -> Self {
        Reservation {
            ledger: None,
            cost,
            sent: false,
        }
    }

    /// What was reserved.
    pub fn cost(&self) -> Cost {
        self.cost
    }

    /// Records that the request left: from now on, dropping keeps the charge.
    pub fn mark_sent(&mut self) {
        self.sent = true;
    }

    /// Whether [`Reservation::mark_sent`] was called.
    pub fn is_sent(&self) -> bool {
        self.sent
    }

    /// Reconciles the reservation with what the provider counts for `usage`.
    pub fn settle(mut self, usage: &Usage, rule: AccountingRule) {
        if let Some(ledger) = self.ledger.take() {
            let delta = rule.delta(&self.cost, usage);
            if !delta.is_zero() {
                ledger.adjust(delta);
            }
            ledger.closed();
        }
    }

    /// Settles at exactly `counted` (e.g. a rejected request: its request counts, its
    /// tokens do not).
    pub fn settle_counted(mut self, counted: Cost) {
        if let Some(ledger) = self.ledger.take() {
            let delta = CostDelta::between(&counted, &self.cost);
            if !delta.is_zero() {
                ledger.adjust(delta);
            }
            ledger.closed();
        }
    }

    /// Changes what the reservation holds to `cost`, taking the difference from (or
    /// giving it back to) the buckets at once. A grant made ahead of the call (an
    /// [`super::Admission`], a fallback pick) becomes the call's own this way; taking
    /// more than is left runs the bucket into debt, paid back by later refill.
    pub fn resize(&mut self, cost: Cost) {
        if let Some(ledger) = &self.ledger {
            let delta = CostDelta::between(&cost, &self.cost);
            if !delta.is_zero() {
                ledger.adjust(delta);
            }
        }
        self.cost = cost;
    }

    /// Gives everything back now (the request was not sent).
    pub fn release(mut self) {
        if let Some(ledger) = self.ledger.take() {
            ledger.refund(&self.cost);
            ledger.closed();
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(ledger) = self.ledger.take() {
            if !self.sent {
                ledger.refund(&self.cost);
            }
            ledger.closed();
        }
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("cost", &self.cost)
            .field("sent", &self.sent)
            .field("limited", &self.ledger.is_some())
            .finish()
    }
}
