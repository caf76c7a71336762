//! [`RedisLimiters`]: the [`LimiterFactory`] a `Models` builder is given, which builds
//! each model's [`RedisLimiter`] on one shared connection.

use std::sync::Arc;

use tollgate::limit::{LimiterBackend, LimiterConfig, LimiterFactory};
use tollgate::{Error, Result};

use crate::config::RedisConfig;
use crate::conn::Conn;
use crate::limiter::RedisLimiter;
use crate::queue::RedisQueueLedger;
use crate::spend::RedisSpend;
use crate::target::Target;

/// The [`LimiterFactory`] that puts models' buckets on Redis. Cheap to clone; all models
/// built by one factory share one auto-reconnecting connection.
#[derive(Debug, Clone)]
pub struct RedisLimiters {
    conn: Arc<Conn>,
}

impl RedisLimiters {
    /// A factory for `config`. Connects lazily, on the first reservation; fails only for
    /// an invalid URL. The URL names one node (`redis://host:port/`) or a Redis Cluster:
    /// `redis+cluster://host:port` or several comma-separated seeds.
    pub fn new(config: RedisConfig) -> Result<Self> {
        let target = Target::parse(&config.url).map_err(|reason| Error::InvalidRequest {
            field: "redis url".into(),
            reason,
        })?;
        Ok(RedisLimiters {
            conn: Arc::new(Conn::new(config, target)),
        })
    }

    /// Spend caps' accounts on the same Redis and connection (a [`tollgate::pipeline::SpendLedger`]
    /// for [`tollgate::SpendCap::shared`]).
    pub fn spend(&self) -> RedisSpend {
        RedisSpend::new(self.conn.clone())
    }

    /// Batch-queue holds on the same Redis and connection (a [`tollgate::limit::QueueLedger`]):
    /// a model's enqueued-token and pending-batch limits count every process's batches.
    pub fn queue(&self) -> RedisQueueLedger {
        RedisQueueLedger::new(self.conn.clone())
    }

    /// The limiter for `config`, as its concrete type (for [`RedisLimiter::flush`] and
    /// the counters).
    pub fn limiter(&self, config: &LimiterConfig) -> RedisLimiter {
        RedisLimiter::new(self.conn.clone(), config)
    }
}

impl LimiterFactory for RedisLimiters {
    fn build(&self, config: &LimiterConfig) -> Result<Arc<dyn LimiterBackend>> {
        Ok(Arc::new(self.limiter(config)))
    }
}
