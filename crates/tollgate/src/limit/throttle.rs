//! The adaptive throttle: how 429s and 529s slow a model's refill, and how successes
//! speed it back up.
//!
//! Why: a provider may publish a limit L but serve less (a shared pool under load, a
//! lower tier than configured). Pacing at L then meets a 429 on every request beyond what
//! is served. The throttle scales the refill by a factor f in [`MIN_RATE_FACTOR`, 1]:
//!
//! - a 429 multiplies f by [`RATE_LIMITED_BETA`] (by [`NEAR_CEILING_BETA`] when f sits
//!   on the plateau, just under a known ceiling) and remembers the rate at which it
//!   happened (the *ceiling*; a probe's 429 less than [`PROBE_TRUST`] above the ceiling
//!   keeps the old one, since a probe overshoots while the provider's burst absorbs it).
//!   Refusals that arrive within [`DECREASE_HOLDOFF`] of a decrease were sent before it
//!   and count once. A 429 with a `retry-after` pauses the whole model for that long, so
//!   its hold-off lasts the pause plus [`PAUSE_SLACK`] if that is longer: the retries that waited out
//!   the pause and are refused again right after it (one call refused three times in a
//!   row, or every caller that waited) count as the same signal, not as new ones.
//! - a 529 multiplies f by [`OVERLOADED_BETA`] (harder than a 429) without moving the
//!   ceiling (overload is the provider's state, not a verdict on our rate), but only when
//!   529s are at least [`OVERLOAD_RATIO_TRIGGER`] of the model's outcomes over the last
//!   [`OVERLOAD_WINDOW`]: a provider shedding load meets that at once, while scattered
//!   529s unrelated to our rate (a few percent) would otherwise ratchet the rate down to
//!   the floor, since they arrive faster than the rate can recover.
//! - after [`RECOVERY_DELAY`] without a refusal, f closes [`APPROACH_PER_SECOND`] of its
//!   gap to the *plateau* ([`PLATEAU_FRACTION`] of the ceiling) each second;
//! - once on the plateau for [`PLATEAU_HOLD`], f probes upward by [`PROBE_PER_SECOND`] a
//!   second, so that a provider that serves more again is found again. A probe's 429
//!   (met after the provider's bucket absorbed the overshoot and ran dry) sends f back
//!   under the plateau, to [`NEAR_CEILING_BETA`] of it, so that the bucket refills
//!   instead of refusing the next calls as well.
//!
//! Repeated 429s lower the ceiling geometrically until the plateau sits just under the
//! served rate; probing then costs one 429 per cycle, and a cycle lasts longer than
//! `PLATEAU_HOLD`. The slowdown never exceeds 10x.

use std::time::Duration;

use super::bucket::FACTOR_ONE;

