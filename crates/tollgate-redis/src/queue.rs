//! [`RedisQueueLedger`]: a [`QueueLedger`] on Redis, so that a model's batch-queue limits
//! (enqueued tokens, pending batches) count every process's batches against one account.
//!
//! Each account is one hash, `{prefix}:{queue:<account>}:holds` (a hash tag: one Redis
//! Cluster slot), a field per lease valued `<tokens>:<expiry ms>`. Each operation is one
//! script call (`queue.lua`) that drops the expired holds, decides on the rest and keeps
//! the key until its longest hold ends (no per-field expiry: Redis 7.0 has no `HEXPIRE`).
//! A Redis that cannot answer fails the call closed.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tollgate::limit::{QueueAnswer, QueueCaps, QueueLedger};
use tollgate::{Error, Result};

use crate::config::{RedisClock, RedisLimiterError};
use crate::conn::Conn;
use crate::script::Lua;

static SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("queue.lua").to_owned()));

/// The longest hold kept, whatever `ttl` asks: a century, so that expiries stay exact in
/// the script's numbers and within what `PEXPIRE` takes.
const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// Batch-queue holds on Redis (from [`crate::RedisLimiters::queue`], on the same
/// connection), shared by every process on the same prefix. Cheap to clone.
///
/// Expiries are on Redis `TIME` ([`RedisClock::Server`]), or on the tokio clock for
/// tests ([`RedisClock::Tokio`], one process only). Token sums are exact up to 2^53.
#[derive(Debug, Clone)]
pub struct RedisQueueLedger {
    conn: Arc<Conn>,
}

impl RedisQueueLedger {
    pub(crate) fn new(conn: Arc<Conn>) -> Self {
        RedisQueueLedger { conn }
    }

    /// The Redis key of `account`'s holds.
    pub fn key(&self, account: &str) -> String {
        // A `}` would end the hash tag early; keep the tag the whole account.
        let tag = account.replace('}', "_");
        format!("{}:{{queue:{tag}}}:holds", self.conn.config.key_prefix)
    }

    /// `ARGV[3]`: now in ms on the tokio clock, or empty for Redis `TIME`.
    fn now_arg(&self) -> String {
        match self.conn.config.clock {
            RedisClock::Server => String::new(),
            RedisClock::Tokio { epoch } => tollgate::clock::now()
                .saturating_duration_since(epoch)
                .as_millis()
                .to_string(),
        }
    }

    fn unavailable(account: &str, e: RedisLimiterError) -> Error {
        Error::LimiterUnavailable {
            backend: "redis".into(),
            model_id: format!("batch queue `{account}`"),
            source: Box::new(e),
        }
    }

    fn unexpected(&self, account: &str, reply: &[String]) -> Error {
        Self::unavailable(
            account,
            RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: format!("{reply:?}"),
            },
        )
    }

    /// One script call: `op` on `account`'s `lease`, then the operation's own arguments.
    async fn call(
        &self,
        account: &str,
        op: &str,
        lease: &str,
        rest: &[String],
    ) -> Result<Vec<String>> {
        let mut inv = SCRIPT.key(self.key(account));
        inv.arg(op).arg(lease);
        for a in rest {
            inv.arg(a.as_str());
        }
        self.conn
            .invoke(&inv)
            .await
            .map_err(|e| Self::unavailable(account, e))
    }

    /// `ARGV[3..5]`: now, tokens, ttl.
    fn placing(&self, tokens: u64, ttl: Duration) -> Vec<String> {
        vec![
            self.now_arg(),
            tokens.to_string(),
            ttl.min(MAX_TTL).as_millis().to_string(),
        ]
    }
}

/// A count the script answered: a decimal integer, beyond `u64` saturated.
fn count(s: &str) -> Option<u64> {
    let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| s.parse().unwrap_or(u64::MAX))
}

/// A cap as `ARGV[6]`/`ARGV[7]`: empty when unlimited (a cap of 0 refuses every hold).
fn cap_arg(cap: Option<u64>) -> String {
    cap.map(|c| c.to_string()).unwrap_or_default()
}

#[async_trait::async_trait]
impl QueueLedger for RedisQueueLedger {
    async fn hold(
        &self,
        account: &str,
        lease: &str,
        tokens: u64,
        caps: QueueCaps,
        ttl: Duration,
    ) -> Result<QueueAnswer> {
        let mut args = self.placing(tokens, ttl);
        args.push(cap_arg(caps.tokens));
        args.push(cap_arg(caps.batches));
        let reply = self.call(account, "hold", lease, &args).await?;
        match reply.as_slice() {
            [held] if held == "held" => Ok(QueueAnswer::Held),
            [full, held_tokens, held_batches] if full == "full" => {
                match (count(held_tokens), count(held_batches)) {
                    (Some(held_tokens), Some(held_batches)) => Ok(QueueAnswer::Full {
                        held_tokens,
                        held_batches,
                    }),
                    _ => Err(self.unexpected(account, &reply)),
                }
            }
            _ => Err(self.unexpected(account, &reply)),
        }
    }

    async fn adopt(&self, account: &str, lease: &str, tokens: u64, ttl: Duration) -> Result<()> {
        let args = self.placing(tokens, ttl);
        let reply = self.call(account, "adopt", lease, &args).await?;
        match reply.as_slice() {
            [held] if held == "held" => Ok(()),
            _ => Err(self.unexpected(account, &reply)),
        }
    }

    async fn release(&self, account: &str, lease: &str) -> Result<()> {
        let reply = self.call(account, "release", lease, &[]).await?;
        match reply.as_slice() {
            [released] if released == "released" => Ok(()),
            _ => Err(self.unexpected(account, &reply)),
        }
    }
}
