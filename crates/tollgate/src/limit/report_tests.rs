//! Header reports read in whatever order answers come back (`State::on_report`), on a
//! paused clock against a model of the provider's bucket.
//!
//! The provider here is a continuous bucket that admits a request when it *arrives* and
//! reports `floor(level)` left, as llmock and the real APIs do. Twenty requests are
//! granted at once; they reach the provider in one order and their answers come back in
//! another. Whatever the orders, the limiter must then grant exactly what the provider
//! has left, and the next request when the provider has room again: never earlier (a
//! 429), never later (a grant counted twice).
//!
//! Then a 429's `retry-after`: the wait of a lone call's retry, whatever the throttle.

use std::time::Duration;

use tokio::time::Instant;

use super::{Feedback, LimiterConfig, TokenBucketRateLimiter};
use crate::catalog::{Dimension, Limits};
use crate::clock;
use crate::limit::Cost;

const MS: u64 = 1_000_000;

/// The provider's requests bucket: continuous, full at the start, `floor(level)` reported.
struct Provider {
    level: f64,
    capacity: f64,
    per_ns: f64,
    at_ns: u64,
}

impl Provider {
    fn new(rpm: u64, taken_already: u64) -> Self {
        Provider {
            level: (rpm - taken_already) as f64,
            capacity: rpm as f64,
            per_ns: rpm as f64 / 60e9,
            at_ns: 0,
        }
    }

    fn refill(&mut self, now_ns: u64) {
        let gained = now_ns.saturating_sub(self.at_ns) as f64 * self.per_ns;
        self.level = (self.level + gained).min(self.capacity);
        self.at_ns = self.at_ns.max(now_ns);
    }

    /// Admits one request arriving at `now_ns`; `None` is a 429.
    fn admit(&mut self, now_ns: u64) -> Option<u64> {
        self.refill(now_ns);
        // A hair of slack for the float model's own rounding, not for the limiter's.
        (self.level >= 1.0 - 1e-9).then(|| {
            self.level -= 1.0;
            self.level.max(0.0).floor() as u64
        })
    }
}

/// A permutation of `0..n` from a seed (xorshift; `seed` 0 is the identity).
fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if seed == 0 {
        return order;
    }
    let mut x = seed;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// What happened after the reordered burst.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Grants available at once after every answer came back.
    immediate: usize,
    /// When the request after those was granted (ms since the start).
    next_at_ms: f64,
    /// Whether the provider admitted every request the limiter granted.
    no_429: bool,
}

/// Twenty requests granted at t = 0 reach the provider in `arrival` order (one every
/// 10 ms) and are answered in `answer` order (one every 10 ms from 300 ms), each answer
/// reporting what the provider had left when it admitted that request.
fn burst(
    catalog_rpm: u64,
    provider_rpm: u64,
    taken_already: u64,
    arrival: &[usize],
    answer: &[usize],
) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
        .block_on(async {
            let limiter = TokenBucketRateLimiter::new(
                LimiterConfig::new(
                    "m",
                    Limits {
                        rpm: catalog_rpm,
                        ..Limits::default()
                    },
                )
                .with_adaptive(false)
                .with_arrival_allowance(Duration::ZERO),
            );
            let start = clock::now();
            let ns = |at: Instant| u64::try_from((at - start).as_nanos()).expect("ns");
            let mut provider = Provider::new(provider_rpm, taken_already);
            let mut no_429 = true;
            let mut marks = Vec::new();
            for _ in 0..arrival.len() {
                let mut r = limiter
                    .try_reserve(Cost::call(0, 0))
                    .expect("the burst fits");
                r.mark_sent();
                marks.push(limiter.send_mark());
            }
            let mut remaining = vec![0; arrival.len()];
            for (k, &request) in arrival.iter().enumerate() {
                let admitted = provider.admit(k as u64 * 10 * MS);
                no_429 &= admitted.is_some();
                remaining[request] = admitted.unwrap_or(0);
            }
            for (k, &request) in answer.iter().enumerate() {
                tokio::time::sleep_until(start + Duration::from_millis(300 + 10 * k as u64)).await;
                limiter.feedback(Feedback::Reported {
                    dimension: Dimension::Requests,
                    limit: Some(provider_rpm),
                    remaining: Some(remaining[request]),
                    reset_in: None,
                    since: Some(marks[request]),
                });
            }
            let mut immediate = 0;
            while let Ok(mut r) = limiter.try_reserve(Cost::call(0, 0)) {
                r.mark_sent();
                immediate += 1;
                no_429 &= provider.admit(ns(clock::now())).is_some();
            }
            let mut next = limiter.reserve(Cost::call(0, 0)).await.expect("fits");
            next.mark_sent();
            let next_ns = ns(clock::now());
            no_429 &= provider.admit(next_ns).is_some();
            Outcome {
                immediate,
                next_at_ms: next_ns as f64 / MS as f64,
                no_429,
            }
        })
}

