//! A circuit breaker per model: after a run (or a high rate) of failures, calls fail fast
//! with [`Error::CircuitOpen`] instead of queueing behind a provider that is down; after
//! a cool-off one probe goes through, and its outcome closes or re-opens the circuit.
//!
//! Only failures that say the *provider* is unwell count: 5xx, 529 and timeouts. A 429 is
//! the rate limiter's business, and a 4xx is the caller's.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock;

use tokio::time::Instant;

use super::verdict::{FailureContext, Health, verdict};
use crate::error::{Error, Result};

/// When a breaker opens and how long it stays open.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the circuit.
    pub consecutive_failures: u32,
    /// Alternatively: this failure rate over the last [`BreakerConfig::window`] outcomes
    /// opens it (once the window is full).
    pub failure_rate: f64,
    /// Outcomes considered for the rate.
    pub window: usize,
    /// How long the circuit stays open before a probe.
    pub cool_off: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: 5,
            failure_rate: 0.5,
            window: 20,
            cool_off: Duration::from_secs(30),
        }
    }
}

#[derive(Debug)]
enum Phase {
    Closed,
    Open {
        until: Instant,
    },
    /// One probe may go; `probe_since` is when the current probe went (a probe whose
    /// outcome never comes back, e.g. a cancelled call, frees the slot after a cool-off).
    HalfOpen {
        probe_since: Option<Instant>,
    },
}

#[derive(Debug)]
struct BreakerState {
    phase: Phase,
    consecutive: u32,
    recent: VecDeque<bool>,
}

/// One model's circuit breaker; clones share it.
#[derive(Clone)]
pub struct CircuitBreaker {
    model_id: Arc<str>,
    config: BreakerConfig,
    state: Arc<Mutex<BreakerState>>,
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("model_id", &self.model_id)
            .field("state", &self.lock().phase)
            .finish()
    }
}

impl CircuitBreaker {
    /// A closed breaker for `model_id`.
    pub fn new(model_id: impl Into<String>, config: BreakerConfig) -> Self {
        CircuitBreaker {
            model_id: Arc::from(model_id.into()),
            config,
            state: Arc::new(Mutex::new(BreakerState {
                phase: Phase::Closed,
                consecutive: 0,
                recent: VecDeque::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BreakerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fails fast while the circuit is open, without taking the probe slot (used before
    /// waiting for the limiter).
    pub fn peek(&self) -> Result<()> {
        let s = self.lock();
        match s.phase {
            Phase::Open { until } if clock::now() < until => {
                Err(self.open_error(until - clock::now()))
            }
            _ => Ok(()),
        }
    }

    /// Whether a call may go now; in half-open state only one probe may, and this call
    /// becomes it.
    pub fn check(&self) -> Result<()> {
        let mut s = self.lock();
        let now = clock::now();
        match s.phase {
            Phase::Closed => Ok(()),
            Phase::Open { until } if now < until => Err(self.open_error(until - now)),
            Phase::Open { .. } | Phase::HalfOpen { probe_since: None } => {
                s.phase = Phase::HalfOpen {
                    probe_since: Some(now),
                };
                Ok(())
            }
            Phase::HalfOpen {
                probe_since: Some(t),
            } if now.duration_since(t) >= self.config.cool_off => {
                s.phase = Phase::HalfOpen {
                    probe_since: Some(now),
                };
                Ok(())
            }
            Phase::HalfOpen {
                probe_since: Some(t),
            } => Err(self.open_error(self.config.cool_off.saturating_sub(now.duration_since(t)))),
        }
    }

    /// Whether the circuit is open (failing fast) now.
    pub fn is_open(&self) -> bool {
        matches!(self.lock().phase, Phase::Open { until } if clock::now() < until)
    }

    fn open_error(&self, retry_in: Duration) -> Error {
        Error::CircuitOpen {
            model_id: self.model_id.to_string(),
            retry_in,
        }
    }

    /// Records an attempt's outcome (only health-relevant failures count against it, as
    /// the failure's [`Verdict`](super::Verdict) says).
    pub fn record(&self, outcome: &Result<(), &Error>) {
        self.observe(match outcome {
            Ok(()) => None,
            Err(e) => Some(verdict(e, &FailureContext::default()).health),
        });
    }

    /// Records an attempt: `None` for an answer, else what its failure's verdict says
    /// about the model's health.
    pub(crate) fn observe(&self, failure: Option<Health>) {
        let failed = failure == Some(Health::Failing);
        if failure.is_some() && !failed {
            // A 4xx or 429 says nothing about health; release a probe slot if it held one.
            let mut s = self.lock();
            if let Phase::HalfOpen {
                probe_since: Some(_),
            } = s.phase
            {
                s.phase = Phase::HalfOpen { probe_since: None };
            }
            return;
        }
        let mut s = self.lock();
        s.recent.push_back(failed);
        while s.recent.len() > self.config.window {
            s.recent.pop_front();
        }
        if failed {
            s.consecutive += 1;
        } else {
            s.consecutive = 0;
        }
        let rate_tripped = s.recent.len() >= self.config.window
            && s.recent.iter().filter(|f| **f).count() as f64
                >= self.config.failure_rate * self.config.window as f64;
        s.phase = match (&s.phase, failed) {
            (Phase::HalfOpen { .. }, false) => {
                s.recent.clear();
                Phase::Closed
            }
            (Phase::HalfOpen { .. }, true) => Phase::Open {
                until: clock::now() + self.config.cool_off,
            },
            (_, true) if s.consecutive >= self.config.consecutive_failures || rate_tripped => {
                Phase::Open {
                    until: clock::now() + self.config.cool_off,
                }
            }
            (Phase::Open { until }, _) => Phase::Open { until: *until },
            _ => Phase::Closed,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ProviderError;

    fn server() -> Error {
        ProviderError::server(503).into()
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_opens_after_a_run_of_failures_and_probes_after_cool_off() {
        let b = CircuitBreaker::new(
            "m",
            BreakerConfig {
                consecutive_failures: 3,
                ..BreakerConfig::default()
            },
        );
        for _ in 0..3 {
            b.check().unwrap();
            b.record(&Err(&server()));
        }
        assert!(matches!(b.check(), Err(Error::CircuitOpen { .. })));
        tokio::time::sleep(Duration::from_secs(30)).await;
        b.check().unwrap(); // the probe
        assert!(
            matches!(b.check(), Err(Error::CircuitOpen { .. })),
            "one probe at a time"
        );
        b.record(&Ok(()));
        b.check().unwrap();
        b.check().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_failed_probe_reopens() {
        let b = CircuitBreaker::new(
            "m",
            BreakerConfig {
                consecutive_failures: 1,
                ..BreakerConfig::default()
            },
        );
        b.record(&Err(&server()));
        tokio::time::sleep(Duration::from_secs(30)).await;
        b.check().unwrap();
        b.record(&Err(&server()));
        assert!(b.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_opens_on_a_failure_rate_and_ignores_429s() {
        let b = CircuitBreaker::new(
            "m",
            BreakerConfig {
                consecutive_failures: 100,
                failure_rate: 0.5,
                window: 4,
                ..BreakerConfig::default()
            },
        );
        let limited: Error = ProviderError::RateLimited { retry_after: None }.into();
        for _ in 0..10 {
            b.record(&Err(&limited));
        }
        assert!(!b.is_open());
        // Half of the last four outcomes failed; the failure that fills the window opens it.
        for failed in [false, true, false, true] {
            let error = server();
            b.record(&if failed { Err(&error) } else { Ok(()) });
        }
        assert!(b.is_open());
    }
}
