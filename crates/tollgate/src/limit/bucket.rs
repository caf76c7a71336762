//! One dimension's token bucket, in exact integer arithmetic.
//!
//! Levels are kept in *units*: one token is [`UNITS_PER_TOKEN`] units, chosen so that the
//! refill per nanosecond, `limit × factor‰`, is a whole number. Refill is therefore exact
//! at every rate the adaptive throttle can set, and 24 hours of refill add up to exactly
//! `24 × 60 × limit` tokens: no floating-point drift.

/// Nanoseconds per minute.
const NANOS_PER_MINUTE: i128 = 60_000_000_000;

/// The throttle factor's unit: 1000 = full rate.
pub(crate) const FACTOR_ONE: u32 = 1000;

/// Units per token: a minute of nanoseconds times the factor's resolution.
pub(crate) const UNITS_PER_TOKEN: i128 = NANOS_PER_MINUTE * FACTOR_ONE as i128;

/// `tokens` in units.
pub(crate) fn units(tokens: u64) -> i128 {
    i128::from(tokens) * UNITS_PER_TOKEN
}

/// A bucket for one dimension. Starts full.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    /// The per-minute limit.
    limit: u64,
    /// Capacity in units.
    capacity: i128,
    /// Current level in units; negative while in debt.
    level: i128,
    /// Refill in units per nanosecond.
    rate: i128,
    /// When `level` was last brought up to date, in ns since the limiter's epoch.
    last_ns: u64,
    /// A fixed window's length (0: a continuous bucket): `capacity` per window.
    window_ns: u64,
    /// A known turn of the fixed window (from a provider's reset or `retry-after`): from
    /// then on the bucket is full at each turn and refills not at all in between.
    turn_ns: Option<u64>,
    /// How much later than the requests that follow it the first request out of a full
    /// bucket may reach the provider ([`Bucket::grant_units`]).
    allowance_ns: u64,
    /// `allowance_ns × rate`: the refill of one allowance, kept with the rate so that a
    /// grant does not multiply i128s.
    allowance_units: i128,
    /// Nothing refills before this (ns since the epoch): set by a grant out of a (nearly)
    /// full bucket, while its request may still be on its way.
    hold_until_ns: u64,
}

impl Bucket {
    /// A full bucket for `limit` per minute holding at most `capacity_tokens`.
    pub(crate) fn new(limit: u64, capacity_tokens: u64, now_ns: u64) -> Self {
        let capacity = i128::from(capacity_tokens.max(1)) * UNITS_PER_TOKEN;
        Bucket {
            limit,
            capacity,
            level: capacity,
            rate: i128::from(limit) * i128::from(FACTOR_ONE),
            last_ns: now_ns,
            window_ns: 0,
            turn_ns: None,
            allowance_ns: 0,
            allowance_units: 0,
            hold_until_ns: 0,
        }
    }

    /// Sets the arrival allowance ([`Bucket::grant_units`]).
    pub(crate) fn with_allowance(mut self, allowance_ns: u64) -> Self {
        self.allowance_ns = allowance_ns;
        self.set_rate(self.rate);
        self
    }

    /// Sets the refill rate (units per ns) and what one allowance refills at it.
    fn set_rate(&mut self, rate: i128) {
        self.rate = rate;
        self.allowance_units = i128::from(self.allowance_ns).saturating_mul(rate);
    }

    /// Capacity in whole tokens.
    pub(crate) fn capacity_tokens(&self) -> u64 {
        u64::try_from(self.capacity / UNITS_PER_TOKEN).unwrap_or(u64::MAX)
    }

    /// The level in tokens (fractional; negative in debt), for reports.
    pub(crate) fn level_tokens(&self) -> f64 {
        self.level as f64 / UNITS_PER_TOKEN as f64
    }

    /// Brings the level up to `now_ns`.
    pub(crate) fn refill(&mut self, now_ns: u64) {
        if let Some(turn) = self.turn_ns {
            // A fixed window whose turns are known: full at each, nothing in between.
            if now_ns > self.last_ns {
                let window = self.window_ns.max(1);
                let turned = now_ns >= turn
                    && (self.last_ns < turn
                        || (now_ns - turn) / window > (self.last_ns - turn) / window);
                if turned {
                    self.level = self.capacity;
                }
                self.last_ns = now_ns;
            }
            return;
        }
        if now_ns > self.last_ns {
            let from = self.last_ns.max(self.hold_until_ns);
            if self.level < self.capacity && now_ns > from {
                let gained = i128::from(now_ns - from) * self.rate;
                self.level = self.capacity.min(self.level.saturating_add(gained));
            }
            self.last_ns = now_ns;
        }
    }

