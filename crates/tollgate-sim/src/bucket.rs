//! One dimension of the simulated provider's limits: an exact continuous token bucket.
//!
//! Levels are integers in *units*: one token is `60 s in ns × 1000` units, so that the
//! refill per nanosecond, `limit × fraction‰`, is a whole number at every served
//! fraction. A minute at fraction 1000‰ refills exactly `limit` tokens; no drift.

/// Nanoseconds per minute.
const NANOS_PER_MINUTE: i128 = 60_000_000_000;

/// The served fraction's unit: 1000‰ is the whole published limit.
pub const FRACTION_ONE: u32 = 1000;

/// Units per token: a minute of nanoseconds times the fraction's resolution.
const UNITS_PER_TOKEN: i128 = NANOS_PER_MINUTE * FRACTION_ONE as i128;

/// An exact continuous token bucket: refills `limit × fraction` tokens per minute, holds
/// at most `capacity × fraction` tokens, starts full.
///
/// Time is given by the caller as nanoseconds since any fixed origin, never read here,
/// so the same bucket serves the simulated provider (on tokio's clock) and a benchmark's
/// shadow model of a limiter (replaying a journal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuousBucket {
    limit: u64,
    capacity_tokens: u64,
    fraction: u32,
    level: i128,
    last_ns: u64,
    /// Units that refilled into a full bucket and were lost.
    spilled_refill: i128,
    /// Units given back into a bucket that could not hold them, lost.
    spilled_refunds: i128,
    /// `Some(window)`: a fixed window instead of a continuous refill. Nothing refills
    /// until the window turns (every `window` ns from the origin), when the bucket is
    /// full again.
    fixed_window_ns: Option<u64>,
}

/// Capacity a bucket lost by overflowing, in tokens: refill arriving while it was full
/// (nobody asked for it in time), and refunds it could not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spilled {
    /// Refill lost because the bucket was full.
    pub refill: u64,
    /// Refunds ([`ContinuousBucket::give`]) lost because they overflowed the capacity.
    pub refunds: u64,
}

impl ContinuousBucket {
    /// A full bucket refilling `limit` tokens a minute and holding `capacity_tokens`
    /// (at least one).
    pub fn new(limit: u64, capacity_tokens: u64) -> Self {
        let mut bucket = ContinuousBucket {
            limit,
            capacity_tokens: capacity_tokens.max(1),
            fraction: FRACTION_ONE,
            level: 0,
            last_ns: 0,
            spilled_refill: 0,
            spilled_refunds: 0,
            fixed_window_ns: None,
        };
        bucket.level = bucket.capacity_units();
        bucket
    }

    /// A full bucket that, instead of refilling continuously, is full again each time a
    /// fixed window turns: `capacity_tokens` per window of `capacity_tokens / limit`
    /// minutes (a minute when the capacity is the whole limit), windows counted from the
    /// time origin.
    pub fn fixed_window(limit: u64, capacity_tokens: u64) -> Self {
        let mut bucket = Self::new(limit, capacity_tokens);
        let window =
            i128::from(bucket.capacity_tokens) * NANOS_PER_MINUTE / i128::from(limit.max(1));
        bucket.fixed_window_ns = Some(u64::try_from(window.max(1)).unwrap_or(u64::MAX));
        bucket
    }

    /// The fixed window's length, or `None` for a continuous bucket.
    pub fn window_ns(&self) -> Option<u64> {
        self.fixed_window_ns
    }

    /// When the bucket is full again, in ns from `now_ns` (after
    /// [`ContinuousBucket::refill`] to `now_ns`): the next turn of a fixed window, or the
    /// refill of what is missing at the current rate.
    pub fn full_in_ns(&self, now_ns: u64) -> u64 {
        if let Some(window) = self.fixed_window_ns {
            if self.level >= self.capacity_units() {
                return 0;
            }
            return window - now_ns % window;
        }
        let missing = self.capacity_units() - self.level;
        if missing <= 0 {
            return 0;
        }
        let rate = self.rate();
        u64::try_from((missing + rate - 1) / rate).unwrap_or(u64::MAX)
    }

    /// The current capacity in whole tokens (at the served fraction): the limit the
    /// provider enforces per bucket, as its `*-limit` headers say.
    pub fn served_capacity_tokens(&self) -> u64 {
        u64::try_from(self.capacity_units() / UNITS_PER_TOKEN).unwrap_or(u64::MAX)
    }

