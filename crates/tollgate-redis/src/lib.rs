//! A [`LimiterBackend`] on Redis: many processes sharing one provider quota.
//!
//! Each catalog model's buckets (requests, tokens, input and output tokens per minute),
//! its adaptive throttle factor, its provider pause and any lower limit a provider's
//! headers said live in one Redis hash, `{prefix}:{model}:lim` (a hash tag, so one Redis
//! Cluster slot). One Lua script call (one round trip) reserves every dimension at once
//! or none and answers "granted, start after D" (*reserve-ahead*, as
//! `golang.org/x/time/rate`'s `Reserve`): order across processes is arrival order at
//! Redis, a large call is never starved, and the waiter sleeps exactly D holding a booked
//! slot and nothing else (no connection, no permit).
//! Dropping a reservation before it is sent gives it back; settlement after the answer
//! is a second call (`background.rs`), and so is what the answer said about the rate
//! (`feedback.rs`: 429s, 529s, rate-limit headers), which every process then sees. See
//! `docs/distributed.md`.
//!
//! ```
//! use tollgate_redis::{FailurePolicy, RedisConfig, RedisLimiters};
//! use tollgate_fake as _;
//!
//! # fn main() -> tollgate::Result<()> {
//! // Connects lazily, on the first reservation: building needs no server.
//! let redis = RedisLimiters::new(
//!     RedisConfig::new("redis://127.0.0.1:6379/").with_failure_policy(FailurePolicy::FailClosed),
//! )?;
//! let models = tollgate::Models::builder()
//!     .catalog(tollgate::Catalog::from_toml_str(
//!         "[models.m]\nprovider = \"fake\"\nmax_output_tokens = 100\nrpm = 60\n",
//!     )?)
//!     .limiter_backend(redis) // every model's buckets in Redis, shared by every process
//!     .build()?;
//! # drop(models);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tollgate::limit::{
    BucketLedger, Burst, Cost, CostDelta, Feedback, LimiterBackend, LimiterConfig, LimiterFactory,
    LimiterSnapshot, Priority, Reservation, TokenBucketRateLimiter, TryReserveError,
};
use tollgate::{Dimension, Error, Result};

mod background;
mod config;
mod conn;
mod feedback;
mod priority;
mod script;

use background::{InFlight, Ledger, Sent};
pub use config::{FailurePolicy, RedisClock, RedisConfig, RedisLimiterError};
use config::{key_for, shown};
use conn::Conn;
use script::{SCRIPT, ScriptArgs};

pub use priority::BATCH_HORIZON;

/// A throttle factor of 1, in millionths.
const FACTOR_ONE_MICRO: u64 = 1_000_000;

/// The [`LimiterFactory`] that puts models' buckets on Redis. Cheap to clone; all models
/// built by one factory share one auto-reconnecting connection.
#[derive(Debug, Clone)]
pub struct RedisLimiters {
    conn: Arc<Conn>,
}

