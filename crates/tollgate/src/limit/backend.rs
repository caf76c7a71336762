//! The seam for where a model's buckets live: [`LimiterBackend`], and the
//! [`LimiterFactory`] that builds one per catalog model.

use std::fmt::Debug;
use std::sync::Arc;

use super::config::LimiterConfig;
use super::cost::Cost;
use super::limiter::TokenBucketRateLimiter;
use super::priority::Priority;
use super::reservation::{Reservation, TryReserveError};
use super::snapshot::LimiterSnapshot;
use super::throttle::Feedback;
use crate::error::Result;

/// Where a model's buckets live. The in-process [`TokenBucketRateLimiter`] is the
/// default; a shared backend (Redis, crate `tollgate-redis`) implements the same
/// semantics for many processes. [`crate::Models`] holds one per catalog model (and per
/// deployment), built by a [`LimiterFactory`], and the pipeline, fallback chains,
/// admission, header feedback, the throttle and pauses all go through this trait.
///
/// Implementations issue [`Reservation`]s through their own [`BucketLedger`](super::BucketLedger), so refunds
/// and settlements reach the right place. Reserving is async because a shared backend
/// answers over the network; the in-process limiter answers at once.
#[async_trait::async_trait]
pub trait LimiterBackend: Send + Sync + Debug {
    /// The catalog model (or `model/deployment`) these buckets belong to.
    fn model_id(&self) -> &str;

    /// Reserves `cost` on every dimension, waiting (holding nothing) until it fits; a
    /// higher `priority` is granted first, FIFO within a class. Fails at once with
    /// [`crate::Error::TooLargeForBucket`] if the cost can never fit.
    async fn reserve(&self, cost: Cost, priority: Priority) -> Result<Reservation>;

    /// Reserves now or fails without waiting (the `max_wait = 0` form fallbacks and
    /// deployments use); never passes a waiter of its own or a higher class.
    async fn try_reserve(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError>;

    /// What a provider's answer said about the model's rate. Synchronous, like
    /// [`BucketLedger::adjust`](super::BucketLedger::adjust), so that a stream can report from `poll_next`: a shared
    /// backend sends it on a task of its own.
    fn feedback(&self, feedback: Feedback);

    /// A point-in-time view, for dashboards, progress bars and tests.
    async fn snapshot(&self) -> Result<LimiterSnapshot>;

    /// The adaptive throttle's factor now (1 = full rate), if the backend can tell
    /// without a round trip; spans record it on each attempt (`tollgate.throttle_factor`).
    fn throttle_factor(&self) -> Option<f64> {
        None
    }
}

#[async_trait::async_trait]
impl LimiterBackend for TokenBucketRateLimiter {
    fn model_id(&self) -> &str {
        TokenBucketRateLimiter::model_id(self)
    }

    async fn reserve(&self, cost: Cost, priority: Priority) -> Result<Reservation> {
        TokenBucketRateLimiter::reserve_with(self, cost, priority).await
    }

    async fn try_reserve(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        TokenBucketRateLimiter::try_reserve_with(self, cost, priority)
    }

    fn feedback(&self, feedback: Feedback) {
        TokenBucketRateLimiter::feedback(self, feedback);
    }

    async fn snapshot(&self) -> Result<LimiterSnapshot> {
        Ok(TokenBucketRateLimiter::snapshot(self))
    }

    fn throttle_factor(&self) -> Option<f64> {
        Some(TokenBucketRateLimiter::throttle_factor(self))
    }
}

/// Builds the [`LimiterBackend`] of each catalog model (and each of its deployments)
/// when [`crate::Models`] is built. The default is [`InProcessLimiters`].
pub trait LimiterFactory: Send + Sync + Debug {
    /// The buckets for `config` (its `model_id` names the model, or `model/deployment`).
    fn build(&self, config: &LimiterConfig) -> Result<Arc<dyn LimiterBackend>>;
}

/// The default [`LimiterFactory`]: a [`TokenBucketRateLimiter`] in this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcessLimiters;

impl LimiterFactory for InProcessLimiters {
    fn build(&self, config: &LimiterConfig) -> Result<Arc<dyn LimiterBackend>> {
        Ok(Arc::new(TokenBucketRateLimiter::new(config.clone())))
    }
}