/// rpm 30: after the burst of 20 (answers done by 0.5 s) the provider has 10.25 left, so
/// 10 go at once and the next at 2.0 s, when the provider's 0.25 has grown to 1.
const EXPECTED: Outcome = Outcome {
    immediate: 10,
    next_at_ms: 2000.0,
    no_429: true,
};

#[test]
fn reports_of_a_burst_admitted_in_reverse_grant_order_count_no_grant_twice() {
    let reverse: Vec<usize> = (0..20).rev().collect();
    let identity: Vec<usize> = (0..20).collect();
    assert_eq!(burst(30, 30, 0, &reverse, &identity), EXPECTED);
    assert_eq!(burst(30, 30, 0, &reverse, &reverse), EXPECTED);
    assert_eq!(burst(30, 30, 0, &identity, &reverse), EXPECTED);
}

#[test]
fn reports_of_a_burst_in_random_orders_let_the_next_grant_land_when_the_provider_has_room() {
    for seed in 1..=40u64 {
        let arrival = permutation(20, seed);
        let answer = permutation(20, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        assert_eq!(
            burst(30, 30, 0, &arrival, &answer),
            EXPECTED,
            "seed {seed}: arrival {arrival:?}, answers {answer:?}"
        );
    }
}

#[test]
fn a_catalog_at_twice_the_served_limit_is_corrected_by_the_limit_header_whatever_the_order() {
    // The catalog says 60; the provider serves 30 and says so in every answer. The bucket
    // shrinks to 30 keeping the 20 taken, so again 10 at once and the next at 2.0 s.
    for seed in [0u64, 3, 17, 29] {
        let arrival = permutation(20, seed);
        let answer = permutation(20, seed ^ 0xabcd);
        assert_eq!(burst(60, 30, 0, &arrival, &answer), EXPECTED, "seed {seed}");
    }
}

#[test]
fn a_provider_that_has_less_than_we_thought_lowers_the_bucket_to_it() {
    // Someone else took 10 before we started: the provider has 30 - 10 - 20 = 0 (plus
    // its refill) after our burst. The reports say so, whatever the order: nothing is
    // granted at once, and the next goes when one has refilled at the provider (2.0 s).
    for seed in [0u64, 5, 11] {
        let arrival = permutation(20, seed);
        let answer = permutation(20, seed + 100);
        assert_eq!(
            burst(30, 30, 10, &arrival, &answer),
            Outcome {
                immediate: 0,
                next_at_ms: 2000.0,
                no_429: true,
            },
            "seed {seed}"
        );
    }
}

/// Grants one request at once on `limiter` and marks it sent.
fn send_one(limiter: &TokenBucketRateLimiter) {
    limiter
        .try_reserve(Cost::call(0, 0))
        .expect("ready")
        .mark_sent();
}

#[tokio::test(start_paused = true)]
async fn a_lone_calls_429_retry_after_is_when_its_retry_is_granted_even_throttled() {
    // rpm 30 (a unit every 2 s), the throttle on: each 429 slows the refill to 0.8, so a
    // refill takes 2.5 s; the provider said 2 s, and nothing else of ours is in flight.
    let limiter = TokenBucketRateLimiter::new(LimiterConfig::new(
        "m",
        Limits {
            rpm: 30,
            ..Limits::default()
        },
    ));
    let start = clock::now();
    let wait = Some(Duration::from_secs(2));
    send_one(&limiter);
    limiter.feedback(Feedback::RateLimited { retry_after: wait });
    for again in 1..=3u64 {
        limiter
            .reserve(Cost::call(0, 0))
            .await
            .expect("fits")
            .mark_sent();
        assert_eq!(start.elapsed(), Duration::from_secs(2 * again));
        limiter.feedback(Feedback::RateLimitedAgain { retry_after: wait });
    }
    assert!(limiter.throttle_factor() < 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_429_while_others_are_in_flight_empties_the_requests_bucket() {
    // Five granted since the last refusal: requests still on their way may take what the
    // provider will have in 2 s, so the refusal empties the bucket (and pauses 2 s);
    // the next request waits for a whole unit at the throttled rate (2.5 s).
    let limiter = TokenBucketRateLimiter::new(LimiterConfig::new(
        "m",
        Limits {
            rpm: 30,
            ..Limits::default()
        },
    ));
    let start = clock::now();
    for _ in 0..5 {
        send_one(&limiter);
    }
    limiter.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(2)),
    });
    limiter
        .reserve(Cost::call(0, 0))
        .await
        .expect("fits")
        .mark_sent();
    assert_eq!(start.elapsed(), Duration::from_millis(2500));
}
