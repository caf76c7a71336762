//! [`TokenBucketRateLimiter`]: reserve before send, wait holding nothing, wake exactly
//! when enough has refilled.
//!
//! All state lives behind one mutex and changes in one place ([`State::grant_ready`]
//! grants; the other methods only refill, take or give back). Waiters queue in a
//! [`WaitQueue`]: one FIFO queue per [`Priority`] class. One *driver* task per limiter
//! sleeps until the instant the head waiter's cost will have refilled, grants it (and
//! whoever goes next, while they fit), and sleeps again; waiters are woken only when
//! granted, so a grant costs exactly one wake-up. The driver exists only while someone
//! waits.
//!
//! **Order.** The *head* (the waiter that goes first) is:
//! 1. among waiters that have waited at least [`LimiterConfig::aging`] (*promoted*), the
//!    one that arrived first (on a tie, the higher class);
//! 2. if none is promoted, the first arrival of the highest class that has waiters.
//!
//! So a higher class goes first, a class is FIFO, and aging makes a promoted waiter rank
//! above every class: a saturating stream of interactive calls delays a batch call by at
//! most about `aging`, never forever. With `aging` zero every waiter is promoted at once
//! and the order is plain arrival order (FIFO across classes).
//!
//! Fairness has a price, as with tokio's batch semaphore: a large request at the head of
//! the queue holds back the waiters after it that would fit now. That is what makes a
//! large request never starve. `try_reserve_with(cost, class)` and a ready
//! `reserve_with` never jump a waiter that would go before them (one of their own or a
//! higher class, or a promoted one), but may go ahead of lower-class waiters if the cost
//! fits now: that is what a class is for.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::clock;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::bucket::{Bucket, units};
use super::cost::{AccountingRule, Cost, CostDelta};
use super::priority::Priority;
use super::throttle::{AdaptiveThrottle, Feedback, SendMark};
use crate::catalog::Dimension;
use crate::catalog::{Limits, ModelEntry, RateWindow};
use crate::error::{Error, Result};
use crate::usage::Usage;

const DIMENSIONS: [Dimension; 4] = [
    Dimension::Requests,
    Dimension::Tokens,
    Dimension::InputTokens,
    Dimension::OutputTokens,
];

/// The longest pause a provider's `retry-after` can impose on a whole model.
pub const MAX_PROVIDER_PAUSE: Duration = Duration::from_secs(60);

/// How large a bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Burst {
    /// A full minute's limit (the default): `rpm = 60` allows 60 at once.
    #[default]
    FullMinute,
    /// `n` seconds of refill, at least one whole unit: for providers that enforce
    /// `60 rpm` as one request per second, use `Burst::Seconds(1)`.
    Seconds(u32),
}

impl Burst {
    fn capacity(self, limit: u64) -> u64 {
        match self {
            Burst::FullMinute => limit,
            Burst::Seconds(s) => (u128::from(limit) * u128::from(s.min(60)) / 60)
                .max(1)
                .try_into()
                .unwrap_or(u64::MAX),
        }
    }
}

/// A limiter's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterConfig {
    /// The model id, for errors.
    pub model_id: String,
    /// Per-minute limits (0 = unlimited).
    pub limits: Limits,
    /// Bucket size.
    pub burst: Burst,
    /// Whether 429s and 529s slow the refill ([`super::throttle`]).
    pub adaptive: bool,
    /// Aging: a waiter that has waited this long ranks above every [`Priority`] class
    /// (promoted waiters go in arrival order), so no class starves. Default
    /// [`LimiterConfig::DEFAULT_AGING`] (30 s); zero makes the queue plain FIFO across classes;
    /// [`Duration::MAX`] turns aging off.
    pub aging: Duration,
    /// How the provider refills: decides how long a rate-limit header saying nothing is
    /// left holds the model back ([`Feedback::Reported`]).
    pub window: RateWindow,
}

impl LimiterConfig {
    /// How long a waiter waits before it is promoted above every class (the default of
    /// [`LimiterConfig::aging`]).
    pub const DEFAULT_AGING: Duration = Duration::from_secs(30);

    /// Limits for `model_id` with a full-minute burst and the adaptive throttle on.
    pub fn new(model_id: impl Into<String>, limits: Limits) -> Self {
        LimiterConfig {
            model_id: model_id.into(),
            limits,
            burst: Burst::FullMinute,
            adaptive: true,
            aging: Self::DEFAULT_AGING,
            window: RateWindow::Continuous,
        }
    }

    /// The configuration a catalog entry describes.
    pub fn for_model(model: &ModelEntry) -> Self {
        let burst = model.burst_seconds.map_or(Burst::FullMinute, |s| {
            Burst::Seconds(u32::try_from(s).unwrap_or(60))
        });
        LimiterConfig {
            burst,
            window: model.window,
            ..Self::new(model.id.clone(), model.limits)
        }
    }

