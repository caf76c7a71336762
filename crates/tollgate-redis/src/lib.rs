//! A [`LimiterBackend`] on Redis: many processes sharing one provider quota.
//!
//! Each catalog model's buckets (requests, tokens, input and output tokens per minute),
//! its adaptive throttle factor and its provider pause live in one Redis hash,
//! `{prefix}:{model}:lim` (a hash tag, so one Redis Cluster slot). One Lua script call
//! (one round trip) reserves every dimension at once or none and answers "granted, start
//! after D" (*reserve-ahead*, as `golang.org/x/time/rate`'s `Reserve`): order across
//! processes is arrival order at Redis, a large call is never starved, and the waiter
//! sleeps exactly D holding a booked slot and nothing else (no connection, no permit).
//! Dropping a reservation before it is sent gives it back; settlement after the answer
//! is a second call. See `docs/distributed.md`.
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

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::{Notify, OnceCell};
use tokio::time::Instant;
use tollgate::limit::{
    BucketLedger, Burst, Cost, CostDelta, Feedback, LimiterBackend, LimiterConfig, LimiterFactory,
    LimiterSnapshot, MAX_PROVIDER_PAUSE, Priority, Reservation, TokenBucketRateLimiter,
    TryReserveError,
};
use tollgate::{Dimension, Error, Result};

mod script;

use script::SCRIPT;

/// How long a settle's id is remembered, so that a retried settle is applied once.
const SETTLE_ID_TTL_MS: u64 = 10 * 60 * 1000;
/// A throttle factor of 1, in millionths.
const FACTOR_ONE_MICRO: u64 = 1_000_000;
/// How often a settle or feedback call is tried before it is given up (logged).
const SETTLE_ATTEMPTS: u32 = 8;

mod config;

pub use config::{FailurePolicy, RedisClock, RedisConfig, RedisLimiterError};
use config::{key_for, shown};

