//! governor as a user would put it in front of a provider: one direct limiter per published
//! limit (burst = the provider's bucket), checked one after the other with `check_n`,
//! sleeping until each conforms (`until_n_ready`'s loop, on tokio's clock so the
//! simulation's paused clock drives it).

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use tokio::time::Instant;
use tollgate::clock;
use tollgate_sim::{SimCapacity, SimCharge, SimDimension, SimLimits, SimRequest};

/// governor's clock trait over tokio's clock: time since creation.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    epoch: Instant,
}

impl TokioClock {
    /// A clock starting now.
    pub fn new() -> Self {
        TokioClock {
            epoch: clock::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Duration>>;

/// One governor limiter per published limit.
pub struct GovernorPacer {
    clock: TokioClock,
    limiters: Vec<(SimDimension, Limiter)>,
}

impl fmt::Debug for GovernorPacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GovernorPacer")
            .field("limits", &self.limiters.len())
            .finish_non_exhaustive()
    }
}

fn nonzero(n: u64) -> NonZeroU32 {
    NonZeroU32::new(u32::try_from(n).unwrap_or(u32::MAX).max(1)).unwrap_or(NonZeroU32::MIN)
}

impl GovernorPacer {
    /// Limiters for `limits` with bursts of `capacity`.
    pub fn new(limits: SimLimits, capacity: SimCapacity) -> Self {
        let clock = TokioClock::new();
        let limiters = SimDimension::ALL
            .iter()
            .zip([limits.rpm, limits.input_tpm, limits.output_tpm])
            .filter(|(_, limit)| *limit > 0)
            .map(|(d, limit)| {
                let quota =
                    Quota::per_minute(nonzero(limit)).allow_burst(nonzero(capacity.tokens(limit)));
                (*d, RateLimiter::direct_with_clock(quota, clock))
            })
            .collect();
        GovernorPacer { clock, limiters }
    }

    /// Waits until every limiter admits `request`'s share; false if one never can.
    pub async fn acquire(&self, request: SimRequest) -> bool {
        let charge = SimCharge {
            requests: 1,
            input_tokens: request.input_tokens,
            output_tokens: request.max_output,
        };
        for (d, limiter) in &self.limiters {
            let Some(n) = NonZeroU32::new(u32::try_from(charge.on(*d)).unwrap_or(u32::MAX)) else {
                continue;
            };
            loop {
                match limiter.check_n(n) {
                    Err(_insufficient) => return false,
                    Ok(Ok(())) => break,
                    Ok(Err(not_until)) => {
                        tokio::time::sleep(not_until.wait_time_from(self.clock.now())).await;
                    }
                }
            }
        }
        true
    }
}
