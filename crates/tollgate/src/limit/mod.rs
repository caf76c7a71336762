//! Rate limiting: every call reserves its share of the model's limits *before* it is
//! sent, waits holding nothing, and is woken the moment enough has refilled.
//!
//! - [`TokenBucketRateLimiter`]: one per catalog model; requests, tokens, input and
//!   output tokens per minute, reserved together or not at all ([`Cost`]). Exact integer
//!   refill, FIFO waiting, one timer, cancellation-safe.
//! - [`Reservation`]: the capacity a call holds; settled against the provider's count
//!   ([`AccountingRule`]), refunded if the request never left.
//! - [`Feedback`] and the adaptive throttle ([`throttle`]): 429s and 529s slow the
//!   model's refill for every caller; successes speed it back up.
//! - [`Admission`]: a model reservation together with other resources, all or nothing.
//! - [`FallbackChain`]: candidates with their own limiters and post-429 cooldowns.
//! - [`LimiterBackend`]: the seam for a shared backend (many processes, one quota).
//!
//! Why proactive: a rejected request costs a round trip, often counts against the quota
//! anyway, and invites a thundering retry. Knowing the limit, we can wait exactly as long
//! as needed instead. See `docs/rate-limiting.md`.

mod admission;
mod bucket;
mod cost;
mod fallback;
mod limiter;
mod priority;
pub mod throttle;

use std::fmt::Debug;

pub use admission::{Admission, AdmissionGrant, AdmissionResource, SemaphoreResource};
pub use cost::{AccountingRule, CacheReadAccounting, Cost, CostDelta, OutputAccounting};
pub use fallback::{DEFAULT_FALLBACK_COOLDOWN, FallbackChain, FallbackGrant};
pub use limiter::{
    BucketLedger, Burst, LimiterConfig, LimiterSnapshot, MAX_PROVIDER_PAUSE, Reservation, Reserve,
    TokenBucketRateLimiter, TryReserveError,
};
pub use priority::Priority;
pub use throttle::{Feedback, SendMark};

use crate::error::Result;

/// Where a model's buckets live. The in-process [`TokenBucketRateLimiter`] is the
/// default; a shared backend (Redis) implements the same semantics for many processes.
///
/// Implementations issue [`Reservation`]s through their own [`BucketLedger`], so refunds
/// and settlements reach the right place.
#[async_trait::async_trait]
pub trait LimiterBackend: Send + Sync + Debug {
    /// Reserves now or fails without waiting (never jumping the queue).
    fn try_reserve(&self, cost: Cost) -> Result<Reservation, TryReserveError>;

    /// Reserves, waiting in FIFO order holding nothing; fails at once if the cost is
    /// larger than a bucket.
    async fn reserve(&self, cost: Cost) -> Result<Reservation>;

    /// What a provider's answer said about the model's rate.
    fn feedback(&self, feedback: Feedback);

    /// A mark taken right after a reservation is granted, so that the rate-limit headers
    /// of its answer can be read as of when it was sent ([`Feedback::Reported`]). `None`
    /// when the backend cannot tell (the headers are then read as of their arrival).
    fn send_mark(&self) -> Option<SendMark> {
        None
    }
}

#[async_trait::async_trait]
impl LimiterBackend for TokenBucketRateLimiter {
    fn try_reserve(&self, cost: Cost) -> Result<Reservation, TryReserveError> {
        TokenBucketRateLimiter::try_reserve(self, cost)
    }

    async fn reserve(&self, cost: Cost) -> Result<Reservation> {
        TokenBucketRateLimiter::reserve(self, cost).await
    }

    fn feedback(&self, feedback: Feedback) {
        TokenBucketRateLimiter::feedback(self, feedback);
    }

    fn send_mark(&self) -> Option<SendMark> {
        Some(TokenBucketRateLimiter::send_mark(self))
    }
}

#[cfg(test)]
mod tests;