/// The lowest factor: the throttle never slows a model more than 10x.
pub const MIN_RATE_FACTOR: f64 = 0.1;
/// Multiplier applied on a 429 (rate limited): how hard to back off when our own rate is
/// the problem. Lower backs off faster but loses more throughput on a stray 429.
pub const RATE_LIMITED_BETA: f64 = 0.8;
/// Multiplier applied on a 429 met on the plateau (recovery reached just under the last
/// ceiling and that is still a little too fast): the served rate is known to be within a
/// few percent, so a small cut suffices, and a large one would drop throughput well below
/// what is served for the whole recovery.
pub const NEAR_CEILING_BETA: f64 = 0.9;
/// Multiplier applied on a 529 (overloaded): slows more than a 429.
pub const OVERLOADED_BETA: f64 = 0.6;
/// Refusals within this long of a decrease count as the same event (they were in flight).
pub const DECREASE_HOLDOFF: Duration = Duration::from_secs(2);
/// After a provider's pause (`retry-after`), how long refusals still count as the same
/// signal: a retry that waited the pause is answered a round trip after it ends.
pub const PAUSE_SLACK: Duration = Duration::from_secs(1);
/// How long after a decrease before the factor starts to recover.
pub const RECOVERY_DELAY: Duration = Duration::from_secs(5);
/// The plateau, as a fraction of the rate at the last 429: where recovery aims.
pub const PLATEAU_FRACTION: f64 = 0.95;
/// Fraction of the gap to the plateau closed per second of recovery.
pub const APPROACH_PER_SECOND: f64 = 0.1;
/// How long to stay on the plateau before probing above it. Longer means fewer 429s in
/// steady state (one per probing cycle), and slower discovery of a provider that serves
/// more again.
pub const PLATEAU_HOLD: Duration = Duration::from_secs(60);
/// How far above the ceiling a probe's 429 must come to move the ceiling up: below it,
/// the probe's overshoot is the provider's burst absorbing the excess, not a higher rate.
pub const PROBE_TRUST: f64 = 1.5;
/// Relative growth per second while probing above the plateau.
pub const PROBE_PER_SECOND: f64 = 0.01;
/// The share of recent outcomes that must be 529s before a 529 slows the model.
pub const OVERLOAD_RATIO_TRIGGER: f64 = 0.2;
/// The span over which that share is measured (the current and the previous window).
pub const OVERLOAD_WINDOW: Duration = Duration::from_secs(10);

/// What a provider's answer says about the model's rate.
///
/// Deliberately *not* `#[non_exhaustive]`: every [`LimiterBackend`](super::LimiterBackend)
/// matches it without a wildcard arm, so that a new variant does not compile until each
/// backend has decided what it means (a wildcard once dropped every header report on
/// Redis). Adding a variant is a breaking change, on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// The call succeeded.
    Success,
    /// HTTP 429; `retry_after` pauses the whole model for that long (capped).
    RateLimited {
        /// The provider's `retry-after`.
        retry_after: Option<Duration>,
    },
    /// HTTP 429 again for a call that was already refused with a 429 (its retry): it
    /// pauses the model like [`Feedback::RateLimited`], but is no new signal for the
    /// throttle. One call refused three times in a row is one refusal of our rate, not
    /// three.
    RateLimitedAgain {
        /// The provider's `retry-after`.
        retry_after: Option<Duration>,
    },
    /// HTTP 529 / overloaded.
    Overloaded {
        /// The provider's `retry-after`.
        retry_after: Option<Duration>,
    },
    /// The provider reports what is left of a limit (rate-limit headers); the bucket is
    /// lowered to it when the provider knows better than we do. The same as
    /// [`Feedback::Reported`] with only `remaining`.
    Remaining {
        /// Which limit.
        dimension: crate::catalog::Dimension,
        /// What the provider says is left.
        remaining: u64,
    },
    /// The provider reports nothing left of a limit, full again in `reset_in`. The same
    /// as [`Feedback::Reported`] with `remaining = 0` and a reset, and no limit.
    Exhausted {
        /// Which limit.
        dimension: crate::catalog::Dimension,
        /// When the provider says its bucket is full again.
        reset_in: Duration,
    },
    /// What a provider's rate-limit headers say about one limit, read as the provider
    /// means them (see `docs/rate-limiting.md`):
    ///
    /// - `limit` (`*-limit`, per minute) caps the bucket's limit when it is lower than
    ///   the catalog's (the catalog is never raised);
    /// - `remaining` lowers the bucket's level to it;
    /// - `reset_in` is when the provider's bucket is *full* again, not when the next
    ///   request is allowed. With `remaining = 0`, the next request is allowed when one
    ///   unit has refilled at the provider's rate, `reset_in / limit` (continuous
    ///   window), or at the reset (`window = "fixed"`). Never longer than a 429 pauses
    ///   ([`super::MAX_PROVIDER_PAUSE`]).
    Reported {
        /// Which limit.
        dimension: crate::catalog::Dimension,
        /// The provider's limit for this dimension, per minute, if it said.
        limit: Option<u64>,
        /// What the provider says is left, if it said.
        remaining: Option<u64>,
        /// When the provider says its bucket is full again, if it said.
        reset_in: Option<Duration>,
        /// When the answer's request was sent ([`SendMark::now`], taken right after its
        /// reservation was granted): `remaining` is as of the provider's admission of
        /// that request, so what has refilled since is credited. `None`: as of now.
        since: Option<SendMark>,
    },
}

