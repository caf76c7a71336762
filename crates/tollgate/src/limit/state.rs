//! A limiter's state: [`Shared`], what its handle, reservations and waiters hold (the
//! model id, the clock's epoch, the mutex over [`State`], the driver's notifier), and
//! [`State`] itself, the buckets, the wait queue, the throttle and the provider's pause.
//! Everything that changes the buckets happens here, under the one lock;
//! [`State::grant_ready`] is the only place that grants.

use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::bucket::{Bucket, units};
use super::config::{Burst, DIMENSIONS, LimiterConfig, MAX_PROVIDER_PAUSE};
use super::cost::{Cost, CostDelta};
use super::priority::Priority;
use super::queue::WaitQueue;
use super::reservation::BucketLedger;
use super::snapshot::LimiterSnapshot;
use super::sync::{Mutex, MutexGuard};
use super::throttle::{AdaptiveThrottle, Feedback};
use crate::catalog::{Dimension, RateWindow};
use crate::clock;
use crate::error::{Error, Result};

/// The limiter's state. Strong references to it are held only by the limiter's handle,
/// by reservations and by [`super::Reserve`] futures (the driver holds a weak one).
pub(super) struct Shared {
    pub(super) model_id: String,
    pub(super) epoch: Instant,
    state: Mutex<State>,
    /// Tells the driver that the head's deadline may have moved (its own `Arc`, so that
    /// the driver can sleep without holding the limiter).
    pub(super) notify: Arc<Notify>,
}

pub(super) struct State {
    buckets: [Option<Bucket>; 4],
    pub(super) queue: WaitQueue,
    pub(super) driver_running: bool,
    paused_until_ns: u64,
    throttle: AdaptiveThrottle,
    grants: u64,
    waited: u64,
    /// The catalog's limit per dimension (0 = unlimited): a provider's `*-limit` header
    /// may lower a bucket's limit below it, never raise it above.
    catalog_limits: [u64; 4],
    /// Answers that succeeded, and their count at the last 429: what a fixed window
    /// allowed is what the provider accepted since.
    successes: u64,
    successes_at_429: u64,
    /// Until when the window whose allowance the last fixed-window 429 measured lasts:
    /// the other calls' 429s of that window measure nothing new.
    window_refused_until_ns: u64,
    /// `grants` at the last 429 of any call (first or repeated): whether anything but a
    /// refused call's own retry has been granted since ([`State::next_request_in`]).
    grants_at_refusal: u64,
    burst: Burst,
    window: RateWindow,
}

