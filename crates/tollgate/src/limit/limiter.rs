//! [`TokenBucketRateLimiter`]: reserve before send, wait holding nothing, wake exactly
//! when enough has refilled.
//!
//! All state lives behind one mutex and changes in one place (`state.rs`:
//! `State::grant_ready` grants; the other methods only refill, take or give back).
//! Waiters queue in a `WaitQueue` (`queue.rs`): one FIFO queue per [`Priority`] class, and
//! each waiter's slot, changed only through the queue's methods. The [`Reserve`] future
//! (`wait.rs`) joins, picks up or leaves through them. One *driver* task per limiter
//! sleeps until the instant the head waiter's cost will have refilled, grants it (and
//! whoever goes next, while they fit), and sleeps again; waiters are woken only when
//! granted, so a grant costs exactly one wake-up. The driver exists only while someone
//! waits.
//!
//! **Order.** The *head* (the waiter that goes first) is:
//! 1. among waiters that have waited at least [`LimiterConfig::aging`] (*promoted*), the
//!    one that arrived first (on a tie, the higher class);
//! 2. if none is promoted, the first arrival of the highest class that has waiters.
//!
//! So a higher class goes first, a class is FIFO, and aging makes a promoted waiter rank
//! above every class: a saturating stream of interactive calls delays a batch call by at
//! most about `aging`, never forever. With `aging` zero every waiter is promoted at once
//! and the order is plain arrival order (FIFO across classes).
//!
//! Fairness has a price, as with tokio's batch semaphore: a large request at the head of
//! the queue holds back the waiters after it that would fit now. That is what makes a
//! large request never starve. `try_reserve_with(cost, class)` and a ready
//! `reserve_with` never jump a waiter that would go before them (one of their own or a
//! higher class, or a promoted one), but may go ahead of lower-class waiters if the cost
//! fits now: that is what a class is for.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::config::LimiterConfig;
use super::cost::Cost;
use super::priority::Priority;
use super::reservation::{Reservation, TryReserveError};
use super::snapshot::LimiterSnapshot;
use super::state::Shared;
use super::throttle::{Feedback, SendMark};
use super::wait::Reserve;
use crate::catalog::ModelEntry;

/// A token-bucket limiter for one model: requests, tokens, input tokens and output tokens
/// per minute, reserved together or not at all. Cheap to clone; clones share the buckets.
///
/// [`Models`](crate::Models) builds one per catalog model (see
/// [`Models::limiter`](crate::Models::limiter)) and every call reserves on it before it is
/// sent; use one directly to pace work of your own at a provider's limits. On tokio's
/// clock, so a paused test clock runs minutes of pacing in no time:
///
/// ```
/// use std::time::Duration;
/// use tollgate::catalog::Limits;
/// use tollgate::clock;
/// use tollgate::limit::{Cost, LimiterConfig, TokenBucketRateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> tollgate::Result<()> {
/// // 3 requests a minute: a full bucket of 3 at once, then one every 20 s, the first of
/// // them half a second later (the arrival allowance: see `LimiterConfig`).
/// let limiter = TokenBucketRateLimiter::new(LimiterConfig::new("m", Limits { rpm: 3, ..Limits::default() }));
/// for _ in 0..3 {
///     let mut reservation = limiter.try_reserve(Cost::call(800, 200))?;
///     reservation.mark_sent(); // dropped unsent, it would give the capacity back
/// }
/// assert!(limiter.try_reserve(Cost::call(800, 200)).is_err()); // never waits
///
/// // `reserve` waits in a FIFO queue, holding nothing, until the bucket has refilled.
/// let started = clock::now();
/// let mut fourth = limiter.reserve(Cost::call(800, 200)).await?;
/// fourth.mark_sent();
/// let waited = clock::now() - started;
/// assert!(waited >= Duration::from_millis(20_500) && waited < Duration::from_millis(20_510));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TokenBucketRateLimiter {
    handle: Arc<Handle>,
}

/// What every clone of a limiter shares: the one strong reference to [`Shared`] that is
/// not a reservation's, so that [`LimiterSnapshot::held`] is the reference count less
/// one and a reservation is counted by the `Arc` it holds anyway, with no counter of its
/// own to touch on the fast path.
struct Handle {
    shared: Arc<Shared>,
}

