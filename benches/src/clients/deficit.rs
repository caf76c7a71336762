//! The float token bucket that the AWS port and AIMD pace with: a caller short of a token
//! takes it anyway and sleeps for the deficit, so concurrent callers queue in order (as
//! the AWS Java SDK's bucket does).

use std::time::Duration;

/// A bucket of `rate` tokens per second holding at most `capacity`; its level may go
/// negative while callers wait out their deficits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeficitBucket {
    pub(crate) rate: f64,
    pub(crate) capacity: f64,
    pub(crate) level: f64,
    last: f64,
}

impl DeficitBucket {
    /// A bucket at `level`, as of time 0.
    pub(crate) fn new(rate: f64, capacity: f64, level: f64) -> Self {
        DeficitBucket {
            rate,
            capacity,
            level,
            last: 0.0,
        }
    }

    /// Brings the level up to `now` (seconds).
    pub(crate) fn refill(&mut self, now: f64) {
        self.level = (self.level + (now - self.last) * self.rate).min(self.capacity);
        self.last = now;
    }

    /// Changes rate and capacity at `now`, cutting the level to the new capacity.
    pub(crate) fn set(&mut self, rate: f64, capacity: f64, now: f64) {
        self.refill(now);
        self.rate = rate;
        self.capacity = capacity;
        self.level = self.level.min(capacity);
    }

    /// Takes one token at `now`; returns how long to sleep before sending.
    pub(crate) fn take(&mut self, now: f64) -> Duration {
        self.refill(now);
        let wait = if self.level >= 1.0 {
            0.0
        } else {
            (1.0 - self.level) / self.rate
        };
        self.level -= 1.0;
        Duration::from_secs_f64(wait)
    }
}

/// Sleeps `wait` unless it is zero.
pub(crate) async fn sleep(wait: Duration) {
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}