    /// Whether `tokens` can be taken now (after [`Bucket::refill`]).
    pub(crate) fn fits(&self, tokens: u64) -> bool {
        self.fits_units(units(tokens))
    }

    /// Whether `units` can be taken now (after [`Bucket::refill`]).
    pub(crate) fn fits_units(&self, units: i128) -> bool {
        self.level >= units
    }

    /// Grants `units` that fit (see [`Bucket::fits_units`]), after [`Bucket::refill`].
    ///
    /// The provider's bucket starts draining when the first request *arrives*; ours when
    /// it is granted. While a request out of a full bucket is on its way, the provider's
    /// bucket is full and spills what refills; ours would count that refill. A later
    /// request that travels faster than the first (a reused connection against a fresh
    /// handshake) would then find the provider one refill short: a 429. So a grant out of
    /// a full bucket (or one within the allowance's refill of full) holds the refill for
    /// the allowance. A refund that fills the bucket again undoes it: a full bucket gains
    /// nothing from refill anyway. A fixed window whose turns are known spills nothing
    /// the provider would not.
    pub(crate) fn grant_units(&mut self, units: i128) {
        // Within the allowance's refill of full, hold for the whole allowance: a little
        // more than the provider spills when the bucket was not quite full, and no
        // division (of i128s, slow) on the fast path.
        if self.turn_ns.is_none()
            && self.allowance_ns > 0
            && self.capacity - self.level < self.allowance_units
        {
            let until = self.last_ns.saturating_add(self.allowance_ns);
            self.hold_until_ns = self.hold_until_ns.max(until);
        }
        self.level -= units;
    }

    /// Gives `units` back, capped at capacity.
    pub(crate) fn give_units(&mut self, units: i128) {
        self.level = self.capacity.min(self.level.saturating_add(units));
    }

    /// Whether `tokens` is more than the bucket can ever hold.
    pub(crate) fn too_large(&self, tokens: u64) -> bool {
        i128::from(tokens) * UNITS_PER_TOKEN > self.capacity
    }

    /// Adds `units` (negative takes), capped at capacity; may go into debt.
    pub(crate) fn add_tokens(&mut self, tokens: i64) {
        let units = i128::from(tokens) * UNITS_PER_TOKEN;
        self.level = self.capacity.min(self.level.saturating_add(units));
    }

    /// Nanoseconds until `tokens` fit, at the current rate (0 when they fit now).
    pub(crate) fn wait_ns(&self, tokens: u64) -> u64 {
        let missing = i128::from(tokens) * UNITS_PER_TOKEN - self.level;
        if missing <= 0 {
            0
        } else if let Some(turn) = self.turn_ns {
            // Nothing refills before the fixed window turns; then all of it does.
            if self.last_ns < turn {
                turn - self.last_ns
            } else {
                let window = self.window_ns.max(1);
                window - (self.last_ns - turn) % window
            }
        } else {
            // Ceiling division: the first nanosecond at which enough has refilled.
            let held = self.hold_until_ns.saturating_sub(self.last_ns);
            u64::try_from((missing + self.rate - 1) / self.rate)
                .unwrap_or(u64::MAX)
                .saturating_add(held)
        }
    }

    /// Sets the refill to `factor_milli`‰ of the limit (after refilling at the old rate).
    pub(crate) fn set_factor(&mut self, factor_milli: u32, now_ns: u64) {
        self.refill(now_ns);
        self.set_rate((i128::from(self.limit) * i128::from(factor_milli)).max(1));
    }