    /// Sets the burst.
    pub fn with_burst(mut self, burst: Burst) -> Self {
        self.burst = burst;
        self
    }

    /// Switches the adaptive throttle on or off.
    pub fn with_adaptive(mut self, adaptive: bool) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Sets the aging bound ([`LimiterConfig::aging`]).
    pub fn with_aging(mut self, aging: Duration) -> Self {
        self.aging = aging;
        self
    }

    /// Sets how the provider refills its limits.
    pub fn with_window(mut self, window: RateWindow) -> Self {
        self.window = window;
        self
    }
}

/// Why [`TokenBucketRateLimiter::try_reserve`] (or `try_reserve_with`) did not reserve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TryReserveError {
    /// The cost is larger than a whole bucket: it can never be reserved.
    #[error(transparent)]
    TooLarge(Error),
    /// Not now; the earliest time it could be, if nothing else changes.
    #[error("the bucket cannot serve this cost now; earliest in {ready_in:?}")]
    WouldWait {
        /// How long until it could fit, counting the waiters that would go before it.
        ready_in: Duration,
    },
}

impl From<TryReserveError> for Error {
    fn from(e: TryReserveError) -> Self {
        match e {
            TryReserveError::TooLarge(e) => e,
            TryReserveError::WouldWait { ready_in } => {
                Error::Provider(crate::ProviderError::RateLimited {
                    retry_after: Some(ready_in),
                })
            }
        }
    }
}

/// Gives capacity back to (or takes more from) whatever issued a [`Reservation`]. The
/// seam that lets a shared backend (e.g. Redis) issue reservations too.
pub trait BucketLedger: Send + Sync {
    /// Applies a correction: negative amounts give capacity back, positive take more.
    fn adjust(&self, delta: CostDelta);

    /// Gives all of `cost` back (a reservation dropped before its request was sent).
    /// The default adjusts by [`CostDelta::refund`]; a ledger may do it faster.
    fn refund(&self, cost: &Cost) {
        self.adjust(CostDelta::refund(cost));
    }
}

/// Capacity held for one call.
///
/// - dropped before [`Reservation::mark_sent`]: everything is given back;
/// - [`Reservation::settle`] after the answer: reconciled with what the provider counts;
/// - dropped after sending without settling: the charge stays (the provider counted it).
#[must_use = "a reservation gives its capacity back when dropped"]
pub struct Reservation {
    ledger: Option<Arc<dyn BucketLedger>>,
    cost: Cost,
    sent: bool,
}

impl Reservation {
    /// A reservation issued by `ledger` for `cost`.
    pub fn new(ledger: Arc<dyn BucketLedger>, cost: Cost) -> Self {
        Reservation {
            ledger: Some(ledger),
            cost,
            sent: false,
        }
    }

    /// A reservation that holds nothing (an unlimited model).
    pub fn unlimited(cost: Cost) -> Self {
        Reservation {
            ledger: None,
            cost,
            sent: false,
        }
    }

    /// What was reserved.
    pub fn cost(&self) -> Cost {
        self.cost
    }

    /// Records that the request left: from now on, dropping keeps the charge.
    pub fn mark_sent(&mut self) {
        self.sent = true;
    }

    /// Whether [`Reservation::mark_sent`] was called.
    pub fn is_sent(&self) -> bool {
        self.sent
    }

    /// Reconciles the reservation with what the provider counts for `usage`.
    pub fn settle(mut self, usage: &Usage, rule: AccountingRule) {
        if let Some(ledger) = self.ledger.take() {
            let delta = rule.delta(&self.cost, usage);
            if !delta.is_zero() {
                ledger.adjust(delta);
            }
        }
    }

    /// Settles at exactly `counted` (e.g. a rejected request: its request counts, its
    /// tokens do not).
    pub fn settle_counted(mut self, counted: Cost) {
        if let Some(ledger) = self.ledger.take() {
            let delta = CostDelta::between(&counted, &self.cost);
            if !delta.is_zero() {
                ledger.adjust(delta);
            }
        }
    }

    /// Changes what the reservation holds to `cost`, taking the difference from (or
    /// giving it back to) the buckets at once. A grant made ahead of the call (an
    /// [`super::Admission`], a fallback pick) becomes the call's own this way; taking
    /// more than is left runs the bucket into debt, paid back by later refill.
    pub fn resize(&mut self, cost: Cost) {
        if let Some(ledger) = &self.ledger {
            let delta = CostDelta::between(&cost, &self.cost);
            if !delta.is_zero() {
                ledger.adjust(delta);
            }
        }
        self.cost = cost;
    }

