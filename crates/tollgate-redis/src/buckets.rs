//! One model's buckets on Redis as every call sees them: the hash's key, the limited
//! dimensions with their capacities, the connection, the local fallback and the call
//! counters, and how a script call on them is put together. The reservation
//! (`reserve.rs`), the calls that are not waited for (`background.rs`, `feedback.rs`)
//! and the snapshot (`snapshot.rs`) each add their calls to [`Buckets`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tollgate::catalog::RateWindow;
use tollgate::limit::{Burst, LimiterConfig, TokenBucketRateLimiter};
use tollgate::{Dimension, Error};

use crate::config::{FailurePolicy, RedisClock, RedisLimiterError, key_for};
use crate::conn::Conn;
use crate::epochs::EpochCell;
use crate::script::{Invocation, SCRIPT, ScriptArgs};

/// A throttle factor of 1, in millionths.
pub(crate) const FACTOR_ONE_MICRO: u64 = 1_000_000;

/// One limited dimension as the script sees it.
#[derive(Debug, Clone)]
pub(crate) struct Dim {
    pub(crate) dimension: Dimension,
    pub(crate) name: &'static str,
    pub(crate) capacity: u64,
    pub(crate) limit: u64,
}

/// One model's buckets on Redis, shared by its limiter and the tasks it spawns.
pub(crate) struct Buckets {
    pub(crate) model_id: String,
    pub(crate) key: String,
    pub(crate) dims: Vec<Dim>,
    pub(crate) adaptive: bool,
    /// The limits are fixed windows (`window = "fixed"`): a turn learned from a report's
    /// reset or a 429's `retry-after` is kept in the hash, and successes are counted there.
    pub(crate) fixed_window: bool,
    /// How a limit learned from a provider's headers sizes its bucket.
    pub(crate) burst: Burst,
    /// [`LimiterConfig::arrival_allowance`] in µs, for the script's reserve.
    pub(crate) arrival_allowance_us: u64,
    /// [`LimiterConfig::aging`]: after this long a reservation of any class books
    /// whatever slot it is given (`priority.rs`).
    pub(crate) aging: Duration,
    pub(crate) conn: Arc<Conn>,
    pub(crate) fallback: Option<TokenBucketRateLimiter>,
    /// Script calls in flight (reserves, settles, feedback), for
    /// [`RedisLimiter::flush`](crate::RedisLimiter::flush).
    pub(crate) pending: AtomicUsize,
    pub(crate) idle: Notify,
    pub(crate) round_trips: AtomicU64,
    pub(crate) reserve_round_trips: AtomicU64,
    pub(crate) failures: AtomicU64,
    /// The throttle factor (millionths) in the last reserve's answer.
    pub(crate) factor_micro: AtomicU64,
    /// The model's latest epoch this process has seen (`epochs.rs`).
    pub(crate) epoch: Arc<EpochCell>,
}

impl fmt::Debug for Buckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("model_id", &self.model_id)
            .field("key", &self.key)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

/// Burst capacity, as [`Burst`] defines it for the in-process limiter.
pub(crate) fn capacity(burst: Burst, limit: u64) -> u64 {
    match burst {
        Burst::Seconds(s) => (u128::from(limit) * u128::from(s.min(60)) / 60)
            .max(1)
            .try_into()
            .unwrap_or(u64::MAX),
        _ => limit,
    }
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Buckets {
    /// The buckets of the model `config` describes, on `conn`: one dimension per limit
    /// the catalog sets, and the local fallback the failure policy asks for (each
    /// process its share of every limit).
    pub(crate) fn new(conn: Arc<Conn>, config: &LimiterConfig) -> Self {
        let l = config.limits;
        let dims: Vec<Dim> = [
            (Dimension::Requests, "rpm", l.rpm),
            (Dimension::Tokens, "tpm", l.tpm),
            (Dimension::InputTokens, "itpm", l.input_tpm),
            (Dimension::OutputTokens, "otpm", l.output_tpm),
        ]
        .into_iter()
        .filter(|(_, _, limit)| *limit > 0)
        .map(|(dimension, name, limit)| Dim {
            dimension,
            name,
            capacity: capacity(config.burst, limit),
            limit,
        })
        .collect();
        let fallback = match conn.config.failure_policy {
            FailurePolicy::FailClosed => None,
            FailurePolicy::LocalFallback { expected_processes } => {
                let n = u64::from(expected_processes.max(1));
                let share = |x: u64| if x == 0 { 0 } else { (x / n).max(1) };
                let mut local = config.clone();
                local.limits.rpm = share(l.rpm);
                local.limits.tpm = share(l.tpm);
                local.limits.input_tpm = share(l.input_tpm);
                local.limits.output_tpm = share(l.output_tpm);
                Some(TokenBucketRateLimiter::new(local))
            }
        };
        let key = key_for(&conn.config.key_prefix, &config.model_id);
        Buckets {
            epoch: conn.epochs.cell(&key),
            key,
            model_id: config.model_id.clone(),
            dims,
            adaptive: config.adaptive,
            fixed_window: config.window == RateWindow::Fixed,
            burst: config.burst,
            arrival_allowance_us: micros(config.arrival_allowance),
            aging: config.aging,
            conn,
            fallback,
            pending: AtomicUsize::new(0),
            idle: Notify::new(),
            round_trips: AtomicU64::new(0),
            reserve_round_trips: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            factor_micro: AtomicU64::new(FACTOR_ONE_MICRO),
        }
    }

    /// The error of a call Redis could not answer, for the caller.
    pub(crate) fn unavailable(&self, e: RedisLimiterError) -> Error {
        Error::LimiterUnavailable {
            backend: "redis".into(),
            model_id: self.model_id.clone(),
            source: Box::new(e),
        }
    }

    /// The script's `now` for a call made at `at`: empty (Redis `TIME`) on the server
    /// clock, µs since the epoch on the injected one.
    fn now_arg(&self, at: Instant) -> String {
        match self.conn.config.clock {
            RedisClock::Server => String::new(),
            RedisClock::Tokio { epoch } => micros(at.saturating_duration_since(epoch)).to_string(),
        }
    }

    /// The script invocation for `op` with the dimensions' `amounts` (tokens, signed).
    pub(crate) fn invocation(
        &self,
        at: Instant,
        op: &str,
        second_key: Option<&str>,
        args: ScriptArgs,
        amounts: impl Fn(Dimension) -> i64,
    ) -> Invocation {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.key).key(second_key.unwrap_or(&self.key));
        inv.arg(op).arg(self.now_arg(at));
        for x in args.0 {
            inv.arg(x);
        }
        let burst_s = match self.burst {
            Burst::FullMinute => 60,
            Burst::Seconds(s) => s.min(60),
        };
        inv.arg(if self.adaptive { "1" } else { "0" })
            .arg(if self.fixed_window { "1" } else { "0" })
            .arg(burst_s)
            .arg(self.dims.len());
        for d in &self.dims {
            inv.arg(d.name)
                .arg(d.capacity)
                .arg(d.limit)
                .arg(amounts(d.dimension));
        }
        inv
    }
}
