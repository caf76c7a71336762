//! A limiter that counts the reservations it grants: how the kit sees "one HTTP request,
//! one reservation" from outside the pipeline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tollgate::Result;
use tollgate::limit::{
    Cost, Feedback, LimiterBackend, LimiterConfig, LimiterFactory, LimiterSnapshot, Priority,
    Reservation, TokenBucketRateLimiter, TryReserveError,
};

/// Builds in-process limiters (as [`tollgate::limit::InProcessLimiters`] does) that
/// count, together, every reservation granted.
#[derive(Debug, Clone, Default)]
pub struct CountingLimiters(Arc<AtomicUsize>);

impl CountingLimiters {
    /// How many reservations the limiters it built have granted so far.
    pub fn granted(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl LimiterFactory for CountingLimiters {
    fn build(&self, config: &LimiterConfig) -> Result<Arc<dyn LimiterBackend>> {
        Ok(Arc::new(Counting {
            inner: TokenBucketRateLimiter::new(config.clone()),
            granted: self.0.clone(),
        }))
    }
}

#[derive(Debug)]
struct Counting {
    inner: TokenBucketRateLimiter,
    granted: Arc<AtomicUsize>,
}

impl Counting {
    fn count<T, E>(&self, result: std::result::Result<T, E>) -> std::result::Result<T, E> {
        if result.is_ok() {
            self.granted.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

#[tollgate::async_trait]
impl LimiterBackend for Counting {
    fn model_id(&self) -> &str {
        LimiterBackend::model_id(&self.inner)
    }

    async fn reserve(&self, cost: Cost, priority: Priority) -> Result<Reservation> {
        self.count(LimiterBackend::reserve(&self.inner, cost, priority).await)
    }

    async fn try_reserve(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> std::result::Result<Reservation, TryReserveError> {
        self.count(LimiterBackend::try_reserve(&self.inner, cost, priority).await)
    }

    fn feedback(&self, feedback: Feedback) {
        LimiterBackend::feedback(&self.inner, feedback);
    }

    async fn snapshot(&self) -> Result<LimiterSnapshot> {
        LimiterBackend::snapshot(&self.inner).await
    }

    fn throttle_factor(&self) -> Option<f64> {
        LimiterBackend::throttle_factor(&self.inner)
    }
}
