//! The retry policy: which failures are retried, how long to wait, and when to stop.
//!
//! Waits are full-jitter exponential back-off (a uniform draw between zero and
//! `base · 2ⁿ`, capped), so callers refused together spread out instead of returning
//! together. A provider's `retry-after` *is* the wait: the provider knows when it has
//! room, and the retry reserves on the model's limiter again, whose queue spreads
//! callers refused together (the limiter is told the same `retry-after`, so its pause
//! ends and one request refills exactly then). One longer than
//! [`RetryPolicy::max_retry_after`] is not waited out: the call fails with the error,
//! which carries the wait, so the caller can reschedule.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How the pipeline retries.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries per call when the call is not made for a [`super::JobContext`].
    pub default_retries: u32,
    /// The back-off's first step.
    pub base_delay: Duration,
    /// The back-off's ceiling (before jitter).
    pub max_delay: Duration,
    /// The longest `retry-after` honoured; longer waits fail the call with the error.
    pub max_retry_after: Duration,
    /// Seed for the jitter; `None` draws one at random. Tests set it for determinism.
    pub jitter_seed: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            default_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            jitter_seed: None,
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0 for the first retry): the provider's
    /// `retry_after` when it sent one, else full jitter over
    /// `min(max_delay, base_delay · 2^retry)`. `None` when `retry_after` is longer than
    /// [`RetryPolicy::max_retry_after`].
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>, draw: f64) -> Option<Duration> {
        if retry_after.is_some_and(|ra| ra > self.max_retry_after) {
            return None;
        }
        let ceiling = self
            .base_delay
            .saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX))
            .min(self.max_delay);
        Some(retry_after.unwrap_or_else(|| ceiling.mul_f64(draw.clamp(0.0, 1.0))))
    }
}

/// A hash of `content` that is the same on every run and platform (FNV-1a), for salting
/// jitter.
pub(crate) fn content_hash<H: std::hash::Hash + ?Sized>(content: &H) -> u64 {
    let mut h = Fnv::default();
    content.hash(&mut h);
    h.finish()
}

/// A small deterministic generator for jitter draws (xorshift64*).
#[derive(Debug, Clone)]
pub(crate) struct Jitter(u64);

impl Jitter {
    /// Seeded from the policy's seed (or randomly), mixed with the job id, the model and
    /// a hash of what the call sends ([`content_hash`]): with a seed, the same call
    /// draws the same waits on every run, in whatever order concurrent calls started.
    pub(crate) fn new(seed: Option<u64>, job: &str, model: &str, content: u64) -> Self {
        let base = seed.unwrap_or_else(|| {
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        });
        let mut h = Fnv::default();
        h.write(job.as_bytes());
        h.write_u8(0xff);
        h.write(model.as_bytes());
        h.write_u64(content);
        Jitter((base ^ h.finish()) | 1)
    }

    /// A draw in [0, 1).
    pub(crate) fn draw(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        if self.0 == 0 {
            self.0 = 0xcbf2_9ce4_8422_2325;
        }
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_is_full_jitter_capped_or_exactly_the_retry_after() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, None, 0.0), Some(Duration::ZERO));
        assert_eq!(p.delay(0, None, 0.5), Some(Duration::from_millis(250)));
        assert_eq!(
            p.delay(3, None, 0.999_999),
            Some(Duration::from_millis(4000).mul_f64(0.999_999))
        );
        assert_eq!(p.delay(20, None, 1.0), Some(p.max_delay));
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(2)), 0.1),
            Some(Duration::from_secs(2))
        );
        // Exactly the provider's wait, not the back-off, however far the back-off grew.
        assert_eq!(
            p.delay(5, Some(Duration::from_secs(2)), 0.99),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            p.delay(0, Some(Duration::from_millis(10)), 0.99),
            Some(Duration::from_millis(10))
        );
        assert_eq!(p.delay(0, Some(Duration::from_secs(61)), 0.1), None);
    }

    #[test]
    fn jitter_is_deterministic_per_seed_and_differs_per_salt() {
        let a: Vec<f64> = (0..4)
            .map({
                let mut j = Jitter::new(Some(7), "job-1", "m", 0);
                move |_| j.draw()
            })
            .collect();
        let b: Vec<f64> = (0..4)
            .map({
                let mut j = Jitter::new(Some(7), "job-1", "m", 0);
                move |_| j.draw()
            })
            .collect();
        let c: Vec<f64> = (0..4)
            .map({
                let mut j = Jitter::new(Some(7), "job-2", "m", 0);
                move |_| j.draw()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|x| (0.0..1.0).contains(x)));
    }
}
