//! The connection to Redis (one node or a cluster, `target.rs`) that every model of one
//! [`RedisLimiters`](crate::RedisLimiters) shares: connected lazily, reconnecting on its
//! own, each script call bounded by the call timeout on the server clock. Beside it, one subscription to the models' epoch channels
//! (`epochs.rs`).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::sync::{Arc, Weak};

use futures::StreamExt;
use tokio::sync::OnceCell;

use crate::epochs::Epochs;

use crate::config::{RedisClock, RedisConfig, RedisLimiterError, shown};
use crate::script::Invocation;
use crate::target::{Shared, Target};

/// The connection, shared by every model of one [`RedisLimiters`](crate::RedisLimiters).
pub(crate) struct Conn {
    pub(crate) config: RedisConfig,
    /// The URL with any password removed, for errors.
    pub(crate) shown_url: String,
    /// The node or cluster the URL names.
    target: Target,
    manager: OnceCell<Shared>,
    /// Ids for idempotent settles: `<instance>:<n>`; the instance is a Redis `INCR`.
    instance: OnceCell<u64>,
    next_op: AtomicU64,
    /// What this process knows of each model's epoch, kept current by a subscription.
    pub(crate) epochs: Epochs,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("url", &self.shown_url)
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// The connection for `config`, whose URL was read as `target`.
    pub(crate) fn new(config: RedisConfig, target: Target) -> Conn {
        Conn {
            shown_url: shown(&config.url),
            target,
            config,
            manager: OnceCell::new(),
            instance: OnceCell::new(),
            next_op: AtomicU64::new(0),
            epochs: Epochs::default(),
        }
    }

    /// The next number for this process's settle ids.
    pub(crate) fn next_op(&self) -> u64 {
        self.next_op.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) async fn manager(&self) -> Result<Shared, RedisLimiterError> {
        self.manager
            .get_or_try_init(|| async {
                let timeouts = match self.config.clock {
                    RedisClock::Server => Some(self.config.call_timeout),
                    RedisClock::Tokio { .. } => None,
                };
                Shared::lazy(&self.target, timeouts).map_err(|e| self.redis_error(e))
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
        invocation: &Invocation,
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

/// How long the epoch subscriber waits before connecting again after a failure.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(200);

impl Conn {
    /// Starts the epoch subscription if it is not running, and waits for its first
    /// attempt to subscribe (done or failed): reservations made after it can rely on it.
    pub(crate) async fn watch_epochs(self: &Arc<Self>) {
        self.epochs
            .started
            .get_or_init(|| async {
                let (ready, subscribed) = tokio::sync::oneshot::channel();
                tokio::spawn(subscriber(Arc::downgrade(self), ready));
                let _ = subscribed.await;
            })
            .await;
    }
}

/// Subscribes to every model's epoch channel under the prefix and records what arrives,
/// until the [`Conn`] is dropped; reconnects after a failure.
async fn subscriber(conn: Weak<Conn>, ready: tokio::sync::oneshot::Sender<()>) {
    let mut ready = Some(ready);
    for attempt in 0.. {
        let Some(c) = conn.upgrade() else { return };
        let pattern = format!("{}:*:ep", c.config.key_prefix);
        let url = c.target.subscribe_url(attempt).to_owned();
        let subscribed = async {
            let client = redis::Client::open(url.as_str())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(&pattern).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let subscribed = match c.config.clock {
            crate::RedisClock::Server => tokio::time::timeout(c.config.call_timeout, subscribed)
                .await
                .ok()
                .and_then(Result::ok),
            crate::RedisClock::Tokio { .. } => subscribed.await.ok(),
        };
        let Some(pubsub) = subscribed else {
            ready.take().map(|r| r.send(()));
            drop(c);
            tokio::time::sleep(RESUBSCRIBE_DELAY).await;
            continue;
        };
        c.epochs.generation.fetch_add(1, Ordering::SeqCst);
        c.epochs.up.store(true, Ordering::SeqCst);
        ready.take().map(|r| r.send(()));
        drop(c);
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            let Some(c) = conn.upgrade() else { return };
            let channel = message.get_channel_name();
            let epoch = message
                .get_payload::<String>()
                .ok()
                .and_then(|p| p.parse::<f64>().ok());
            if let (Some(key), Some(epoch)) = (channel.strip_suffix(":ep"), epoch) {
                c.epochs.seen(key, epoch as u64);
            }
        }
        // The connection dropped: until it is back, every booking is checked at its start.
        let Some(c) = conn.upgrade() else { return };
        c.epochs.up.store(false, Ordering::SeqCst);
        drop(c);
        tokio::time::sleep(RESUBSCRIBE_DELAY).await;
    }
}