/// When a request was sent, for reading the rate-limit headers of its answer as of then
/// (see [`Feedback::Reported`]). Taken right after the request's reservation is granted.
///
/// Only the instant: which of the requests granted since the provider had counted when it
/// answered cannot be known (answers come back in any order), so the limiter never
/// subtracts them a second time (`docs/rate-limiting.md`, "Reading a report").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendMark {
    pub(crate) at: tokio::time::Instant,
}

impl SendMark {
    /// A mark for a request sent now (tokio's clock, so paused tests see it).
    pub fn now() -> SendMark {
        SendMark {
            at: crate::clock::now(),
        }
    }

    /// When the request was sent.
    pub fn at(&self) -> tokio::time::Instant {
        self.at
    }
}

/// The throttle's state for one model.
#[derive(Debug, Clone)]
pub(crate) struct AdaptiveThrottle {
    enabled: bool,
    factor: f64,
    ceiling: f64,
    last_decrease_ns: Option<u64>,
    /// Until when refusals count as the last decrease's (its pause plus the hold-off).
    holdoff_until_ns: u64,
    last_update_ns: u64,
    plateau_since_ns: Option<u64>,
    window: OutcomeWindow,
}

/// Outcomes and 529s in the current and the previous [`OVERLOAD_WINDOW`].
#[derive(Debug, Clone, Default)]
struct OutcomeWindow {
    start_ns: u64,
    outcomes: [u64; 2],
    overloads: [u64; 2],
}

impl OutcomeWindow {
    /// Counts an outcome at `now_ns` and returns the share of 529s over both windows.
    fn observe(&mut self, now_ns: u64, overloaded: bool) -> f64 {
        let span = duration_ns(OVERLOAD_WINDOW);
        let elapsed = now_ns.saturating_sub(self.start_ns);
        if elapsed >= 2 * span {
            *self = OutcomeWindow {
                start_ns: now_ns,
                ..OutcomeWindow::default()
            };
        } else if elapsed >= span {
            *self = OutcomeWindow {
                start_ns: self.start_ns + span,
                outcomes: [self.outcomes[1], 0],
                overloads: [self.overloads[1], 0],
            };
        }
        self.outcomes[1] += 1;
        self.overloads[1] += u64::from(overloaded);
        (self.overloads[0] + self.overloads[1]) as f64
            / (self.outcomes[0] + self.outcomes[1]) as f64
    }
}

impl AdaptiveThrottle {
    pub(crate) fn new(enabled: bool) -> Self {
        AdaptiveThrottle {
            enabled,
            factor: 1.0,
            ceiling: 1.0,
            last_decrease_ns: None,
            holdoff_until_ns: 0,
            last_update_ns: 0,
            plateau_since_ns: None,
            window: OutcomeWindow::default(),
        }
    }

    /// The factor in thousandths, as the buckets take it.
    pub(crate) fn factor_milli(&self) -> u32 {
        (self.factor * f64::from(FACTOR_ONE))
            .round()
            .clamp(1.0, f64::from(FACTOR_ONE)) as u32
    }

    pub(crate) fn factor(&self) -> f64 {
        self.factor
    }

