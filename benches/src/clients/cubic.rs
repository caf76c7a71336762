//! A port of the AWS SDKs' adaptive retry mode (client-side rate limiting with CUBIC),
//! written from the published algorithm: a token bucket of one token per request, off until
//! the first throttle; every response updates a smoothed measure of the sending rate; a
//! throttle sets the rate to `β ×` the rate in use and remembers it as `W_max`; successes
//! grow it along `C·(t − K)³ + W_max`, `K = ∛(W_max·(1 − β)/C)`; the rate never exceeds
//! twice the measured sending rate. Requests only: the SDK knows no token limits.
//!
//! One liberty: a caller that finds the bucket short takes its token at once and sleeps
//! for the deficit (as the Java SDK does), so concurrent callers queue behind each other.

use std::fmt;
use std::sync::Mutex;

use tollgate::clock;

use tokio::time::Instant;

use super::deficit::{self, DeficitBucket};

/// `β`: the multiplier applied to the rate on a throttle.
pub const BETA: f64 = 0.7;
/// `C`: how fast the rate grows back (CUBIC's scale constant).
pub const SCALE_CONSTANT: f64 = 0.4;
/// Weight of the newest half-second in the measured sending rate.
pub const SMOOTH: f64 = 0.8;
/// The lowest fill rate, requests per second.
pub const MIN_FILL_RATE: f64 = 0.5;
/// The smallest bucket, requests.
pub const MIN_CAPACITY: f64 = 1.0;
/// How much the rate may exceed the measured sending rate.
pub const MAX_RATE_ADJUST_SCALE: f64 = 2.0;
/// The width of a sending-rate measurement bucket, seconds.
pub const TIME_BUCKET: f64 = 0.5;

/// The adaptive-mode client rate limiter.
pub struct CubicPacer {
    epoch: Instant,
    state: Mutex<State>,
}

struct State {
    enabled: bool,
    /// `fill_rate`, `max_capacity` and `current_capacity` of the SDK's bucket.
    bucket: DeficitBucket,
    measured_rate: f64,
    last_rate_bucket: f64,
    request_count: f64,
    w_max: f64,
    k: f64,
    last_throttle: f64,
}

impl fmt::Debug for CubicPacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("CubicPacer")
            .field("enabled", &s.enabled)
            .field("fill_rate", &s.bucket.rate)
            .finish()
    }
}

fn zero_point(w_max: f64) -> f64 {
    (w_max * (1.0 - BETA) / SCALE_CONSTANT).cbrt()
}

impl CubicPacer {
    /// The SDK's starting state: bucket off, rates at the minimum.
    pub fn new() -> Self {
        CubicPacer {
            epoch: clock::now(),
            state: Mutex::new(State {
                enabled: false,
                bucket: DeficitBucket::new(MIN_FILL_RATE, MIN_CAPACITY, 0.0),
                measured_rate: 0.0,
                last_rate_bucket: 0.0,
                request_count: 0.0,
                w_max: MIN_FILL_RATE,
                k: zero_point(MIN_FILL_RATE),
                last_throttle: 0.0,
            }),
        }
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// Takes a token, sleeping for the deficit if the bucket is short (and it is on).
    pub async fn acquire(&self) {
        let wait = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if !s.enabled {
                return;
            }
            let now = self.now();
            s.bucket.take(now)
        };
        deficit::sleep(wait).await;
    }

    /// Every response updates the rate: `throttled` for a throttling error (429).
    pub fn on_response(&self, throttled: bool) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        let measured = s.record_send(now);
        let new_rate = if throttled {
            let rate_to_use = if s.enabled {
                measured.min(s.bucket.rate)
            } else {
                measured
            };
            s.w_max = rate_to_use;
            s.k = zero_point(rate_to_use);
            s.last_throttle = now;
            s.enabled = true;
            rate_to_use * BETA
        } else {
            SCALE_CONSTANT * (now - s.last_throttle - s.k).powi(3) + s.w_max
        };
        let rate = new_rate.min(MAX_RATE_ADJUST_SCALE * measured);
        s.set_rate(rate, now);
    }
}

impl Default for CubicPacer {
    fn default() -> Self {
        Self::new()
    }
}

impl State {
    fn set_rate(&mut self, rate: f64, now: f64) {
        self.bucket
            .set(rate.max(MIN_FILL_RATE), rate.max(MIN_CAPACITY), now);
    }

    /// The smoothed sending rate, measured in half-second buckets.
    fn record_send(&mut self, now: f64) -> f64 {
        let bucket = (now / TIME_BUCKET).floor() * TIME_BUCKET;
        self.request_count += 1.0;
        if bucket > self.last_rate_bucket {
            let rate = self.request_count / (bucket - self.last_rate_bucket);
            self.measured_rate = rate * SMOOTH + self.measured_rate * (1.0 - SMOOTH);
            self.request_count = 0.0;
            self.last_rate_bucket = bucket;
        }
        self.measured_rate
    }
}