impl fmt::Debug for TokenBucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucketRateLimiter")
            .field("model_id", &self.handle.shared.model_id)
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

impl TokenBucketRateLimiter {
    /// A limiter with full buckets.
    pub fn new(config: LimiterConfig) -> Self {
        TokenBucketRateLimiter {
            handle: Arc::new(Handle {
                shared: Arc::new(Shared::new(config)),
            }),
        }
    }

    /// The limiter a catalog entry describes.
    pub fn for_model(model: &ModelEntry) -> Self {
        Self::new(LimiterConfig::for_model(model))
    }

    /// Reserves `cost` on every dimension now, or fails without waiting. Does not jump
    /// the queue: while anyone waits, it fails with [`TryReserveError::WouldWait`]. The
    /// [`Priority::Default`] form of [`TokenBucketRateLimiter::try_reserve_with`].
    pub fn try_reserve(&self, cost: Cost) -> Result<Reservation, TryReserveError> {
        self.try_reserve_with(cost, Priority::Default)
    }

    /// Reserves `cost` at class `priority` now, or fails without waiting. It never
    /// jumps a waiter that would go before it (one of its own or a higher class, or a
    /// promoted one); while only lower classes wait, it goes if the cost fits now.
    /// [`TryReserveError::WouldWait`] estimates the wait from the waiters that would go
    /// before it.
    pub fn try_reserve_with(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        let shared = &self.handle.shared;
        // Read before locking: a time earlier than another holder's only refills less.
        let now = shared.now_ns();
        let mut state = shared.lock();
        if state.take_if_ready(&cost, priority, now) {
            drop(state);
            return Ok(Reservation::counted(shared.clone(), cost));
        }
        state
            .check_size(&shared.model_id, &cost)
            .map_err(TryReserveError::TooLarge)?;
        Err(TryReserveError::WouldWait {
            ready_in: Duration::from_nanos(state.queued_wait_ns(&cost, priority, now)),
        })
    }

    /// Reserves `cost` on every dimension, waiting (holding nothing) until it fits. Fails
    /// at once with [`Error::TooLargeForBucket`](crate::Error::TooLargeForBucket) if it never can. The
    /// [`Priority::Default`] form of [`TokenBucketRateLimiter::reserve_with`].
    ///
    /// Cancellation-safe: dropping the future leaves the queue, and if it had already
    /// been granted, gives the capacity back.
    pub fn reserve(&self, cost: Cost) -> Reserve {
        self.reserve_with(cost, Priority::Default)
    }

    /// Reserves `cost` at class `priority`, waiting (holding nothing) in the order the
    /// module docs define: higher classes first, FIFO within a class, promoted (aged)
    /// waiters before every class. Takes the fast path, as
    /// [`TokenBucketRateLimiter::try_reserve_with`] would, if it fits now. Fails at once
    /// with [`Error::TooLargeForBucket`](crate::Error::TooLargeForBucket) if it never can.
    ///
    /// Cancellation-safe: dropping the future leaves the queue, and if it had already
    /// been granted, gives the capacity back.
    pub fn reserve_with(&self, cost: Cost, priority: Priority) -> Reserve {
        Reserve::new(self.handle.shared.clone(), cost, priority)
    }

    /// Tells the limiter what a provider's answer said (success, 429, 529, remaining).
    pub fn feedback(&self, feedback: Feedback) {
        self.handle.shared.feedback(feedback);
    }

    /// Marks a request as sent now: take it right after its reservation is granted, and
    /// hand it back with the answer's rate-limit headers ([`Feedback::Reported`]). The
    /// same as [`SendMark::now`].
    pub fn send_mark(&self) -> SendMark {
        SendMark::now()
    }

    /// A point-in-time view.
    pub fn snapshot(&self) -> LimiterSnapshot {
        let shared = &self.handle.shared;
        // Every strong reference but the handle's is a reservation or a `Reserve`.
        let held = u64::try_from(Arc::strong_count(shared).saturating_sub(1)).unwrap_or(u64::MAX);
        shared.snapshot(held)
    }

    /// The adaptive throttle's factor now (1 = full rate).
    pub fn throttle_factor(&self) -> f64 {
        self.handle.shared.throttle_factor()
    }

    /// The model id.
    pub fn model_id(&self) -> &str {
        &self.handle.shared.model_id
    }
}