    /// The level in whole tokens, 0 when in debt (what `*-remaining` headers say).
    pub fn remaining_tokens(&self) -> u64 {
        u64::try_from((self.level / UNITS_PER_TOKEN).max(0)).unwrap_or(u64::MAX)
    }

    /// What overflowing has lost so far, in whole tokens.
    pub fn spilled(&self) -> Spilled {
        let tokens = |units: i128| u64::try_from(units / UNITS_PER_TOKEN).unwrap_or(u64::MAX);
        Spilled {
            refill: tokens(self.spilled_refill),
            refunds: tokens(self.spilled_refunds),
        }
    }

    /// The published per-minute limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The capacity at the whole published limit, in tokens.
    pub fn capacity_tokens(&self) -> u64 {
        self.capacity_tokens
    }

    /// The served fraction in thousandths (1000 = the published limit).
    pub fn fraction_milli(&self) -> u32 {
        self.fraction
    }

    /// The level in tokens (fractional; negative in debt), as of the last refill.
    pub fn level_tokens(&self) -> f64 {
        self.level as f64 / UNITS_PER_TOKEN as f64
    }

    fn capacity_units(&self) -> i128 {
        i128::from(self.capacity_tokens) * i128::from(self.fraction) * NANOS_PER_MINUTE
    }

    fn rate(&self) -> i128 {
        i128::from(self.limit) * i128::from(self.fraction)
    }

    /// Brings the level up to `now_ns` (earlier times change nothing).
    pub fn refill(&mut self, now_ns: u64) {
        if let Some(window) = self.fixed_window_ns {
            if now_ns > self.last_ns {
                if now_ns / window > self.last_ns / window {
                    self.level = self.capacity_units();
                }
                self.last_ns = now_ns;
            }
            return;
        }
        if now_ns > self.last_ns {
            let capacity = self.capacity_units();
            if self.level < capacity {
                let gained = i128::from(now_ns - self.last_ns) * self.rate();
                let level = self.level.saturating_add(gained);
                self.spilled_refill += (level - capacity).max(0);
                self.level = capacity.min(level);
            } else {
                self.spilled_refill += i128::from(now_ns - self.last_ns) * self.rate();
            }
            self.last_ns = now_ns;
        }
    }

    /// Serves `fraction_milli`‰ of the limit from `now_ns` on (refilling at the old rate
    /// first); the level is cut to the new capacity.
    pub fn set_fraction(&mut self, fraction_milli: u32, now_ns: u64) {
        self.refill(now_ns);
        self.fraction = fraction_milli.max(1);
        self.level = self.level.min(self.capacity_units());
    }

    /// Whether `tokens` can be taken now (after [`ContinuousBucket::refill`]).
    pub fn fits(&self, tokens: u64) -> bool {
        self.level >= i128::from(tokens) * UNITS_PER_TOKEN
    }

    /// Whether `tokens` fits in a full bucket at the current fraction.
    pub fn can_ever_fit(&self, tokens: u64) -> bool {
        i128::from(tokens) * UNITS_PER_TOKEN <= self.capacity_units()
    }

    /// Takes `tokens`, going into debt if needed.
    pub fn take(&mut self, tokens: u64) {
        self.level -= i128::from(tokens) * UNITS_PER_TOKEN;
    }

    /// Takes `tokens` but never leaves more debt than one full bucket (how a provider
    /// that counts rejected requests charges them).
    pub fn take_bounded(&mut self, tokens: u64) {
        self.take(tokens);
        self.level = self.level.max(-self.capacity_units());
    }

    /// Gives `tokens` back, up to capacity.
    pub fn give(&mut self, tokens: u64) {
        let units = i128::from(tokens) * UNITS_PER_TOKEN;
        let level = self.level.saturating_add(units);
        self.spilled_refunds += (level - self.capacity_units()).max(0);
        self.level = self.capacity_units().min(level);
    }