/// The connection, shared by every model of one [`RedisLimiters`].
struct Conn {
    config: RedisConfig,
    /// The URL with any password removed, for errors.
    shown_url: String,
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
    async fn manager(&self) -> Result<ConnectionManager, RedisLimiterError> {
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

    fn redis_error(&self, source: redis::RedisError) -> RedisLimiterError {
        RedisLimiterError::Redis {
            url: self.shown_url.clone(),
            source,
        }
    }

    /// One script call, bounded by the call timeout on the server clock.
    async fn invoke<T: redis::FromRedisValue>(
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
    async fn instance(&self) -> Result<u64, RedisLimiterError> {
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
            conn: Arc::new(Conn {
                shown_url: shown(&config.url),
                config,
                manager: OnceCell::new(),
                instance: OnceCell::new(),
                next_op: AtomicU64::new(0),
            }),
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
    /// [`LimiterConfig::arrival_allowance`] in µs, for the script's reserve.
    arrival_allowance_us: u64,
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

/// Counts a script call in flight for [`RedisLimiter::flush`].
struct InFlight(Arc<Inner>);

impl InFlight {
    fn new(inner: &Arc<Inner>) -> Self {
        inner.pending.fetch_add(1, Ordering::SeqCst);
        InFlight(inner.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
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
                arrival_allowance_us: micros(config.arrival_allowance),
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
        let sent_at = tollgate::clock::now();
        match self.book(sent_at, cost, -1).await {
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
        max_wait_us: i64,
        extra: [String; 3],
        amounts: impl Fn(Dimension) -> i64,
    ) -> redis::ScriptInvocation<'static> {
        let mut inv = SCRIPT.prepare_invoke();
        inv.key(&self.key).key(second_key.unwrap_or(&self.key));
        inv.arg(op).arg(self.now_arg(at)).arg(max_wait_us);
        for x in extra {
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
        let extra = [
            String::new(),
            self.arrival_allowance_us.to_string(),
            String::new(),
        ];
        let inv = self.invocation(at, "reserve", None, max_wait_us, extra, |d| {
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

    /// A settle or feedback call, retried while Redis is unreachable (a settle carries
    /// an id, so a retry after a lost reply is not applied twice).
    async fn send_retried(self: Arc<Self>, what: &'static str, make: Sent) {
        let mut delay = Duration::from_millis(20);
        let mut settle_id: Option<String> = None;
        for attempt in 1..=SETTLE_ATTEMPTS {
            // A settle carries an id (its process's, from Redis, then a counter), so that
            // a retry after a lost answer is applied once.
            if matches!(make, Sent::Settle(_)) && settle_id.is_none() {
                match self.conn.instance().await {
                    Ok(instance) => {
                        settle_id = Some(format!(
                            "{}:op:{instance}:{}",
                            self.key.trim_end_matches(":lim"),
                            self.conn.next_op.fetch_add(1, Ordering::Relaxed)
                        ));
                    }
                    Err(e) => {
                        self.failures.fetch_add(1, Ordering::Relaxed);
                        if attempt == SETTLE_ATTEMPTS {
                            tracing::warn!(model = %self.model_id, error = %e, "tollgate-redis: {what} given up");
                            return;
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(2));
                        continue;
                    }
                }
            }
            let inv = match &make {
                Sent::Settle(delta) => self.invocation(
                    tollgate::clock::now(),
                    "settle",
                    settle_id.as_deref(),
                    -1,
                    [SETTLE_ID_TTL_MS.to_string(), String::new(), String::new()],
                    |d| delta.on(d),
                ),
                Sent::Feedback(kind, a, b) => self.invocation(
                    tollgate::clock::now(),
                    "feedback",
                    None,
                    -1,
                    [(*kind).to_owned(), a.to_string(), b.to_string()],
                    |_| 0,
                ),
            };
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            match self.conn.invoke::<Vec<i64>>(&inv).await {
                Ok(_) => return,
                Err(e) => {
                    self.failures.fetch_add(1, Ordering::Relaxed);
                    if attempt == SETTLE_ATTEMPTS {
                        tracing::warn!(model = %self.model_id, error = %e, "tollgate-redis: {what} given up");
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    fn spawn(self: &Arc<Self>, what: &'static str, sent: Sent) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(model = %self.model_id, "tollgate-redis: {what} outside a tokio runtime is lost");
            return;
        };
        let flight = InFlight::new(self);
        let inner = self.clone();
        runtime.spawn(async move {
            inner.send_retried(what, sent).await;
            drop(flight);
        });
    }
}

/// What a background call sends.
enum Sent {
    Settle(CostDelta),
    Feedback(&'static str, u64, u64),
}

/// Issues the Redis reservations' refunds and settlements.
struct Ledger(Arc<Inner>);

impl BucketLedger for Ledger {
    fn adjust(&self, delta: CostDelta) {
        if !delta.is_zero() {
            self.0.spawn("settle", Sent::Settle(delta));
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

    fn feedback(&self, feedback: Feedback) {
        let pause = |d: Duration| micros(d.min(MAX_PROVIDER_PAUSE));
        let mut sends: Vec<Sent> = Vec::new();
        let adaptive = self.inner.adaptive;
        match feedback {
            // A success only moves a factor below 1: at full rate (as of the last
            // reservation's answer) it would cost a round trip for nothing.
            Feedback::Success
                if adaptive
                    && self.inner.factor_micro.load(Ordering::Relaxed) < FACTOR_ONE_MICRO =>
            {
                sends.push(Sent::Feedback("ok", 0, 0));
            }
            Feedback::RateLimited { retry_after } => {
                if adaptive {
                    sends.push(Sent::Feedback("429", 0, 0));
                }
                if let Some(d) = retry_after {
                    sends.push(Sent::Feedback("pause", pause(d), 0));
                }
            }
            Feedback::Overloaded { retry_after } => {
                if adaptive {
                    sends.push(Sent::Feedback("529", 0, 0));
                }
                if let Some(d) = retry_after {
                    sends.push(Sent::Feedback("pause", pause(d), 0));
                }
            }
            Feedback::Exhausted { reset_in, .. } => {
                sends.push(Sent::Feedback("pause", pause(reset_in), 0));
            }
            Feedback::Remaining {
                dimension,
                remaining,
            } => {
                if let Some(i) = self
                    .inner
                    .dims
                    .iter()
                    .position(|d| d.dimension == dimension)
                {
                    sends.push(Sent::Feedback("remaining", i as u64 + 1, remaining));
                }
            }
            _ => {}
        }
        if let Some(local) = &self.inner.fallback {
            local.feedback(feedback);
        }
        if self.inner.dims.is_empty() {
            return;
        }
        for sent in sends {
            self.inner.spawn("feedback", sent);
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
            -1,
            Default::default(),
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
        if reply.len() != n + 3 {
            return Err(bad());
        }
        let mut levels = Vec::with_capacity(n);
        for (d, v) in self.inner.dims.iter().zip(&reply) {
            levels.push((d.dimension, float(v).ok_or_else(bad)?, d.capacity));
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