impl RedisLimiters {
    /// A factory for `config`. Connects lazily, on the first reservation; fails only for
    /// an invalid URL.
    pub fn new(config: RedisConfig) -> Result<Self> {
        let info = redis::parse_redis_url(&config.url).ok_or_else(|| Error::InvalidRequest {
            field: "redis url".into(),
            reason: format!("`{}` is not a redis:// URL", shown(&config.url)),
        })?;
        drop(info);
        Ok(RedisLimiters {
            conn: Arc::new(Conn::new(config)),
        })
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

/// One limited dimension as the script sees it.
#[derive(Debug, Clone)]
struct Dim {
    dimension: Dimension,
    name: &'static str,
    capacity: u64,
    limit: u64,
}

/// One model's buckets on Redis. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RedisLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    model_id: String,
    key: String,
    dims: Vec<Dim>,
    adaptive: bool,
    /// How a limit learned from a provider's headers sizes its bucket.
    burst: Burst,
    /// [`LimiterConfig::arrival_allowance`] in µs, for the script's reserve.
    arrival_allowance_us: u64,
    /// [`LimiterConfig::aging`]: after this long a reservation of any class books
    /// whatever slot it is given (`priority.rs`).
    aging: Duration,
    conn: Arc<Conn>,
    fallback: Option<TokenBucketRateLimiter>,
    /// Script calls in flight (reserves, settles, feedback), for [`RedisLimiter::flush`].
    pending: AtomicUsize,
    idle: Notify,
    round_trips: AtomicU64,
    reserve_round_trips: AtomicU64,
    failures: AtomicU64,
    /// The throttle factor (millionths) in the last reserve's answer.
    factor_micro: AtomicU64,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("model_id", &self.model_id)
            .field("key", &self.key)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

/// What the script answered to a reserve.
enum Booked {
    /// Granted: start `wait_us` after `now_us` (the limiter's clock).
    Granted { wait_us: u64, now_us: u64 },
    /// Not within the caller's longest wait; nothing taken.
    Later { wait_us: u64 },
    /// Dimension `index` (0-based) can never hold the cost.
    TooLarge { index: usize, capacity: u64 },
}

/// The slot a reservation booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Booking {
    /// When the slot starts, in µs on the limiter's clock (Redis `TIME`, or since the
    /// [`RedisClock::Tokio`] epoch).
    pub start_us: u64,
    /// How long the caller was told to wait.
    pub wait: Duration,
    /// How long the booking call took (request to answer).
    pub round_trip: Duration,
}

/// Burst capacity, as [`Burst`] defines it for the in-process limiter.
fn capacity(burst: Burst, limit: u64) -> u64 {
    match burst {
        Burst::Seconds(s) => (u128::from(limit) * u128::from(s.min(60)) / 60)
            .max(1)
            .try_into()
            .unwrap_or(u64::MAX),
        _ => limit,
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl RedisLimiter {
    fn new(conn: Arc<Conn>, config: &LimiterConfig) -> Self {
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
        RedisLimiter {
            inner: Arc::new(Inner {
                key: key_for(&conn.config.key_prefix, &config.model_id),
                model_id: config.model_id.clone(),
                dims,
                adaptive: config.adaptive,
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
            }),
        }
    }

    /// The Redis key holding this model's buckets.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// Script calls made so far (one per reservation, settle, feedback or snapshot).
    pub fn round_trips(&self) -> u64 {
        self.inner.round_trips.load(Ordering::Relaxed)
    }

    /// Of [`RedisLimiter::round_trips`], the reservation calls (`reserve` and
    /// `try_reserve`): one per reservation asked for.
    pub fn reserve_round_trips(&self) -> u64 {
        self.inner.reserve_round_trips.load(Ordering::Relaxed)
    }

    /// Calls that failed (Redis unreachable, timed out or gave up after retries).
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// Waits until every settle, refund and feedback sent so far has been applied (or
    /// given up), and no reservation is on its way to Redis.
    pub async fn flush(&self) {
        loop {
            let idle = self.inner.idle.notified();
            if self.inner.pending.load(Ordering::SeqCst) == 0 {
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
    ) -> Result<(Reservation, Option<Booking>)> {
        if self.inner.dims.is_empty() {
            return Ok((Reservation::unlimited(cost), None));
        }
        let started = tollgate::clock::now();
        let mut sent_at = started;
        let mut horizon = priority::horizon(priority, Duration::ZERO, self.inner.aging);
        loop {
            let max_wait = horizon.map_or(-1, |h| i64::try_from(micros(h)).unwrap_or(i64::MAX));
            match self.book(sent_at, cost, max_wait).await {
                // A lower class asked for a slot beyond its horizon: nothing was taken;
                // ask again when the slot is within it (or the reservation has aged).
                Ok(Booked::Later { wait_us }) if horizon.is_some() => {
                    // The offered slot starts `wait_us` after the call's `sent_at` (the
                    // script's now); asleep until it is within the horizon, or aged.
                    let slot = sent_at + Duration::from_micros(wait_us);
                    let h = horizon.unwrap_or_default();
                    tokio::time::sleep_until(priority::ask_again_at(
                        slot,
                        h,
                        started + self.inner.aging,
                        tollgate::clock::now(),
                    ))
                    .await;
                    sent_at = tollgate::clock::now();
                    horizon = priority::horizon(priority, sent_at - started, self.inner.aging);
                }
                answer => return self.booked(answer, sent_at, cost, priority).await,
            }
        }
    }

    /// What a reservation's final answer from the script comes to.
    async fn booked(
        &self,
        answer: Result<Booked, RedisLimiterError>,
        sent_at: Instant,
        cost: Cost,
        priority: Priority,
    ) -> Result<(Reservation, Option<Booking>)> {
        match answer {
            Ok(Booked::Granted { wait_us, now_us }) => {
                let booking = Booking {
                    start_us: now_us.saturating_add(wait_us),
                    wait: Duration::from_micros(wait_us),
                    round_trip: sent_at.elapsed(),
                };
                // Held while sleeping: dropping the future gives the booked slot back.
                let reservation = self.reservation(cost);
                if wait_us > 0 {
                    match self.inner.conn.config.clock {
                        // The booking was made at `sent_at` on this clock.
                        RedisClock::Tokio { .. } => {
                            tokio::time::sleep_until(sent_at + booking.wait).await;
                        }
                        // Measured from the answer: at worst late by the trip back.
                        RedisClock::Server => tokio::time::sleep(booking.wait).await,
                    }
                }
                Ok((reservation, Some(booking)))
            }
            Ok(Booked::TooLarge { index, capacity }) => Err(self.too_large(&cost, index, capacity)),
            // An unbounded reserve is always granted; this reply would be a script bug.
            Ok(Booked::Later { .. }) => Err(self.unavailable(RedisLimiterError::Reply {
                url: self.inner.conn.shown_url.clone(),
                reply: "an unbounded reserve was refused".into(),
            })),
            Err(e) => match &self.inner.fallback {
                Some(local) => local.reserve_with(cost, priority).await.map(|r| (r, None)),
                None => Err(self.unavailable(e)),
            },
        }
    }

    fn unavailable(&self, e: RedisLimiterError) -> Error {
        Error::LimiterUnavailable {
            backend: "redis".into(),
            model_id: self.inner.model_id.clone(),
            source: Box::new(e),
        }
    }

    /// One reserve call on a task of its own: if the caller goes away while the answer
    /// is on its way, the task gives back what was booked.
    async fn book(
        &self,
        at: Instant,
        cost: Cost,
        max_wait_us: i64,
    ) -> Result<Booked, RedisLimiterError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let inner = self.inner.clone();
        let flight = InFlight::new(&inner);
        tokio::spawn(async move {
            let answer = inner.reserve_call(at, cost, max_wait_us).await;
            if let Err(Ok(Booked::Granted { .. })) = tx.send(answer) {
                // The caller is gone: nothing will be sent.
                Ledger(inner.clone()).adjust(CostDelta::refund(&cost));
            }
            drop(flight);
        });
        rx.await.unwrap_or_else(|_| {
            Err(RedisLimiterError::Reply {
                url: self.inner.conn.shown_url.clone(),
                reply: "the reserve task ended without an answer".into(),
            })
        })
    }

    fn too_large(&self, cost: &Cost, index: usize, capacity: u64) -> Error {
        let dimension = self
            .inner
            .dims
            .get(index)
            .map_or(Dimension::Requests, |d| d.dimension);
        Error::TooLargeForBucket {
            model_id: self.inner.model_id.clone(),
            dimension,
            needed: cost.on(dimension),
            capacity,
        }
    }

    fn reservation(&self, cost: Cost) -> Reservation {
        Reservation::new(Arc::new(Ledger(self.inner.clone())), cost)
    }
}

impl Inner {
    /// The script's `now` for a call made at `at`: empty (Redis `TIME`) on the server
    /// clock, µs since the epoch on the injected one.
    fn now_arg(&self, at: Instant) -> String {
        match self.conn.config.clock {
            RedisClock::Server => String::new(),
            RedisClock::Tokio { epoch } => micros(at.saturating_duration_since(epoch)).to_string(),
        }
    }

    /// The script invocation for `op` with the dimensions' `amounts` (tokens, signed).
    fn invocation(
        &self,
        at: Instant,
        op: &str,
        second_key: Option<&str>,
        args: ScriptArgs,
        amounts: impl Fn(Dimension) -> i64,
    ) -> redis::ScriptInvocation<'static> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.key).key(second_key.unwrap_or(&self.key));
        inv.arg(op).arg(self.now_arg(at));
        for x in args.0 {
            inv.arg(x);
        }
        inv.arg(if self.adaptive { "1" } else { "0" })
            .arg(self.dims.len());
        for d in &self.dims {
            inv.arg(d.name)
                .arg(d.capacity)
                .arg(d.limit)
                .arg(amounts(d.dimension));
        }
        inv
    }

    async fn reserve_call(
        self: &Arc<Self>,
        at: Instant,
        cost: Cost,
        max_wait_us: i64,
    ) -> Result<Booked, RedisLimiterError> {
        let args = ScriptArgs::reserve(max_wait_us, self.arrival_allowance_us);
        let inv = self.invocation(at, "reserve", None, args, |d| {
            i64::try_from(cost.on(d)).unwrap_or(i64::MAX)
        });
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.reserve_round_trips.fetch_add(1, Ordering::Relaxed);
        let reply: Vec<i64> = self.conn.invoke(&inv).await.inspect_err(|_| {
            self.failures.fetch_add(1, Ordering::Relaxed);
        })?;
        let u = |x: i64| u64::try_from(x).unwrap_or(0);
        match reply.as_slice() {
            [1, wait, now, factor] => {
                self.factor_micro.store(u(*factor), Ordering::Relaxed);
                Ok(Booked::Granted {
                    wait_us: u(*wait),
                    now_us: u(*now),
                })
            }
            [0, wait, _now, factor] => {
                self.factor_micro.store(u(*factor), Ordering::Relaxed);
                Ok(Booked::Later { wait_us: u(*wait) })
            }
            [-1, index, capacity] => Ok(Booked::TooLarge {
                index: usize::try_from(*index - 1).unwrap_or(0),
                capacity: u(*capacity),
            }),
            other => Err(RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: format!("{other:?}"),
            }),
        }
    }
}

#[async_trait::async_trait]
impl LimiterBackend for RedisLimiter {
    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    async fn reserve(&self, cost: Cost, priority: Priority) -> Result<Reservation> {
        self.reserve_booked(cost, priority).await.map(|(r, _)| r)
    }

    async fn try_reserve(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        if self.inner.dims.is_empty() {
            return Ok(Reservation::unlimited(cost));
        }
        match self.book(tollgate::clock::now(), cost, 0).await {
            Ok(Booked::Granted { .. }) => Ok(self.reservation(cost)),
            Ok(Booked::Later { wait_us }) => Err(TryReserveError::WouldWait {
                ready_in: Duration::from_micros(wait_us),
            }),
            Ok(Booked::TooLarge { index, capacity }) => Err(TryReserveError::TooLarge(
                self.too_large(&cost, index, capacity),
            )),
            // Fail closed: fallback chains read it as "this candidate cannot serve now".
            Err(e) => match &self.inner.fallback {
                Some(local) => local.try_reserve_with(cost, priority),
                None => Err(TryReserveError::Unavailable(self.unavailable(e))),
            },
        }
    }

    /// Applies `feedback` to the shared buckets in one script call on a task of its own
    /// (see `feedback.rs` for what each kind does), and to the local fallback if there is
    /// one.
    fn feedback(&self, feedback: Feedback) {
        if let Some(local) = &self.inner.fallback {
            local.feedback(feedback);
        }
        if self.inner.dims.is_empty() {
            return;
        }
        if let Some(call) = self.inner.feedback_call(feedback) {
            self.inner.spawn("feedback", Sent::Feedback(call));
        }
    }

    async fn snapshot(&self) -> Result<LimiterSnapshot> {
        if self.inner.dims.is_empty() {
            return Ok(LimiterSnapshot {
                levels: Vec::new(),
                queued: 0,
                queued_by_class: [0; 3],
                rate_factor: 1.0,
                grants: 0,
                waited: 0,
                held: 0,
            });
        }
        let inv = self.inner.invocation(
            tollgate::clock::now(),
            "snapshot",
            None,
            ScriptArgs::default(),
            |_| 0,
        );
        self.inner.round_trips.fetch_add(1, Ordering::Relaxed);
        let reply: Vec<redis::Value> = self
            .inner
            .conn
            .invoke(&inv)
            .await
            .map_err(|e| self.unavailable(e))?;
        let bad = || {
            self.unavailable(RedisLimiterError::Reply {
                url: self.inner.conn.shown_url.clone(),
                reply: format!("{reply:?}"),
            })
        };
        let float = |v: &redis::Value| -> Option<f64> {
            redis::from_redis_value_ref::<String>(v).ok()?.parse().ok()
        };
        let int = |v: &redis::Value| redis::from_redis_value_ref::<u64>(v).ok();
        let n = self.inner.dims.len();
        if reply.len() != 2 * n + 3 {
            return Err(bad());
        }
        let mut levels = Vec::with_capacity(n);
        for (i, d) in self.inner.dims.iter().enumerate() {
            // The capacity in force: the catalog's, or a provider's lower limit's.
            let capacity = int(&reply[n + 3 + i]).ok_or_else(bad)?;
            levels.push((d.dimension, float(&reply[i]).ok_or_else(bad)?, capacity));
        }
        Ok(LimiterSnapshot {
            levels,
            // Reserve-ahead keeps no queue: a waiter's booking is the negative level.
            queued: 0,
            queued_by_class: [0; 3],
            rate_factor: float(&reply[n]).ok_or_else(bad)?,
            grants: int(&reply[n + 1]).ok_or_else(bad)?,
            waited: int(&reply[n + 2]).ok_or_else(bad)?,
            // Reservations live in each process: Redis cannot count them.
            held: 0,
        })
    }
}

#[cfg(test)]
mod tests;
