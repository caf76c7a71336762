//! The connection to Redis that every model of one [`RedisLimiters`](crate::RedisLimiters)
//! shares: connected lazily, reconnecting on its own, each script call bounded by the call
//! timeout on the server clock.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use crate::config::{RedisClock, RedisConfig, RedisLimiterError, shown};

/// The connection, shared by every model of one [`RedisLimiters`](crate::RedisLimiters).
pub(crate) struct Conn {
    pub(crate) config: RedisConfig,
    /// The URL with any password removed, for errors.
    pub(crate) shown_url: String,
    manager: OnceCell<ConnectionManager>,
    /// Ids for idempotent settles: `<instance>:<n>`; the instance is a Redis `INCR`.
    instance: OnceCell<u64>,
    next_op: AtomicU64,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("url", &self.shown_url)
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub(crate) fn new(config: RedisConfig) -> Conn {
        Conn {
            shown_url: shown(&config.url),
            config,
            manager: OnceCell::new(),
            instance: OnceCell::new(),
            next_op: AtomicU64::new(0),
        }
    }

    /// The next number for this process's settle ids.
    pub(crate) fn next_op(&self) -> u64 {
        self.next_op.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) async fn manager(&self) -> Result<ConnectionManager, RedisLimiterError> {
        self.manager
            .get_or_try_init(|| async {
                let client = redis::Client::open(self.config.url.as_str())
                    .map_err(|e| self.redis_error(e))?;
                let timeouts = match self.config.clock {
                    RedisClock::Server => Some(self.config.call_timeout),
                    RedisClock::Tokio { .. } => None,
                };
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(20))
                    .set_max_delay(Duration::from_millis(200))
                    .set_connection_timeout(timeouts)
                    .set_response_timeout(timeouts);
                ConnectionManager::new_lazy_with_config(client, config)
                    .map_err(|e| self.redis_error(e))
            })
            .await
            .cloned()
    }

    pub(crate) fn redis_error(&self, source: redis::RedisError) -> RedisLimiterError {
        RedisLimiterError::Redis {
            url: self.shown_url.clone(),
            source,
        }
    }

    /// One script call, bounded by the call timeout on the server clock.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, RedisLimiterError> {
        let mut manager = self.manager().await?;
        let call = invocation.invoke_async::<T>(&mut manager);
        match self.config.clock {
            RedisClock::Tokio { .. } => call.await.map_err(|e| self.redis_error(e)),
            RedisClock::Server => {
                match tokio::time::timeout(self.config.call_timeout, call).await {
                    Ok(r) => r.map_err(|e| self.redis_error(e)),
                    Err(_) => Err(RedisLimiterError::Timeout {
                        url: self.shown_url.clone(),
                        timeout: self.config.call_timeout,
                    }),
                }
            }
        }
    }

    /// A process-unique prefix for settle ids.
    pub(crate) async fn instance(&self) -> Result<u64, RedisLimiterError> {
        self.instance
            .get_or_try_init(|| async {
                let mut manager = self.manager().await?;
                let key = format!("{}:instances", self.config.key_prefix);
                redis::cmd("INCR")
                    .arg(&key)
                    .query_async::<u64>(&mut manager)
                    .await
                    .map_err(|e| self.redis_error(e))
            })
            .await
            .copied()
    }
}
