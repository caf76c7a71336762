//! How long a request body may take to arrive ([`BodyTiming`]).

use std::time::Duration;

/// How long a body may take to arrive: `timeout`, plus one second for every
/// `min_bytes_per_sec` bytes received (Apache's `mod_reqtimeout` rule). A client that
/// sends at least that fast is never cut off; one that trickles slower, or stops, is
/// answered 408 and closed, so it cannot hold a connection slot for long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTiming {
    /// The time allowed before the rate counts.
    pub timeout: Duration,
    /// The slowest sustained rate that keeps extending the deadline (0: none; the
    /// deadline is `timeout` alone).
    pub min_bytes_per_sec: u64,
}

impl BodyTiming {
    /// The defaults: 10 s, extended by a second for every 16 KiB received.
    pub const DEFAULT: BodyTiming = BodyTiming {
        timeout: Duration::from_secs(10),
        min_bytes_per_sec: 16 * 1024,
    };

    /// The time allowed for a body of which `received` bytes have arrived.
    pub(crate) fn allowed(self, received: usize) -> Duration {
        if self.min_bytes_per_sec == 0 {
            return self.timeout;
        }
        let extra = received as f64 / self.min_bytes_per_sec as f64;
        self.timeout + Duration::from_secs_f64(extra)
    }
}

impl Default for BodyTiming {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_timing_extends_the_deadline_by_the_bytes_received_at_the_minimum_rate() {
        let timing = BodyTiming {
            timeout: Duration::from_secs(10),
            min_bytes_per_sec: 1000,
        };
        assert_eq!(timing.allowed(0), Duration::from_secs(10));
        assert_eq!(timing.allowed(5000), Duration::from_secs(15));
        let flat = BodyTiming {
            min_bytes_per_sec: 0,
            ..timing
        };
        assert_eq!(flat.allowed(1 << 20), Duration::from_secs(10));
    }
}
