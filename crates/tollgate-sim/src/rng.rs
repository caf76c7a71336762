//! A small seeded random number generator, so that a simulation is the same on every run
//! and every platform.

/// SplitMix64: a seeded, deterministic generator with good statistical quality for
/// simulation (not for anything secret). The same seed gives the same sequence forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = u128::from(hi - lo) + 1;
        // Multiply-high maps 64 random bits onto the span with negligible bias.
        lo + u64::try_from((u128::from(self.next_u64()) * span) >> 64).unwrap_or(0)
    }

    /// A uniform float in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A new generator for a sub-stream (e.g. one per caller), independent of the rest.
    pub fn fork(&mut self) -> SimRng {
        SimRng::new(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let a: Vec<u64> = {
            let mut r = SimRng::new(7);
            (0..100).map(|_| r.range(200, 8000)).collect()
        };
        let b: Vec<u64> = {
            let mut r = SimRng::new(7);
            (0..100).map(|_| r.range(200, 8000)).collect()
        };
        assert_eq!(a, b);
        assert!(a.iter().all(|x| (200..=8000).contains(x)));
        let mut r = SimRng::new(1);
        let hits = (0..100_000).filter(|_| r.chance(0.05)).count();
        assert!((4_500..5_500).contains(&hits), "{hits}");
        assert_eq!(r.range(5, 5), 5);
    }
}
