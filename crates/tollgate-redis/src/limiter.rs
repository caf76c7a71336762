//! [`RedisLimiter`]: one model's limiter on Redis, the [`LimiterBackend`] the pipeline
//! reserves through. It hands each call to the model's shared [`Buckets`]: a
//! reservation (`reserve.rs`), feedback (`feedback.rs`), a snapshot (`snapshot.rs`); and
//! it counts the script calls, for benchmarks and tests.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tollgate::Result;
use tollgate::limit::{
    Cost, Feedback, LimiterBackend, LimiterConfig, LimiterSnapshot, Priority, Reservation,
    TryReserveError,
};

use crate::background::Sent;
use crate::buckets::Buckets;
use crate::conn::Conn;
use crate::reserve::BookedSlot;

/// One model's buckets on Redis. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisLimiter {
    buckets: Arc<Buckets>,
}

impl RedisLimiter {
    pub(crate) fn new(conn: Arc<Conn>, config: &LimiterConfig) -> Self {
        RedisLimiter {
            buckets: Arc::new(Buckets::new(conn, config)),
        }
    }

    /// The Redis key holding this model's buckets.
    pub fn key(&self) -> &str {
        &self.buckets.key
    }

    /// Script calls made so far (one per reservation, settle, feedback or snapshot).
    pub fn round_trips(&self) -> u64 {
        self.buckets.round_trips.load(Ordering::Relaxed)
    }

    /// Of [`RedisLimiter::round_trips`], the reservation calls (`reserve` and
    /// `try_reserve`): one per reservation asked for.
    pub fn reserve_round_trips(&self) -> u64 {
        self.buckets.reserve_round_trips.load(Ordering::Relaxed)
    }

    /// Calls that failed (Redis unreachable, timed out or gave up after retries).
    pub fn failures(&self) -> u64 {
        self.buckets.failures.load(Ordering::Relaxed)
    }

    /// Waits until every settle, refund and feedback sent so far has been applied (or
    /// given up), and no reservation is on its way to Redis.
    pub async fn flush(&self) {
        loop {
            let idle = self.buckets.idle.notified();
            if self.buckets.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// [`LimiterBackend::reserve`], also saying which slot was booked and how long the
    /// booking took: for benchmarks and multi-process tests.
    pub async fn reserve_booked(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<(Reservation, Option<BookedSlot>)> {
        self.buckets.reserve_booked(cost, priority).await
    }
}

#[async_trait::async_trait]
impl LimiterBackend for RedisLimiter {
    fn model_id(&self) -> &str {
        &self.buckets.model_id
    }

    async fn reserve(&self, cost: Cost, priority: Priority) -> Result<Reservation> {
        self.reserve_booked(cost, priority).await.map(|(r, _)| r)
    }

    async fn try_reserve(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        self.buckets.try_reserve(cost, priority).await
    }

    /// Applies `feedback` to the shared buckets in one script call on a task of its own
    /// (see `feedback.rs` for what each kind does), and to the local fallback if there is
    /// one.
    fn feedback(&self, feedback: Feedback) {
        if let Some(local) = &self.buckets.fallback {
            local.feedback(feedback);
        }
        if self.buckets.dims.is_empty() {
            return;
        }
        if let Some(call) = self.buckets.feedback_call(feedback) {
            self.buckets.spawn("feedback", Sent::Feedback(call));
        }
    }

    async fn snapshot(&self) -> Result<LimiterSnapshot> {
        self.buckets.snapshot().await
    }
}