    /// The per-minute limit the bucket refills at (before the throttle's factor).
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Refills at `limit` per minute (scaled by `factor_milli`‰) and holds at most
    /// `capacity_tokens` from now on (after refilling at the old rate).
    ///
    /// A smaller bucket keeps what has been taken out of the larger one: the provider's
    /// bucket of the new size has had the same requests taken from it, so the level drops
    /// by the capacity lost (a bucket of 60 with 20 taken, told the limit is 30, has 10
    /// left, not 30), though never below zero for it (what was taken before may have been
    /// refused by the provider, or refilled there). A larger one keeps its level.
    pub(crate) fn set_limit(
        &mut self,
        limit: u64,
        capacity_tokens: u64,
        factor_milli: u32,
        now_ns: u64,
    ) {
        self.refill(now_ns);
        let capacity = i128::from(capacity_tokens.max(1)) * UNITS_PER_TOKEN;
        if capacity < self.capacity && self.level > 0 {
            let kept = (self.level - (self.capacity - capacity)).max(0);
            self.level = kept.min(capacity);
        }
        self.limit = limit.max(1);
        self.capacity = capacity;
        self.set_rate((i128::from(self.limit) * i128::from(factor_milli)).max(1));
        self.level = self.level.min(self.capacity);
        if self.window_ns > 0 {
            self.set_fixed_window();
        }
    }

    /// Lowers the level to what the provider had left when it admitted a request sent
    /// at `sent_ns` (`tokens`), plus what has refilled since at the current rate. Every
    /// grant made since is already taken from our level once; it is not taken again (see
    /// `State::on_report`).
    pub(crate) fn lower_as_of(&mut self, tokens: u64, sent_ns: u64, now_ns: u64) {
        self.refill(now_ns);
        let refilled = i128::from(now_ns.saturating_sub(sent_ns)) * self.rate;
        let target = i128::from(tokens) * UNITS_PER_TOKEN + refilled;
        self.level = self.level.min(target.min(self.capacity));
        // The provider has seen a request: its bucket drains and refills from now on,
        // whatever arrived late.
        self.hold_until_ns = 0;
    }

    /// Makes this a fixed-window bucket: `capacity` per window of `capacity / limit`
    /// minutes. It refills continuously until a turn of the window is known
    /// ([`Bucket::hold_until_turn`]).
    pub(crate) fn set_fixed_window(&mut self) {
        let window =
            i128::from(self.capacity_tokens()) * NANOS_PER_MINUTE / i128::from(self.limit.max(1));
        self.window_ns = u64::try_from(window.max(1)).unwrap_or(u64::MAX);
    }

    /// Whether this is a fixed-window bucket.
    pub(crate) fn is_fixed_window(&self) -> bool {
        self.window_ns > 0
    }

    /// A fixed window with `tokens` left that turns at `turn_ns`: the level is at most
    /// that, nothing refills until the turn, and from then on the bucket is full at every
    /// turn. Grants made since the provider said so are already taken from our level.
    pub(crate) fn hold_until_turn(&mut self, tokens: u64, turn_ns: u64, now_ns: u64) {
        self.refill(now_ns);
        let left = i128::from(tokens) * UNITS_PER_TOKEN;
        self.level = self.level.min(left);
        self.hold_until_ns = 0; // as in `lower_as_of`
        if self.window_ns > 0 {
            self.turn_ns = Some(turn_ns.max(now_ns));
        }
    }

    /// Sets the level so that exactly one token has refilled `wait_ns` from now, at the
    /// current rate (a provider's `retry-after`: one request is allowed then). A fixed
    /// window whose turn is known is left alone: it is full at the turn. The provider has
    /// seen a request, so the arrival hold ends.
    pub(crate) fn next_unit_in(&mut self, wait_ns: u64, now_ns: u64) {
        self.refill(now_ns);
        self.hold_until_ns = 0;
        if self.turn_ns.is_some() {
            return;
        }
        // Assigned, not only lowered: the provider knows its requests bucket, and its
        // caller has made sure nothing of ours is on its way uncounted. Our level may be
        // lower only because a retry just took the unit that the throttle's slower refill
        // gave back, and waiting for that refill is the delay this removes.
        self.level = UNITS_PER_TOKEN.saturating_sub(i128::from(wait_ns).saturating_mul(self.rate));
    }