    /// Applies a feedback at `now_ns`; returns the new factor (‰) if it changed.
    pub(crate) fn on_feedback(&mut self, feedback: Feedback, now_ns: u64) -> Option<u32> {
        if !self.enabled {
            return None;
        }
        let before = self.factor_milli();
        match feedback {
            Feedback::Success => {
                self.window.observe(now_ns, false);
                self.recover(now_ns);
            }
            Feedback::RateLimited { retry_after } => {
                self.window.observe(now_ns, false);
                let beta = if self.near_ceiling() {
                    NEAR_CEILING_BETA
                } else {
                    RATE_LIMITED_BETA
                };
                let probing = self.factor > self.plateau() * (1.0 + ON_PLATEAU);
                self.decrease(beta, true, retry_after, now_ns);
                if probing && self.last_decrease_ns == Some(now_ns) {
                    // A probe's 429 comes after the provider's bucket absorbed the
                    // overshoot and ran dry: back under the plateau, so that the bucket
                    // refills instead of refusing the next few calls too.
                    self.factor = self
                        .factor
                        .min(self.plateau() * NEAR_CEILING_BETA)
                        .max(MIN_RATE_FACTOR);
                }
            }
            Feedback::RateLimitedAgain { .. } => {
                self.window.observe(now_ns, false);
            }
            Feedback::Overloaded { retry_after } => {
                if self.window.observe(now_ns, true) >= OVERLOAD_RATIO_TRIGGER {
                    self.decrease(OVERLOADED_BETA, false, retry_after, now_ns);
                }
            }
            Feedback::Remaining { .. } | Feedback::Exhausted { .. } | Feedback::Reported { .. } => {
            }
        }
        let after = self.factor_milli();
        (after != before).then_some(after)
    }

    /// Whether the factor sits on the plateau (within 1 %), not below it recovering nor
    /// above it probing.
    fn near_ceiling(&self) -> bool {
        let plateau = self.plateau();
        (self.factor - plateau).abs() <= plateau * ON_PLATEAU
    }

    fn plateau(&self) -> f64 {
        (self.ceiling * PLATEAU_FRACTION).max(MIN_RATE_FACTOR)
    }

    /// Cuts the factor by `beta`, unless a decrease's hold-off still runs. The hold-off
    /// lasts [`DECREASE_HOLDOFF`], or the provider's pause (`retry_after`, capped as the
    /// limiter caps it) and [`PAUSE_SLACK`] if longer: everything refused until then was
    /// sent before the cut took effect, or waited out the same pause.
    fn decrease(
        &mut self,
        beta: f64,
        moves_ceiling: bool,
        retry_after: Option<Duration>,
        now_ns: u64,
    ) {
        if self.last_decrease_ns.is_some() && now_ns < self.holdoff_until_ns {
            return;
        }
        let pause = retry_after.map_or(Duration::ZERO, |r| r.min(super::MAX_PROVIDER_PAUSE));
        let holdoff = DECREASE_HOLDOFF.max(pause + PAUSE_SLACK);
        self.holdoff_until_ns = now_ns.saturating_add(duration_ns(holdoff));
        if moves_ceiling {
            // A probe overshoots before its 429 arrives (the provider's bucket absorbs the
            // excess for a while): within `PROBE_TRUST` of the ceiling, the old ceiling
            // stays the better estimate; far above it, the provider serves more now.
            self.ceiling = if self.factor > self.ceiling * PROBE_TRUST {
                self.factor
            } else {
                self.ceiling.min(self.factor)
            };
        }
        self.factor = (self.factor * beta).max(MIN_RATE_FACTOR);
        self.last_decrease_ns = Some(now_ns);
        self.last_update_ns = now_ns;
        self.plateau_since_ns = None;
    }

    fn recover(&mut self, now_ns: u64) {
        let start = self
            .last_decrease_ns
            .map_or(0, |t| t.saturating_add(duration_ns(RECOVERY_DELAY)));
        let from = self.last_update_ns.max(start);
        if now_ns <= from || self.factor >= 1.0 {
            return;
        }
        let seconds = (now_ns - from) as f64 / 1e9;
        let plateau = self.plateau();
        if self.factor < plateau * (1.0 - ON_PLATEAU) {
            let gap = plateau - self.factor;
            self.factor += gap * (1.0 - (1.0 - APPROACH_PER_SECOND).powf(seconds));
        } else {
            let since = *self.plateau_since_ns.get_or_insert(now_ns);
            let probe_from = since.saturating_add(duration_ns(PLATEAU_HOLD)).max(from);
            if now_ns > probe_from {
                let probe_seconds = (now_ns - probe_from) as f64 / 1e9;
                self.factor *= (1.0 + PROBE_PER_SECOND).powf(probe_seconds);
            }
        }
        self.factor = self.factor.min(1.0);
        self.last_update_ns = now_ns;
    }
}