impl Shared {
    /// The state of a limiter with full buckets.
    pub(super) fn new(config: LimiterConfig) -> Self {
        let epoch = clock::now();
        let l = config.limits;
        let bucket = |limit: u64| {
            (limit > 0).then(|| {
                let mut bucket = Bucket::new(limit, config.burst.capacity(limit), 0)
                    .with_allowance(
                        u64::try_from(config.arrival_allowance.as_nanos()).unwrap_or(u64::MAX),
                    );
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
            driver_running: false,
            paused_until_ns: 0,
            throttle: AdaptiveThrottle::new(config.adaptive),
            grants: 0,
            waited: 0,
            catalog_limits: [l.rpm, l.tpm, l.input_tpm, l.output_tpm],
            successes: 0,
            successes_at_429: 0,
            window_refused_until_ns: 0,
            grants_at_refusal: 0,
            burst: config.burst,
            window: config.window,
        };
        Shared {
            model_id: config.model_id,
            epoch,
            state: Mutex::new(state),
            notify: Arc::new(Notify::new()),
        }
    }

    /// Applies what a provider's answer said, then grants whoever fits now.
    pub(super) fn feedback(&self, feedback: Feedback) {
        let shared = self;
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
                    if !retry_after.is_some_and(|wait| state.next_request_in(wait, now)) {
                        state.on_rate_limited(retry_after, now);
                    }
                    state.grants_at_refusal = state.grants;
                    if let Some(pause) = retry_after {
                        state.pause_for(pause, now);
                    }
                }
                Feedback::RateLimitedAgain { retry_after } => {
                    if let Some(pause) = retry_after {
                        state.next_request_in(pause, now);
                        state.pause_for(pause, now);
                    }
                    state.grants_at_refusal = state.grants;
                }
                Feedback::Overloaded {
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
                    // When the request was sent: `remaining` is as of then.
                    let since = since.map(|mark| {
                        u64::try_from(mark.at.saturating_duration_since(shared.epoch).as_nanos())
                            .unwrap_or(u64::MAX)
                    });
                    state.on_report(dimension, limit, remaining, reset_in, since, now);
                }
                Feedback::Success => state.successes += 1,
                // Only the throttle (above) reads this.
                Feedback::Overloaded { retry_after: None } => {}
            }
            state.grant_ready(now)
        };
        shared.notify.notify_one();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// A point-in-time view; `held`: the reservations and waiters alive.
    pub(super) fn snapshot(&self, held: u64) -> LimiterSnapshot {
        let shared = self;
        let mut state = shared.lock();
        let now = shared.now_ns();
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
            held,
        }
    }

    /// The adaptive throttle's factor now (1 = full rate).
    pub(super) fn throttle_factor(&self) -> f64 {
        self.lock().throttle.factor()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn now_ns(&self) -> u64 {
        u64::try_from(
            clock::now()
                .saturating_duration_since(self.epoch)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX)
    }

    pub(super) fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// Grants whoever fits now, wakes them, and tells the driver to look again.
    pub(super) fn kick(&self, mut state: MutexGuard<'_, State>) {
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
    // `opened` and `closed` are left at their defaults: a reservation is counted by the
    // `Arc` it holds (see `Handle`).

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
    /// them would stall a large call for long on a 429 that may be about requests); but
    /// see [`State::next_request_in`], which takes precedence when it can.
    ///
    /// A fixed window refuses until it turns, `retry_after` from now: the requests the
    /// provider accepted since the previous 429 (the successes answered since) are what a
    /// window allows, and become the bucket's limit if lower; the bucket then holds until
    /// the turn and is full at every turn after it. Not the requests *sent* since: with
    /// answers coming back in any order, some of those are still on their way and meet
    /// the same refusal, and counting them left the limit above the window's (a few 429s
    /// at the end of every window). An accepted request still on its way is missed
    /// instead, which errs low: a little throughput, no 429.
    fn on_rate_limited(&mut self, retry_after: Option<Duration>, now: u64) {
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
                let wait =
                    u64::try_from(wait.min(MAX_PROVIDER_PAUSE).as_nanos()).unwrap_or(u64::MAX);
                // The first 429 of a window measures it; the other calls refused in the
                // same window (in flight when it ran out) measure nothing new.
                if now < self.window_refused_until_ns {
                    bucket.hold_until_turn(0, now.saturating_add(wait), now);
                    return;
                }
                self.window_refused_until_ns = now.saturating_add(wait);
                let allowed = self.successes.saturating_sub(self.successes_at_429);
                self.successes_at_429 = self.successes;
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
                bucket.hold_until_turn(0, now.saturating_add(wait), now);
            }
            _ => bucket.lower_to(0, now),
        }
    }

    /// A 429 said one request is allowed in `wait` (its `retry-after`). When nothing but
    /// the refused call's own attempt has been granted since the last refusal, nothing
    /// of ours is on its way that the provider has not counted, so its word is exact:
    /// the requests bucket is set so that one unit has refilled exactly then, at
    /// whatever rate the throttle has just set, and the retry goes when the provider
    /// said, not a (throttled, hence longer) refill later. Otherwise requests still on
    /// their way may take what the provider will have, and the caller applies the
    /// refusal as before (a first 429 empties the bucket). Returns whether it applied.
    fn next_request_in(&mut self, wait: Duration, now: u64) -> bool {
        if self.grants.saturating_sub(self.grants_at_refusal) > 1 {
            return false;
        }
        let Some(bucket) = self.buckets[0].as_mut() else {
            return false;
        };
        if bucket.is_fixed_window() {
            return false; // a window's turn is what `on_rate_limited` sets
        }
        bucket.next_unit_in(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX), now);
        true
    }

    /// A provider's rate-limit headers for one dimension, read as it means them (see
    /// [`Feedback::Reported`]). `sent_ns`: when the answer's request was sent.
    ///
    /// What a report can know: `remaining` was left when the provider admitted this
    /// request, so it counts this request and *some* of the others in flight (those that
    /// reached the provider first), at least none of them and at most every grant made
    /// before the answer arrived. Answers come back in any order, so which ones cannot be
    /// told. Our level already holds every grant once; so the report is read as having
    /// counted all of them: the level is lowered to `remaining` plus the refill since the
    /// request was sent, and never by a grant a second time. A report therefore never
    /// puts the bucket below what the provider has left once everything we sent has
    /// reached it; what it may miss (requests still on their way, when the provider has
    /// less than we thought) the next answers' reports bring in.
    fn on_report(
        &mut self,
        dimension: Dimension,
        limit: Option<u64>,
        remaining: Option<u64>,
        reset_in: Option<Duration>,
        sent_ns: Option<u64>,
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
        // The provider's limit caps ours; the catalog's is never exceeded. A report that
        // names no limit keeps the one in force (learned from an earlier header, or from
        // a fixed window's 429s).
        if let Some(limit) = limit.filter(|l| *l > 0) {
            let effective = limit.min(catalog);
            if effective != bucket.limit() {
                bucket.set_limit(effective, burst.capacity(effective), factor, now);
            }
        }
        // A fixed window that says when it turns: what is left is all there is until
        // then (nothing refills), and at the turn the bucket is full again.
        if let (RateWindow::Fixed, Some(remaining), Some(reset)) =
            (self.window, remaining, reset_in)
        {
            let reset = u64::try_from(reset.min(MAX_PROVIDER_PAUSE).as_nanos()).unwrap_or(u64::MAX);
            bucket.hold_until_turn(remaining, now.saturating_add(reset), now);
            return;
        }
        if let Some(remaining) = remaining {
            bucket.lower_as_of(remaining, sent_ns.unwrap_or(now), now);
        }
        // Nothing left (a continuous bucket): the reset is when the provider's bucket is
        // *full*; the next request may go after one unit has refilled at the provider's
        // rate, `reset / limit`. With a `limit` header our bucket refills at most that
        // fast (capped to it), without one at the catalog's rate: the level of zero
        // already waits for it, and no pause is needed.
    }

    pub(super) fn check_size(&self, model_id: &str, cost: &Cost) -> Result<()> {
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
    /// and counts the grant and the reservation the caller makes of it. A cost that fits is never too large for a bucket, so the
    /// size check is left to the slow path.
    pub(super) fn take_if_ready(&mut self, cost: &Cost, priority: Priority, now: u64) -> bool {
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
                    bucket.grant_units(units);
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
                bucket.grant_units(units(cost.on(*d)));
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
    pub(super) fn queued_wait_ns(&self, cost: &Cost, priority: Priority, now: u64) -> u64 {
        let mut total = *cost;
        for ahead in self.queue.costs_ahead_of(priority, now) {
            total.requests += ahead.requests;
            total.input_tokens += ahead.input_tokens;
            total.output_tokens += ahead.output_tokens;
        }
        self.wait_ns(&total, now)
    }

    /// The one place that grants: pops the head waiter while it fits, in the queue's
    /// order, and returns their wakers (to be woken after the lock is released).
    pub(super) fn grant_ready(&mut self, now: u64) -> Vec<Waker> {
        let mut wakers = Vec::new();
        if self.queue.is_empty() {
            return wakers;
        }
        self.refill(now);
        while let Some((_, cost)) = self.queue.head(now) {
            if !self.fits(&cost, now) {
                break;
            }
            self.take(&cost);
            self.queue.grant_head(now, &mut wakers);
            self.grants += 1;
            self.waited += 1;
        }
        wakers
    }

    /// When the driver must look again: when the head waiter will fit, or earlier if
    /// aging changes the head before then; `None` if nobody waits.
    pub(super) fn head_deadline(&self, now: u64) -> Option<u64> {
        let (_, cost) = self.queue.head(now)?;
        let fits_at = now.saturating_add(self.wait_ns(&cost, now).max(1));
        Some(
            self.queue
                .next_promotion(now)
                .map_or(fits_at, |p| p.min(fits_at)),
        )
    }
}

impl State {
    pub(super) fn take_back(&mut self, cost: &Cost) {
        for (d, bucket) in DIMENSIONS.iter().zip(self.buckets.iter_mut()) {
            if let Some(bucket) = bucket {
                bucket.give_units(units(cost.on(*d)));
            }
        }
    }
}