    /// Nanoseconds until `tokens` fit at the current rate (0 if now), or `None` if they
    /// never can.
    pub fn wait_ns(&self, tokens: u64) -> Option<u64> {
        if !self.can_ever_fit(tokens) {
            return None;
        }
        let missing = i128::from(tokens) * UNITS_PER_TOKEN - self.level;
        if missing <= 0 {
            return Some(0);
        }
        if let Some(window) = self.fixed_window_ns {
            // Nothing refills before the window turns; then all of it does.
            return Some(window - self.last_ns % window);
        }
        let rate = self.rate();
        // Ceiling division: the first nanosecond at which enough has refilled.
        Some(u64::try_from((missing + rate - 1) / rate).unwrap_or(u64::MAX))
    }

    /// Nanoseconds to refill from empty to full at the current rate (a fixed window:
    /// one window).
    pub fn full_refill_ns(&self) -> u64 {
        if let Some(window) = self.fixed_window_ns {
            return window;
        }
        let rate = self.rate();
        u64::try_from((self.capacity_units() + rate - 1) / rate).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn bucket_refills_exactly_limit_per_minute() {
        let mut b = ContinuousBucket::new(7, 7);
        b.take(7);
        assert_eq!(b.wait_ns(1), Some(8_571_428_572));
        b.refill(8_571_428_571);
        assert!(!b.fits(1));
        b.refill(8_571_428_572);
        assert!(b.fits(1));
        b.refill(60 * SECOND);
        assert!(b.fits(7) && !b.can_ever_fit(8));
        assert_eq!(b.wait_ns(8), None);
    }

    #[test]
    fn bucket_counts_refill_into_a_full_bucket_and_refunds_over_capacity_as_spilled() {
        let mut b = ContinuousBucket::new(60, 10); // one token a second
        b.refill(3 * SECOND); // full all along: three tokens lost
        assert_eq!(
            b.spilled(),
            Spilled {
                refill: 3,
                refunds: 0
            }
        );
        b.take(4);
        b.refill(5 * SECOND); // 6 + 2 = 8: nothing lost
        b.give(5); // 13 > 10: three lost
        assert_eq!(
            b.spilled(),
            Spilled {
                refill: 3,
                refunds: 3
            }
        );
        b.take(1);
        b.refill(7 * SECOND); // 9 + 2 = 11: one lost
        assert_eq!(
            b.spilled(),
            Spilled {
                refill: 4,
                refunds: 3
            }
        );
    }

    #[test]
    fn bucket_fraction_scales_rate_and_capacity() {
        let mut b = ContinuousBucket::new(600, 10);
        b.set_fraction(500, 0);
        assert!(b.fits(5) && !b.fits(6), "capacity cut to half");
        b.take(5);
        assert_eq!(b.wait_ns(1), Some(SECOND / 5));
        assert_eq!(b.full_refill_ns(), SECOND);
        b.set_fraction(1000, 0);
        b.refill(SECOND);
        assert!(b.fits(10));
    }

    #[test]
    fn fixed_window_refills_all_at_once_when_the_window_turns() {
        let mut b = ContinuousBucket::fixed_window(30, 30);
        assert_eq!(b.window_ns(), Some(60 * SECOND));
        b.take(30);
        b.refill(59 * SECOND);
        assert!(!b.fits(1));
        assert_eq!(b.wait_ns(1), Some(SECOND));
        assert_eq!(b.full_in_ns(59 * SECOND), SECOND);
        b.refill(60 * SECOND);
        assert!(b.fits(30) && !b.fits(31));
        assert_eq!(b.remaining_tokens(), 30);
        b.take(10);
        b.refill(90 * SECOND);
        assert_eq!(b.remaining_tokens(), 20);
        assert_eq!(b.full_in_ns(90 * SECOND), 30 * SECOND);
    }

    #[test]
    fn continuous_full_in_is_the_refill_of_what_is_missing() {
        let mut b = ContinuousBucket::new(30, 30);
        b.take(30);
        assert_eq!(b.full_in_ns(0), 60 * SECOND);
        b.refill(20 * SECOND);
        assert_eq!(b.remaining_tokens(), 10);
        assert_eq!(b.full_in_ns(20 * SECOND), 40 * SECOND);
    }

    #[test]
    fn bucket_bounded_debt_and_capped_give() {
        let mut b = ContinuousBucket::new(60, 60);
        b.take_bounded(1000);
        assert_eq!(b.level_tokens(), -60.0);
        b.give(1000);
        assert_eq!(b.level_tokens(), 60.0);
    }
}
