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
//! - [`FallbackChain`]: candidates with their own limiters, the first that can serve now.
//! - [`LimiterBackend`]: the seam for a shared backend (many processes, one quota).
//!
//! Why proactive: a rejected request costs a round trip, often counts against the quota
//! anyway, and invites a thundering retry. Knowing the limit, we can wait exactly as long
//! as needed instead. See `docs/rate-limiting.md`.

mod admission;
mod backend;
mod batch_queue;
mod bucket;
mod config;
mod cost;
mod fallback;
mod limiter;
mod priority;
mod queue;
mod reservation;
mod snapshot;
mod state;
mod sync;
pub mod throttle;
mod wait;

/// Re-exported beside [`FallbackChain`], which it configures.
pub use crate::catalog::FallbackWait;
pub use admission::{Admission, AdmissionGrant, AdmissionResource, SemaphoreResource};
pub use backend::{InProcessLimiters, LimiterBackend, LimiterFactory};
pub use batch_queue::{MemoryQueueLedger, QueueAnswer, QueueCaps, QueueLedger};
pub use config::{Burst, LimiterConfig, MAX_PROVIDER_PAUSE};
pub use cost::{AccountingRule, CacheReadAccounting, Cost, CostDelta, OutputAccounting};
pub(crate) use fallback::Waiter;
pub use fallback::{FallbackChain, FallbackGrant};
pub use limiter::TokenBucketRateLimiter;
pub use priority::Priority;
pub use reservation::{BucketLedger, Reservation, TryReserveError};
pub use snapshot::LimiterSnapshot;
pub use throttle::{Feedback, SendMark};
pub use wait::Reserve;

#[cfg(test)]
mod report_tests;
#[cfg(test)]
mod tests;
