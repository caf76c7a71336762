//! A port of the pacing in the OpenAI cookbook's `api_request_parallel_processor.py`:
//! float capacities that refill continuously up to one minute's limit, a request goes when
//! every capacity covers it (input tokens plus `max_tokens`, never refunded), and after any
//! 429 every caller pauses [`PAUSE_AFTER_RATE_LIMIT`].
//!
//! The script checks capacity every [`LOOP_INTERVAL`]; this port sleeps until the computed
//! moment instead (the same decisions, without a million wake-ups). Like the script, it
//! waits forever for a request larger than a minute's limit.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use tollgate::clock;

use tokio::time::Instant;
use tollgate_sim::{SimLimits, SimRequest};

/// The script's `seconds_to_pause_after_rate_limit_error`.
pub const PAUSE_AFTER_RATE_LIMIT: Duration = Duration::from_secs(15);
/// The script's `seconds_to_sleep_each_loop`: the finest wait.
pub const LOOP_INTERVAL: Duration = Duration::from_millis(1);

/// The cookbook's pacer, generalized to one capacity per published limit.
pub struct CookbookPacer {
    per_minute: [f64; 3],
    epoch: Instant,
    state: Mutex<State>,
}

struct State {
    available: [f64; 3],
    last_update: f64,
    last_rate_limit: Option<f64>,
}

impl fmt::Debug for CookbookPacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CookbookPacer")
            .field("per_minute", &self.per_minute)
            .finish_non_exhaustive()
    }
}

impl CookbookPacer {
    /// Full capacities for `limits` (0 = not tracked).
    pub fn new(limits: SimLimits) -> Self {
        let per_minute = [
            limits.rpm as f64,
            limits.input_tpm as f64,
            limits.output_tpm as f64,
        ];
        CookbookPacer {
            per_minute,
            epoch: clock::now(),
            state: Mutex::new(State {
                available: per_minute,
                last_update: 0.0,
                last_rate_limit: None,
            }),
        }
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// Waits until `request` fits and nobody is paused, then takes its capacity.
    pub async fn acquire(&self, request: SimRequest) {
        let need = [1.0, request.input_tokens as f64, request.max_output as f64];
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let now = self.now();
                let elapsed = now - s.last_update;
                for i in 0..3 {
                    s.available[i] = (s.available[i] + self.per_minute[i] * elapsed / 60.0)
                        .min(self.per_minute[i]);
                }
                s.last_update = now;
                let paused_until = s
                    .last_rate_limit
                    .map_or(0.0, |t| t + PAUSE_AFTER_RATE_LIMIT.as_secs_f64());
                let limited = |i: usize| self.per_minute[i] > 0.0;
                if now < paused_until {
                    paused_until - now
                } else if (0..3).all(|i| !limited(i) || s.available[i] >= need[i]) {
                    for i in (0..3).filter(|i| limited(*i)) {
                        s.available[i] -= need[i];
                    }
                    return;
                } else {
                    (0..3)
                        .filter(|i| limited(*i))
                        .map(|i| {
                            if need[i] > self.per_minute[i] {
                                60.0 // never fits: the script loops forever
                            } else {
                                (need[i] - s.available[i]).max(0.0) * 60.0 / self.per_minute[i]
                            }
                        })
                        .fold(0.0, f64::max)
                }
            };
            tokio::time::sleep(Duration::from_secs_f64(wait).max(LOOP_INTERVAL)).await;
        }
    }

    /// A 429 arrived: everyone pauses.
    pub fn on_rate_limited(&self) {
        let now = self.now();
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_rate_limit = Some(now);
    }
}
