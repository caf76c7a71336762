//! [`RedisSpend`]: a [`SpendLedger`] on Redis, so that a spend cap (a gateway key's
//! daily budget, a workflow's cap) counts every process's calls against one account.
//!
//! Each cap is one hash, `{prefix}:{spend:<cap name>}:acct`, with what is spent and
//! held in whole nano-USD. A hold is one script call that refuses what does not fit
//! beside every process's spend and holds (fail closed when Redis cannot answer); the
//! settle after the answer runs on a task of its own, retried, applied once by its id.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tollgate::pipeline::SpendLedger;
use tollgate::{Error, Result};

use crate::config::RedisLimiterError;
use crate::conn::Conn;
use crate::script::Lua;

static SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("spend.lua").to_owned()));

/// How long an untouched account is kept by default: two days, past a daily budget's
/// day.
pub const DEFAULT_SPEND_TTL: Duration = Duration::from_secs(2 * 24 * 60 * 60);
/// How long a settle's id is remembered, so that a retried settle is applied once.
const SETTLE_ID_TTL_MS: u64 = 10 * 60 * 1000;
/// How often a settle is tried before it is given up (logged).
const SETTLE_ATTEMPTS: u32 = 8;

/// Spend caps' accounts on Redis (from [`crate::RedisLimiters::spend`], on the same
/// connection). Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisSpend {
    conn: Arc<Conn>,
    ttl: Duration,
}

/// `usd` in whole nano-USD, rounded up (a hold and its release round alike).
fn nanos(usd: f64) -> i64 {
    let n = (usd.max(0.0) * 1e9).ceil();
    if n >= i64::MAX as f64 {
        i64::MAX
    } else {
        n as i64
    }
}

impl RedisSpend {
    pub(crate) fn new(conn: Arc<Conn>) -> Self {
        RedisSpend {
            conn,
            ttl: DEFAULT_SPEND_TTL,
        }
    }

    /// Keeps an untouched account this long (default [`DEFAULT_SPEND_TTL`]).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The Redis key of cap `cap`'s account.
    pub fn key(&self, cap: &str) -> String {
        let tag = cap.replace('}', "_");
        format!("{}:{{spend:{tag}}}:acct", self.conn.config.key_prefix)
    }

    fn ttl_ms(&self) -> String {
        self.ttl.as_millis().to_string()
    }

    fn unavailable(cap: &str, e: RedisLimiterError) -> Error {
        Error::LimiterUnavailable {
            backend: "redis".into(),
            model_id: format!("spend cap `{cap}`"),
            source: Box::new(e),
        }
    }

    async fn settle_retried(self, cap: String, held: i64, spent: i64) {
        let mut delay = Duration::from_millis(20);
        let mut id = None;
        for attempt in 1..=SETTLE_ATTEMPTS {
            let result = async {
                let op = match &id {
                    Some(op) => op,
                    None => {
                        let instance = self.conn.instance().await?;
                        id.insert(format!("{instance}:{}", self.conn.next_op()))
                    }
                };
                let mut inv = SCRIPT.key(self.key(&cap));
                inv.arg("settle")
                    .arg((-held).to_string())
                    .arg(spent.to_string())
                    .arg(self.ttl_ms())
                    .arg(op.as_str())
                    .arg(SETTLE_ID_TTL_MS);
                self.conn.invoke::<Vec<i64>>(&inv).await
            }
            .await;
            match result {
                Ok(_) => return,
                Err(e) if attempt == SETTLE_ATTEMPTS => {
                    tracing::warn!(cap = %cap, error = %e, "tollgate-redis: spend settle given up");
                }
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl SpendLedger for RedisSpend {
    async fn hold(&self, cap: &str, usd: f64, limit_usd: f64) -> Result<Result<(), f64>> {
        let mut inv = SCRIPT.key(self.key(cap));
        inv.arg("hold")
            .arg(nanos(usd).to_string())
            .arg(nanos(limit_usd).to_string())
            .arg(self.ttl_ms());
        let reply: Vec<i64> = self
            .conn
            .invoke(&inv)
            .await
            .map_err(|e| Self::unavailable(cap, e))?;
        match reply.as_slice() {
            [1, ..] => Ok(Ok(())),
            [0, remaining, ..] => Ok(Err((*remaining).max(0) as f64 / 1e9)),
            other => Err(Self::unavailable(
                cap,
                RedisLimiterError::Reply {
                    url: self.conn.shown_url.clone(),
                    reply: format!("{other:?}"),
                },
            )),
        }
    }

    fn settle(&self, cap: &str, held_usd: f64, spent_usd: f64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(cap = %cap, "tollgate-redis: a spend settle outside a tokio runtime is lost");
            return;
        };
        let this = self.clone();
        runtime.spawn(this.settle_retried(cap.to_owned(), nanos(held_usd), nanos(spent_usd)));
    }
}