    /// Gives everything back now (the request was not sent).
    pub fn release(mut self) {
        if let Some(ledger) = self.ledger.take() {
            ledger.refund(&self.cost);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(ledger) = self.ledger.take()
            && !self.sent
        {
            ledger.refund(&self.cost);
        }
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("cost", &self.cost)
            .field("sent", &self.sent)
            .field("limited", &self.ledger.is_some())
            .finish()
    }
}

/// A point-in-time view of a limiter, for tests, benchmarks and dashboards.
#[derive(Debug, Clone, PartialEq)]
pub struct LimiterSnapshot {
    /// Level and capacity in tokens per limited dimension.
    pub levels: Vec<(Dimension, f64, u64)>,
    /// Waiters queued.
    pub queued: usize,
    /// Waiters queued per [`Priority`] class, lowest first (indexed by
    /// [`Priority::index`]).
    pub queued_by_class: [usize; 3],
    /// The adaptive throttle's factor (1 = full rate).
    pub rate_factor: f64,
    /// Reservations granted so far.
    pub grants: u64,
    /// Of those, how many had to wait.
    pub waited: u64,
}

/// A token-bucket limiter for one model: requests, tokens, input tokens and output tokens
/// per minute, reserved together or not at all. Cheap to clone; clones share the buckets.
#[derive(Clone)]
pub struct TokenBucketRateLimiter {
    shared: Arc<Shared>,
}

struct Shared {
    model_id: String,
    epoch: Instant,
    state: Mutex<State>,
    /// Tells the driver that the head's deadline may have moved.
    notify: Notify,
}

struct Slot {
    cost: Cost,
    granted: bool,
    waker: Option<Waker>,
}

/// The waiters, one FIFO queue per [`Priority`] class, each entry with its arrival time
/// (ns since the limiter's epoch). Its methods are the only way the order changes; they
/// implement the order described in the module docs.
#[derive(Debug)]
struct WaitQueue {
    /// Per class, lowest first: (waiter id, arrival ns), in arrival order.
    classes: [VecDeque<(u64, u64)>; 3],
    len: usize,
    aging_ns: u64,
}

impl WaitQueue {
    fn new(aging: Duration) -> Self {
        WaitQueue {
            classes: Default::default(),
            len: 0,
            aging_ns: u64::try_from(aging.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waiters per class, lowest first.
    fn counts(&self) -> [usize; 3] {
        self.classes.each_ref().map(VecDeque::len)
    }

    /// Adds waiter `id` of class `priority`, arrived at `now`, at the back of its class.
    fn push(&mut self, id: u64, priority: Priority, now: u64) {
        self.classes[priority.index()].push_back((id, now));
        self.len += 1;
    }

    /// Removes waiter `id` of class `priority`; false if it was not queued.
    fn remove(&mut self, id: u64, priority: Priority) -> bool {
        let class = &mut self.classes[priority.index()];
        let Some(i) = class.iter().position(|(x, _)| *x == id) else {
            return false;
        };
        class.remove(i);
        self.len -= 1;
        true
    }

    /// Whether a waiter that arrived at `arrived` is promoted at `now`.
    fn promoted(&self, arrived: u64, now: u64) -> bool {
        now.saturating_sub(arrived) >= self.aging_ns
    }

    /// The class whose first waiter goes first at `now` (see the module docs).
    fn head_class(&self, now: u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        // Each class's first waiter is its oldest: the oldest promoted waiter is one of
        // them. Highest class first, so that a tie goes to the higher class.
        let mut oldest: Option<(usize, u64)> = None;
        for (c, class) in self.classes.iter().enumerate().rev() {
            if let Some(&(_, arrived)) = class.front()
                && self.promoted(arrived, now)
                && oldest.is_none_or(|(_, at)| arrived < at)
            {
                oldest = Some((c, arrived));
            }
        }
        if let Some((c, _)) = oldest {
            return Some(c);
        }
        self.classes.iter().rposition(|class| !class.is_empty())
    }

    /// The waiter that goes first at `now`.
    fn front(&self, now: u64) -> Option<u64> {
        let c = self.head_class(now)?;
        self.classes[c].front().map(|(id, _)| *id)
    }

    /// Removes and returns the waiter that goes first at `now`.
    fn pop_front(&mut self, now: u64) -> Option<u64> {
        let c = self.head_class(now)?;
        let (id, _) = self.classes[c].pop_front()?;
        self.len -= 1;
        Some(id)
    }

    /// Whether a newcomer of class `priority` arriving at `now` would have to let
    /// someone go first: a waiter of its own or a higher class, or a promoted one.
    fn blocks(&self, priority: Priority, now: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let p = priority.index();
        self.classes[p..].iter().any(|c| !c.is_empty())
            || self.classes[..p]
                .iter()
                .any(|c| c.front().is_some_and(|(_, at)| self.promoted(*at, now)))
    }

    /// The waiters that would go before a newcomer of class `priority` arriving at `now`
    /// (those [`WaitQueue::blocks`] counts), if nothing else changed.
    fn ahead_of(&self, priority: Priority, now: u64) -> impl Iterator<Item = u64> + '_ {
        let p = priority.index();
        let higher = self.classes[p..].iter().flatten();
        // Within a class the promoted waiters are the oldest: a prefix.
        let promoted = self.classes[..p]
            .iter()
            .flat_map(move |c| c.iter().take_while(move |(_, at)| self.promoted(*at, now)));
        higher.chain(promoted).map(|(id, _)| *id)
    }

    /// When the head may change by time alone: the first instant a lower class's first
    /// waiter is promoted while the head is not. `None` if no such instant comes.
    fn next_promotion(&self, now: u64) -> Option<u64> {
        let c = self.head_class(now)?;
        let &(_, head_arrived) = self.classes[c].front()?;
        if self.promoted(head_arrived, now) {
            // The oldest promoted waiter keeps the lead: anyone promoted later is younger.
            return None;
        }
        self.classes[..c]
            .iter()
            .filter_map(|class| class.front())
            .map(|(_, at)| at.saturating_add(self.aging_ns))
            .min()
    }
}

struct State {
    buckets: [Option<Bucket>; 4],
    queue: WaitQueue,
    slots: HashMap<u64, Slot>,
    next_id: u64,
    driver_running: bool,
    paused_until_ns: u64,
    throttle: AdaptiveThrottle,
    grants: u64,
    waited: u64,
    /// The catalog's limit per dimension (0 = unlimited): a provider's `*-limit` header
    /// may lower a bucket's limit below it, never raise it above.
    catalog_limits: [u64; 4],
    /// `grants` at the last 429: what a fixed window allowed is what was sent since.
    grants_at_429: u64,
    burst: Burst,
    window: RateWindow,
}

impl fmt::Debug for TokenBucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucketRateLimiter")
            .field("model_id", &self.shared.model_id)
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

impl TokenBucketRateLimiter {
    /// A limiter with full buckets.
    pub fn new(config: LimiterConfig) -> Self {
        let epoch = clock::now();
        let l = config.limits;
        let bucket = |limit: u64| {
            (limit > 0).then(|| {
                let mut bucket = Bucket::new(limit, config.burst.capacity(limit), 0);
                if config.window == RateWindow::Fixed {
                    bucket.set_fixed_window();
                }
                bucket
            })
        };
        let state = State {
            buckets: [
                bucket(l.rpm),
                bucket(l.tpm),
                bucket(l.input_tpm),
                bucket(l.output_tpm),
            ],
            queue: WaitQueue::new(config.aging),
            slots: HashMap::new(),
            next_id: 0,
            driver_running: false,
            paused_until_ns: 0,
            throttle: AdaptiveThrottle::new(config.adaptive),
            grants: 0,
            waited: 0,
            catalog_limits: [l.rpm, l.tpm, l.input_tpm, l.output_tpm],
            grants_at_429: 0,
            burst: config.burst,
            window: config.window,
        };
        TokenBucketRateLimiter {
            shared: Arc::new(Shared {
                model_id: config.model_id,
                epoch,
                state: Mutex::new(state),
                notify: Notify::new(),
            }),
        }
    }

    /// The limiter a catalog entry describes.
    pub fn for_model(model: &ModelEntry) -> Self {
        Self::new(LimiterConfig::for_model(model))
    }

    /// Reserves `cost` on every dimension now, or fails without waiting. Does not jump
    /// the queue: while anyone waits, it fails with [`TryReserveError::WouldWait`]. The
    /// [`Priority::Default`] form of [`TokenBucketRateLimiter::try_reserve_with`].
    pub fn try_reserve(&self, cost: Cost) -> Result<Reservation, TryReserveError> {
        self.try_reserve_with(cost, Priority::Default)
    }

    /// Reserves `cost` at class `priority` now, or fails without waiting. It never
    /// jumps a waiter that would go before it (one of its own or a higher class, or a
    /// promoted one); while only lower classes wait, it goes if the cost fits now.
    /// [`TryReserveError::WouldWait`] estimates the wait from the waiters that would go
    /// before it.
    pub fn try_reserve_with(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        let shared = &self.shared;
        // Read before locking: a time earlier than another holder's only refills less.
        let now = shared.now_ns();
        let mut state = shared.lock();
        if state.take_if_ready(&cost, priority, now) {
            drop(state);
            return Ok(Reservation::new(shared.clone(), cost));
        }
        state
            .check_size(&shared.model_id, &cost)
            .map_err(TryReserveError::TooLarge)?;
        Err(TryReserveError::WouldWait {
            ready_in: Duration::from_nanos(state.queued_wait_ns(&cost, priority, now)),
        })
    }

    /// Reserves `cost` on every dimension, waiting (holding nothing) until it fits. Fails
    /// at once with [`Error::TooLargeForBucket`] if it never can. The
    /// [`Priority::Default`] form of [`TokenBucketRateLimiter::reserve_with`].
    ///
    /// Cancellation-safe: dropping the future leaves the queue, and if it had already
    /// been granted, gives the capacity back.
    pub fn reserve(&self, cost: Cost) -> Reserve {
        self.reserve_with(cost, Priority::Default)
    }

    /// Reserves `cost` at class `priority`, waiting (holding nothing) in the order the
    /// module docs define: higher classes first, FIFO within a class, promoted (aged)
    /// waiters before every class. Takes the fast path, as
    /// [`TokenBucketRateLimiter::try_reserve_with`] would, if it fits now. Fails at once
    /// with [`Error::TooLargeForBucket`] if it never can.
    ///
    /// Cancellation-safe: dropping the future leaves the queue, and if it had already
    /// been granted, gives the capacity back.
    pub fn reserve_with(&self, cost: Cost, priority: Priority) -> Reserve {
        Reserve {
            shared: Some(self.shared.clone()),
            cost,
            priority,
            id: None,
        }
    }

    /// Tells the limiter what a provider's answer said (success, 429, 529, remaining).
    pub fn feedback(&self, feedback: Feedback) {
        let shared = &self.shared;
        let wakers = {
            let mut state = shared.lock();
            let now = shared.now_ns();
            if let Some(factor) = state.throttle.on_feedback(feedback, now) {
                for bucket in state.buckets.iter_mut().flatten() {
                    bucket.set_factor(factor, now);
                }
            }
            match feedback {
                Feedback::RateLimited { retry_after } => {
                    state.on_rate_limited(retry_after, now);
                    if let Some(pause) = retry_after {
                        state.pause_for(pause, now);
                    }
                }
                Feedback::RateLimitedAgain {
                    retry_after: Some(pause),
                }
                | Feedback::Overloaded {
                    retry_after: Some(pause),
                } => state.pause_for(pause, now),
                Feedback::Remaining {
                    dimension,
                    remaining,
                } => state.on_report(dimension, None, Some(remaining), None, None, now),
                Feedback::Exhausted {
                    dimension,
                    reset_in,
                } => state.on_report(dimension, None, Some(0), Some(reset_in), None, now),
                Feedback::Reported {
                    dimension,
                    limit,
                    remaining,
                    reset_in,
                    since,
                } => {
                    // What was granted after the request (in flight), and how long ago it
                    // was sent: `remaining` is as of then.
                    let since = since.map(|mark| {
                        let sent = u64::try_from(
                            mark.at.saturating_duration_since(shared.epoch).as_nanos(),
                        )
                        .unwrap_or(u64::MAX);
                        (state.grants.saturating_sub(mark.grants), sent)
                    });
                    state.on_report(dimension, limit, remaining, reset_in, since, now);
                }
                _ => {}
            }
            state.grant_ready(now)
        };
        shared.notify.notify_one();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Marks a request as sent now: take it right after its reservation is granted, and
    /// hand it back with the answer's rate-limit headers ([`Feedback::Reported`]).
    pub fn send_mark(&self) -> SendMark {
        let grants = self.shared.lock().grants;
        SendMark {
            at: clock::now(),
            grants,
        }
    }

    /// A point-in-time view.
    pub fn snapshot(&self) -> LimiterSnapshot {
        let mut state = self.shared.lock();
        let now = self.shared.now_ns();
        state.refill(now);
        LimiterSnapshot {
            levels: DIMENSIONS
                .iter()
                .zip(&state.buckets)
                .filter_map(|(d, b)| {
                    b.as_ref()
                        .map(|b| (*d, b.level_tokens(), b.capacity_tokens()))
                })
                .collect(),
            queued: state.queue.len(),
            queued_by_class: state.queue.counts(),
            rate_factor: state.throttle.factor(),
            grants: state.grants,
            waited: state.waited,
        }
    }

    /// The model id.
    pub fn model_id(&self) -> &str {
        &self.shared.model_id
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(
            clock::now()
                .saturating_duration_since(self.epoch)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX)
    }

    fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// Grants whoever fits now, wakes them, and tells the driver to look again.
    fn kick(&self, mut state: MutexGuard<'_, State>) {
        if state.queue.is_empty() {
            return; // nobody waits, and no driver needs a new deadline
        }
        let now = self.now_ns();
        let wakers = state.grant_ready(now);
        drop(state);
        self.notify.notify_one();
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl BucketLedger for Shared {
    fn refund(&self, cost: &Cost) {
        // A credit needs no clock (see `adjust`); the head waiter may go now.
        let mut state = self.lock();
        state.take_back(cost);
        self.kick(state);
    }

    fn adjust(&self, delta: CostDelta) {
        let mut state = self.lock();
        // A debit must see the level as of now: taken from a stale level, the time the
        // bucket spent full would later count as refill. A credit needs no clock: adding
        // back and a capped refill commute.
        if DIMENSIONS.iter().any(|d| delta.on(*d) > 0) {
            let now = self.now_ns();
            state.refill(now);
        }
        for (d, bucket) in DIMENSIONS.iter().zip(state.buckets.iter_mut()) {
            if let Some(bucket) = bucket {
                // A positive delta takes more capacity; a negative one gives it back.
                let amount = delta.on(*d);
                if amount != 0 {
                    bucket.add_tokens(-amount);
                }
            }
        }
        // Capacity given back may let the head waiter go now.
        if DIMENSIONS.iter().any(|d| delta.on(*d) < 0) {
            self.kick(state);
        }
    }
}

impl State {
    /// Holds every grant back for `pause` from `now` (capped at [`MAX_PROVIDER_PAUSE`]);
    /// an earlier pause that lasts longer stays.
    fn pause_for(&mut self, pause: Duration, now: u64) {
        let pause = u64::try_from(pause.min(MAX_PROVIDER_PAUSE).as_nanos()).unwrap_or(u64::MAX);
        self.paused_until_ns = self.paused_until_ns.max(now.saturating_add(pause));
    }

    /// A 429 (the first of its call): the provider has nothing left now, and neither have
    /// we on requests, the dimension every call spends (tokens are left alone: emptying
    /// them would stall a large call for long on a 429 that may be about requests).
    ///
    /// A fixed window refuses until it turns, `retry_after` from now: the requests sent
    /// since the previous 429 (this one aside) are what a window allows, and become the
    /// bucket's limit if lower; the bucket then holds until the turn and is full at every
    /// turn after it.
    fn on_rate_limited(&mut self, retry_after: Option<Duration>, now: u64) {
        let sent = self.grants.saturating_sub(self.grants_at_429);
        self.grants_at_429 = self.grants;
        let (catalog, burst, factor) = (
            self.catalog_limits[0],
            self.burst,
            self.throttle.factor_milli(),
        );
        let Some(bucket) = self.buckets[0].as_mut() else {
            return;
        };
        match retry_after {
            Some(wait) if bucket.is_fixed_window() && !wait.is_zero() => {
                let allowed = sent.saturating_sub(1);
                let window = u128::from(bucket.capacity_tokens()).saturating_mul(60_000_000_000)
                    / u128::from(bucket.limit().max(1));
                let per_minute = u64::try_from(
                    u128::from(allowed).saturating_mul(60_000_000_000) / window.max(1),
                )
                .unwrap_or(u64::MAX);
                if allowed > 0 && per_minute < bucket.limit() {
                    let limit = per_minute.min(catalog).max(1);
                    bucket.set_limit(limit, burst.capacity(limit), factor, now);
                }
                let wait =
                    u64::try_from(wait.min(MAX_PROVIDER_PAUSE).as_nanos()).unwrap_or(u64::MAX);
                bucket.hold_until_turn(0, 0, now.saturating_add(wait), now);
            }
            _ => bucket.lower_to(0, now),
        }
    }

    /// A provider's rate-limit headers for one dimension, read as it means them (see
    /// [`Feedback::Reported`]). `since`: grants made after the answer's request, and when
    /// it was sent (ns).
    fn on_report(
        &mut self,
        dimension: Dimension,
        limit: Option<u64>,
        remaining: Option<u64>,
        reset_in: Option<Duration>,
        since: Option<(u64, u64)>,
        now: u64,
    ) {
        let Some(i) = DIMENSIONS.iter().position(|x| *x == dimension) else {
            return;
        };
        let (catalog, burst, factor) = (
            self.catalog_limits[i],
            self.burst,
            self.throttle.factor_milli(),
        );
        let Some(bucket) = self.buckets[i].as_mut() else {
            return; // unlimited in the catalog: nothing to pace
        };
        // The provider's limit caps ours; the catalog's is never exceeded.
        let effective = limit.filter(|l| *l > 0).map_or(catalog, |l| l.min(catalog));
        if effective != bucket.limit() {
            bucket.set_limit(effective, burst.capacity(effective), factor, now);
        }
        // A fixed window that says when it turns: what is left is all there is until
        // then (nothing refills), and at the turn the bucket is full again.
        if let (RateWindow::Fixed, Some(remaining), Some(reset)) =
            (self.window, remaining, reset_in)
        {
            let in_flight = match since {
                Some((granted_after, _)) if dimension == Dimension::Requests => granted_after,
                _ => 0,
            };
            let reset = u64::try_from(reset.min(MAX_PROVIDER_PAUSE).as_nanos()).unwrap_or(u64::MAX);
            bucket.hold_until_turn(remaining, in_flight, now.saturating_add(reset), now);
            return;
        }
        if let Some(remaining) = remaining {
            match since {
                // `remaining` was left when the provider admitted the request. Since
                // then, it has refilled (at most what ours has) and the requests granted
                // after it have been taken from it too.
                Some((granted_after, sent_ns)) => {
                    let in_flight = if dimension == Dimension::Requests {
                        granted_after
                    } else {
                        0 // token counts of the calls since are not kept
                    };
                    bucket.lower_as_of(remaining, in_flight, sent_ns, now);
                }
                None => bucket.lower_to(remaining, now),
            }
        }
        // Nothing left (a continuous bucket): the reset is when the provider's bucket is
        // *full*; the next request may go after one unit has refilled at the provider's
        // rate, `reset / limit`. With a `limit` header our bucket refills at most that
        // fast (capped to it), without one at the catalog's rate: the level of zero
        // already waits for it, and no pause is needed.
    }

    fn check_size(&self, model_id: &str, cost: &Cost) -> Result<()> {
        for (d, bucket) in DIMENSIONS.iter().zip(&self.buckets) {
            if let Some(bucket) = bucket
                && bucket.too_large(cost.on(*d))
            {
                return Err(Error::TooLargeForBucket {
                    model_id: model_id.to_owned(),
                    dimension: *d,
                    needed: cost.on(*d),
                    capacity: bucket.capacity_tokens(),
                });
            }
        }
        Ok(())
    }

    fn refill(&mut self, now: u64) {
        for bucket in self.buckets.iter_mut().flatten() {
            bucket.refill(now);
        }
    }

    /// The fast path: refills to `now`, and if nobody waits who would go before a
    /// newcomer of class `priority`, no pause holds and `cost` fits every bucket, takes it
    /// and counts the grant. A cost that fits is never too large for a bucket, so the
    /// size check is left to the slow path.
    fn take_if_ready(&mut self, cost: &Cost, priority: Priority, now: u64) -> bool {
        let units = DIMENSIONS.map(|d| units(cost.on(d)));
        let mut fits = !self.queue.blocks(priority, now) && now >= self.paused_until_ns;
        for (bucket, units) in self.buckets.iter_mut().zip(units) {
            if let Some(bucket) = bucket {
                bucket.refill(now);
                fits &= bucket.fits_units(units);
            }
        }
        if fits {
            for (bucket, units) in self.buckets.iter_mut().zip(units) {
                if let Some(bucket) = bucket {
                    bucket.take_units(units);
                }
            }
            self.grants += 1;
        }
        fits
    }

    fn fits(&self, cost: &Cost, now: u64) -> bool {
        now >= self.paused_until_ns
            && DIMENSIONS
                .iter()
                .zip(&self.buckets)
                .all(|(d, b)| b.as_ref().is_none_or(|b| b.fits(cost.on(*d))))
    }

    fn take(&mut self, cost: &Cost) {
        for (d, bucket) in DIMENSIONS.iter().zip(self.buckets.iter_mut()) {
            if let Some(bucket) = bucket {
                bucket.add_tokens(-i64::try_from(cost.on(*d)).unwrap_or(i64::MAX));
            }
        }
    }

    /// Nanoseconds until `cost` fits (0 if now), from the buckets as they are.
    fn wait_ns(&self, cost: &Cost, now: u64) -> u64 {
        let refill = DIMENSIONS
            .iter()
            .zip(&self.buckets)
            .filter_map(|(d, b)| b.as_ref().map(|b| b.wait_ns(cost.on(*d))))
            .max()
            .unwrap_or(0);
        refill.max(self.paused_until_ns.saturating_sub(now))
    }

    /// An estimate of when `cost` could go if it joined the queue at class `priority`
    /// now: after the waiters that would go before it.
    fn queued_wait_ns(&self, cost: &Cost, priority: Priority, now: u64) -> u64 {
        let mut total = *cost;
        for id in self.queue.ahead_of(priority, now) {
            if let Some(slot) = self.slots.get(&id) {
                total.requests += slot.cost.requests;
                total.input_tokens += slot.cost.input_tokens;
                total.output_tokens += slot.cost.output_tokens;
            }
        }
        self.wait_ns(&total, now)
    }

    /// The one place that grants: pops the head waiter while it fits, in the queue's
    /// order, and returns their wakers (to be woken after the lock is released).
    fn grant_ready(&mut self, now: u64) -> Vec<Waker> {
        let mut wakers = Vec::new();
        if self.queue.is_empty() {
            return wakers;
        }
        self.refill(now);
        while let Some(id) = self.queue.front(now) {
            let Some(cost) = self.slots.get(&id).map(|s| s.cost) else {
                self.queue.pop_front(now);
                continue;
            };
            if !self.fits(&cost, now) {
                break;
            }
            self.take(&cost);
            self.queue.pop_front(now);
            self.grants += 1;
            self.waited += 1;
            if let Some(slot) = self.slots.get_mut(&id) {
                slot.granted = true;
                wakers.extend(slot.waker.take());
            }
        }
        wakers
    }

    /// When the driver must look again: when the head waiter will fit, or earlier if
    /// aging changes the head before then; `None` if nobody waits.
    fn head_deadline(&self, now: u64) -> Option<u64> {
        let id = self.queue.front(now)?;
        let cost = self.slots.get(&id)?.cost;
        let fits_at = now.saturating_add(self.wait_ns(&cost, now).max(1));
        Some(
            self.queue
                .next_promotion(now)
                .map_or(fits_at, |p| p.min(fits_at)),
        )
    }
}

/// The driver: sleeps until the head waiter fits, grants, repeats; exits when nobody waits.
async fn drive(weak: Weak<Shared>) {
    loop {
        let Some(shared) = weak.upgrade() else { return };
        let (wakers, deadline) = {
            let mut state = shared.lock();
            let now = shared.now_ns();
            let wakers = state.grant_ready(now);
            let deadline = state.head_deadline(now);
            if deadline.is_none() {
                state.driver_running = false;
            }
            (wakers, deadline)
        };
        wakers.into_iter().for_each(Waker::wake);
        let Some(deadline) = deadline else { return };
        let at = shared.instant_at(deadline);
        let notified = shared.notify.notified();
        tokio::select! {
            () = tokio::time::sleep_until(at) => {}
            () = notified => {}
        }
    }
}

/// The future of [`TokenBucketRateLimiter::reserve`]. Holds nothing until granted.
#[must_use = "a reservation is only made when the future is awaited"]
pub struct Reserve {
    /// The limiter; `None` once the future has finished (handed on to the
    /// [`Reservation`] when granted).
    shared: Option<Arc<Shared>>,
    cost: Cost,
    priority: Priority,
    id: Option<u64>,
}

impl fmt::Debug for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reserve")
            .field("cost", &self.cost)
            .field("priority", &self.priority)
            .field("queued", &self.id.is_some())
            .finish()
    }
}

impl Reserve {
    /// Ends the future with a reservation that takes over its handle on the limiter.
    fn granted(&mut self) -> Poll<Result<Reservation>> {
        Poll::Ready(
            self.shared
                .take()
                .map(|shared| Reservation::new(shared, self.cost))
                .ok_or(Error::Cancelled),
        )
    }

    /// Ends the future with `error`.
    fn failed(&mut self, error: Error) -> Poll<Result<Reservation>> {
        self.shared = None;
        Poll::Ready(Err(error))
    }
}

impl Future for Reserve {
    type Output = Result<Reservation>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(shared) = this.shared.as_ref() else {
            return Poll::Ready(Err(Error::Cancelled));
        };
        let mut state = shared.lock();
        let Some(id) = this.id else {
            // First poll: the fast path, or join the queue.
            let now = shared.now_ns();
            if state.take_if_ready(&this.cost, this.priority, now) {
                drop(state);
                return this.granted();
            }
            if let Err(e) = state.check_size(&shared.model_id, &this.cost) {
                drop(state);
                return this.failed(e);
            }
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                drop(state);
                return this.failed(Error::InvalidRequest {
                    field: "runtime".into(),
                    reason:
                        "TokenBucketRateLimiter::reserve must be awaited inside a tokio runtime"
                            .into(),
                });
            };
            let id = state.next_id;
            state.next_id += 1;
            state.slots.insert(
                id,
                Slot {
                    cost: this.cost,
                    granted: false,
                    waker: Some(cx.waker().clone()),
                },
            );
            state.queue.push(id, this.priority, now);
            this.id = Some(id);
            if !state.driver_running {
                state.driver_running = true;
                runtime.spawn(drive(Arc::downgrade(shared)));
            } else if state.queue.front(now) == Some(id) {
                // A new head (the first waiter, or one of a higher class): its deadline
                // is not the driver's. A newcomer that is not the head needs no nudge:
                // it is younger than the head, so the head is promoted before it.
                drop(state);
                shared.notify.notify_one();
            }
            return Poll::Pending;
        };
        let Some(slot) = state.slots.get_mut(&id) else {
            drop(state);
            return this.failed(Error::Cancelled);
        };
        if slot.granted {
            state.slots.remove(&id);
            drop(state);
            return this.granted();
        }
        if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            slot.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        // Never queued, or already finished: nothing to clean up.
        let (Some(id), Some(shared)) = (self.id, self.shared.as_ref()) else {
            return;
        };
        let mut state = shared.lock();
        match state.slots.remove(&id) {
            // Granted but never picked up: nothing was sent, give it all back.
            Some(slot) if slot.granted => {
                state.take_back(&slot.cost);
                shared.kick(state);
            }
            Some(_) => {
                let now = shared.now_ns();
                let was_head = state.queue.front(now) == Some(id);
                state.queue.remove(id, self.priority);
                if was_head {
                    shared.kick(state);
                }
            }
            None => {}
        }
    }
}

impl State {
    fn take_back(&mut self, cost: &Cost) {
        for (d, bucket) in DIMENSIONS.iter().zip(self.buckets.iter_mut()) {
            if let Some(bucket) = bucket {
                bucket.give_units(units(cost.on(*d)));
            }
        }
    }
}
