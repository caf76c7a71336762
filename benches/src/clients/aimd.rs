//! Additive increase, multiplicative decrease of a token bucket's rate: the textbook
//! controller. Starts at the published rate; a 429 halves the rate (once per
//! [`HOLDOFF`]); every second without one adds [`INCREASE_PER_SECOND`] of the published
//! rate, up to the published rate. Requests only.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use tollgate::clock;

use tokio::time::Instant;

use super::deficit::{self, DeficitBucket};

/// The multiplier applied to the rate on a 429.
pub const DECREASE: f64 = 0.5;
/// The increase per second without a 429, as a fraction of the published rate.
pub const INCREASE_PER_SECOND: f64 = 0.02;
/// 429s within this long of a decrease count as the same event.
pub const HOLDOFF: Duration = Duration::from_secs(1);
/// The lowest rate, as a fraction of the published rate.
pub const MIN_FRACTION: f64 = 0.01;

/// A token bucket whose rate AIMD controls.
pub struct AimdPacer {
    published: f64,
    epoch: Instant,
    state: Mutex<State>,
}

struct State {
    bucket: DeficitBucket,
    last_increase: f64,
    last_decrease: Option<f64>,
}

impl fmt::Debug for AimdPacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AimdPacer")
            .field("published", &self.published)
            .field("rate", &self.rate())
            .finish()
    }
}

impl AimdPacer {
    /// A full bucket (one second) at the published rate, requests per second.
    pub fn new(published_per_second: f64) -> Self {
        AimdPacer {
            published: published_per_second,
            epoch: clock::now(),
            state: Mutex::new(State {
                bucket: DeficitBucket::new(
                    published_per_second,
                    published_per_second.max(1.0),
                    published_per_second.max(1.0),
                ),
                last_increase: 0.0,
                last_decrease: None,
            }),
        }
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// The current rate, requests per second.
    pub fn rate(&self) -> f64 {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bucket
            .rate
    }

    /// Takes a token, sleeping for the deficit if the bucket is short.
    pub async fn acquire(&self) {
        let wait = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = self.now();
            s.bucket.take(now)
        };
        deficit::sleep(wait).await;
    }

    /// A success: additive increase for the time since the last one.
    pub fn on_success(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        let dt = now - s.last_increase;
        let rate = (s.bucket.rate + self.published * INCREASE_PER_SECOND * dt).min(self.published);
        s.set_rate(rate, now);
        s.last_increase = now;
    }

    /// A 429: multiplicative decrease.
    pub fn on_rate_limited(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        if s.last_decrease
            .is_some_and(|t| now - t < HOLDOFF.as_secs_f64())
        {
            return;
        }
        let rate = (s.bucket.rate * DECREASE).max(self.published * MIN_FRACTION);
        s.set_rate(rate, now);
        s.last_decrease = Some(now);
        s.last_increase = now;
    }
}

impl State {
    /// A bucket holds one second at the current rate.
    fn set_rate(&mut self, rate: f64, now: f64) {
        self.bucket.set(rate, rate.max(1.0), now);
    }
}