    /// Lowers the level to `tokens` if it is above (the provider says it has less left).
    pub(crate) fn lower_to(&mut self, tokens: u64, now_ns: u64) {
        self.refill(now_ns);
        self.level = self.level.min(i128::from(tokens) * UNITS_PER_TOKEN);
        self.hold_until_ns = 0; // as in `lower_as_of`
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn bucket_refills_at_limit_per_sixty_seconds_exactly() {
        let mut b = Bucket::new(60, 60, 0);
        b.add_tokens(-60);
        b.refill(SECOND);
        assert!(b.fits(1) && !b.fits(2));
        assert_eq!(b.wait_ns(2), SECOND);
    }

    #[test]
    fn bucket_refill_has_no_drift_over_a_day_of_small_steps() {
        // rpm 7 refills 7 per minute; stepping 1 ms at a time for a simulated day, taking
        // whatever has refilled, admits exactly 7 × 1440 plus the initial burst.
        let mut b = Bucket::new(7, 7, 0);
        let mut taken = 0u64;
        let mut now = 0;
        let day = 24 * 3600 * SECOND;
        while now <= day {
            b.refill(now);
            while b.fits(1) {
                b.add_tokens(-1);
                taken += 1;
            }
            now += 1_000_000;
        }
        assert_eq!(taken, 7 + 7 * 1440);
    }

    #[test]
    fn bucket_wait_is_exact_for_awkward_rates() {
        let mut b = Bucket::new(7, 7, 0);
        b.add_tokens(-7);
        // One token of seven per minute: 60/7 s = 8_571_428_571.43 ns → rounds up.
        assert_eq!(b.wait_ns(1), 8_571_428_572);
        b.refill(8_571_428_571);
        assert!(!b.fits(1));
        b.refill(8_571_428_572);
        assert!(b.fits(1));
    }

    #[test]
    fn bucket_factor_slows_refill_and_debt_delays() {
        let mut b = Bucket::new(60, 60, 0);
        b.add_tokens(-60);
        b.set_factor(100, 0); // a tenth of the rate
        assert_eq!(b.wait_ns(1), 10 * SECOND);
        b.add_tokens(-5); // debt
        assert_eq!(b.wait_ns(1), 60 * SECOND);
    }

    #[test]
    fn bucket_grant_out_of_a_full_bucket_holds_the_refill_for_the_allowance() {
        // 60 rpm: one token a second; the allowance is half a second.
        let mut b = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        for _ in 0..60 {
            b.grant_units(units(1));
        }
        // The 61st waits 1.5 s, not 1 s: the first arrival may be half a second late.
        assert_eq!(b.wait_ns(1), SECOND + SECOND / 2);
        b.refill(SECOND / 2);
        assert!(b.level == 0);
        b.refill(SECOND + SECOND / 2);
        assert!(b.fits(1) && !b.fits(2));
        // Granted from far below full, nothing is held again.
        b.grant_units(units(1));
        assert_eq!(b.wait_ns(1), SECOND);
    }

    #[test]
    fn bucket_hold_ends_when_the_provider_reports_what_it_has_left() {
        let mut b = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        for _ in 0..60 {
            b.grant_units(units(1));
        }
        // The provider answered the first: it has seen a request, its refill runs.
        b.lower_as_of(0, SECOND / 10, SECOND / 10);
        assert_eq!(b.wait_ns(1), SECOND);
        let mut c = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        c.grant_units(units(60));
        c.lower_to(0, 0);
        assert_eq!(c.wait_ns(1), SECOND);
    }

    #[test]
    fn bucket_grant_near_full_holds_the_allowance_and_far_from_full_nothing() {
        // A quarter token short of full, within half a second's refill: held.
        let mut b = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        b.level -= units(1) / 4;
        b.grant_units(units(1));
        assert_eq!(b.wait_ns(60), SECOND / 2 + SECOND + SECOND / 4);
        // Half a token short: as far as the allowance refills, nothing is held.
        let mut c = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        c.level -= units(1) / 2;
        c.grant_units(units(1));
        assert_eq!(c.wait_ns(60), SECOND + SECOND / 2);
    }

    #[test]
    fn bucket_refund_to_full_after_a_grant_out_of_a_full_bucket_leaves_it_full() {
        let mut b = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        b.grant_units(units(1));
        b.give_units(units(1));
        b.refill(SECOND / 4);
        assert_eq!(b.level, b.capacity);
    }

    #[test]
    fn bucket_grant_without_allowance_or_with_a_known_window_turn_holds_nothing() {
        let mut b = Bucket::new(60, 60, 0);
        b.grant_units(units(1));
        assert_eq!(b.wait_ns(60), SECOND);
        // A fixed window whose turns are known spills nothing the provider would not.
        let mut w = Bucket::new(60, 60, 0).with_allowance(SECOND / 2);
        w.set_fixed_window();
        w.hold_until_turn(60, 10 * SECOND, 0);
        w.grant_units(units(1));
        assert_eq!(w.hold_until_ns, 0);
    }
}