/// How close to the plateau counts as on it (relative).
const ON_PLATEAU: f64 = 0.01;

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn throttle_429_slows_and_529_slows_more() {
        let mut a = AdaptiveThrottle::new(true);
        a.on_feedback(Feedback::RateLimited { retry_after: None }, S);
        let mut b = AdaptiveThrottle::new(true);
        b.on_feedback(Feedback::Overloaded { retry_after: None }, S);
        assert!(b.factor() < a.factor() && a.factor() < 1.0);
    }

    #[test]
    fn throttle_ignores_scattered_529s_but_slows_when_529s_dominate() {
        let mut t = AdaptiveThrottle::new(true);
        // 100 outcomes a second, one in twenty a 529, for a minute: no slowdown.
        for i in 0..6_000u64 {
            let now = i * 10_000_000;
            let feedback = if i % 20 == 7 {
                Feedback::Overloaded { retry_after: None }
            } else {
                Feedback::Success
            };
            t.on_feedback(feedback, now);
        }
        assert_eq!(t.factor(), 1.0);
        // Then the provider sheds a third of the load: within two windows (at most 20 s)
        // the share passes the trigger and the model slows.
        for i in 6_000..8_000u64 {
            let now = i * 10_000_000;
            let feedback = if i % 3 == 0 {
                Feedback::Overloaded { retry_after: None }
            } else {
                Feedback::Success
            };
            t.on_feedback(feedback, now);
        }
        assert!(t.factor() < 1.0);
    }

    #[test]
    fn throttle_never_slows_more_than_ten_times() {
        let mut t = AdaptiveThrottle::new(true);
        for i in 0..200 {
            t.on_feedback(Feedback::Overloaded { retry_after: None }, i * 10 * S);
        }
        assert_eq!(t.factor(), MIN_RATE_FACTOR);
        assert_eq!(t.factor_milli(), 100);
    }

    #[test]
    fn throttle_counts_refusals_in_flight_once() {
        let mut t = AdaptiveThrottle::new(true);
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 10 * S);
        let once = t.factor();
        for i in 1..10 {
            t.on_feedback(
                Feedback::RateLimited { retry_after: None },
                10 * S + i * 100_000_000,
            );
        }
        assert_eq!(t.factor(), once);
    }

    #[test]
    fn throttle_holdoff_lasts_the_providers_pause() {
        // A 429 asking for 3 s pauses the model 3 s: whatever is refused within that
        // pause and a round trip after it (`PAUSE_SLACK`) waited the same pause, and
        // counts once.
        let mut t = AdaptiveThrottle::new(true);
        let wait = Some(Duration::from_secs(3));
        t.on_feedback(Feedback::RateLimited { retry_after: wait }, 10 * S);
        t.on_feedback(
            Feedback::RateLimited { retry_after: wait },
            13 * S + 900_000_000,
        );
        assert!(
            (t.factor() - RATE_LIMITED_BETA).abs() < 1e-9,
            "{}",
            t.factor()
        );
        // Past it, a refusal is a new signal.
        t.on_feedback(
            Feedback::RateLimited { retry_after: wait },
            14 * S + 100_000_000,
        );
        assert!(t.factor() < RATE_LIMITED_BETA);
    }

    #[test]
    fn throttle_repeated_refusal_of_one_call_is_no_new_signal() {
        let mut t = AdaptiveThrottle::new(true);
        let wait = Some(Duration::from_secs(3));
        t.on_feedback(Feedback::RateLimited { retry_after: wait }, 10 * S);
        for i in 1..4 {
            t.on_feedback(
                Feedback::RateLimitedAgain { retry_after: wait },
                10 * S + i * 10 * S,
            );
        }
        assert!(
            (t.factor() - RATE_LIMITED_BETA).abs() < 1e-9,
            "{}",
            t.factor()
        );
    }

    #[test]
    fn throttle_run_of_successes_speeds_back_up() {
        let mut t = AdaptiveThrottle::new(true);
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 0);
        let low = t.factor();
        t.on_feedback(Feedback::Success, S); // inside the recovery delay: no change
        assert_eq!(t.factor(), low);
        for s in 6..60 {
            t.on_feedback(Feedback::Success, s * S);
        }
        assert!(
            t.factor() > low && t.factor() <= PLATEAU_FRACTION + 1e-9,
            "{}",
            t.factor()
        );
    }

    /// Drives `t` with successes every 100 ms from `from_s` to `to_s` seconds.
    fn succeed(t: &mut AdaptiveThrottle, from_s: u64, to_s: u64) {
        for i in from_s * 10..to_s * 10 {
            t.on_feedback(Feedback::Success, i * S / 10);
        }
    }

    #[test]
    fn throttle_429_on_the_plateau_cuts_gently_and_lowers_the_ceiling() {
        let mut t = AdaptiveThrottle::new(true);
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 0); // ceiling 1.0, f 0.8
        succeed(&mut t, 1, 60); // recovers onto the plateau, 0.95
        let on_plateau = t.factor();
        assert!((on_plateau - PLATEAU_FRACTION).abs() < 0.01, "{on_plateau}");
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 60 * S);
        assert!((t.factor() - on_plateau * NEAR_CEILING_BETA).abs() < 1e-9);
        // The next plateau sits under the rate that was refused.
        succeed(&mut t, 61, 120);
        assert!(t.factor() < on_plateau, "{} >= {on_plateau}", t.factor());
    }

    #[test]
    fn throttle_429_while_recovering_cuts_fully() {
        let mut t = AdaptiveThrottle::new(true);
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 0);
        succeed(&mut t, 1, 8); // still well below the plateau
        let before = t.factor();
        assert!(before < PLATEAU_FRACTION * 0.99);
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 8 * S);
        assert!((t.factor() - before * RATE_LIMITED_BETA).abs() < 1e-9);
    }

    #[test]
    fn throttle_probe_overshoot_keeps_the_ceiling_but_a_far_probe_raises_it() {
        // On the plateau of ceiling 0.5, probing climbs; a 429 36 % above the ceiling is
        // the provider's burst (up to a minute's worth) running out, so the plateau stays
        // where it was, and the factor goes back under it, for the bucket to refill.
        let mut t = AdaptiveThrottle::new(true);
        t.factor = 0.68;
        t.ceiling = 0.5;
        t.on_feedback(Feedback::RateLimited { retry_after: None }, 100 * S);
        assert_eq!(t.ceiling, 0.5);
        let under = 0.5 * PLATEAU_FRACTION * NEAR_CEILING_BETA;
        assert!((t.factor() - under).abs() < 1e-9, "{}", t.factor());
        // A probe that got 60 % above the ceiling before a 429 found a provider serving
        // more: the ceiling moves up to it, and the cut is the usual one.
        let mut far = AdaptiveThrottle::new(true);
        far.factor = 0.8;
        far.ceiling = 0.5;
        far.on_feedback(Feedback::RateLimited { retry_after: None }, 100 * S);
        assert_eq!(far.ceiling, 0.8);
        assert!((far.factor() - 0.8 * RATE_LIMITED_BETA).abs() < 1e-9);
    }

    #[test]
    fn throttle_disabled_never_changes() {
        let mut t = AdaptiveThrottle::new(false);
        assert_eq!(
            t.on_feedback(Feedback::Overloaded { retry_after: None }, S),
            None
        );
        assert_eq!(t.factor(), 1.0);
    }
}
