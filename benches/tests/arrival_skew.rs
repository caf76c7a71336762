//! The opening burst's arrival skew. A provider's full bucket starts draining when the
//! first request *arrives*; tollgate's when it *grants* it. When a burst travels slower
//! than the requests after it (fresh connections' handshakes against reused ones), the
//! provider is one refill short of what tollgate counts, and the first request granted
//! on refill is refused. The arrival allowance holds the refill after such a grant.

use std::time::Duration;

use tollgate::catalog::Limits;
use tollgate::limit::{Cost, LimiterConfig, TokenBucketRateLimiter};
use tollgate_sim::{SimConfig, SimLatency, SimLimits, SimProvider, SimRequest};

/// 90 requests against a provider enforcing rpm 60 (full-minute bucket), paced by a
/// limiter at the same limit: the 60 of the opening burst take `first` to arrive (each a
/// fresh connection's handshake), every later one 20 ms (a reused connection). Returns
/// the provider's 429s and the limiter's last grant.
async fn opening_burst(allowance: Duration, first: Duration) -> (u64, Duration) {
    let provider = SimProvider::new(
        SimConfig::new(SimLimits {
            rpm: 60,
            input_tpm: 0,
            output_tpm: 0,
        })
        .with_latency(SimLatency {
            base: Duration::from_millis(100),
            per_output_token: Duration::ZERO,
            refusal: Duration::ZERO,
        }),
    );
    let limiter = TokenBucketRateLimiter::new(
        LimiterConfig::new(
            "m",
            Limits {
                rpm: 60,
                ..Limits::default()
            },
        )
        .with_adaptive(false)
        .with_arrival_allowance(allowance),
    );
    let start = tollgate::clock::now();
    let mut tasks = Vec::new();
    for _ in 0..90 {
        let (provider, limiter) = (provider.clone(), limiter.clone());
        tasks.push(tokio::spawn(async move {
            let mut reservation = limiter.reserve(Cost::call(0, 0)).await.unwrap();
            reservation.mark_sent();
            let at = start.elapsed();
            let on_the_way = if at.is_zero() {
                first
            } else {
                Duration::from_millis(20)
            };
            tokio::time::sleep(on_the_way).await;
            let _ = provider.call(SimRequest::new(0, 0, 0)).await;
            at
        }));
    }
    let mut last = Duration::ZERO;
    for t in tasks {
        last = last.max(t.await.unwrap());
    }
    (provider.stats().rate_limited, last)
}

#[tokio::test(start_paused = true)]
async fn without_an_allowance_a_slow_first_arrival_costs_a_429() {
    let (refused, _) = opening_burst(Duration::ZERO, Duration::from_millis(300)).await;
    assert!(
        refused >= 1,
        "the skew this test guards against did not show"
    );
}

#[tokio::test(start_paused = true)]
async fn the_arrival_allowance_absorbs_a_slow_first_arrival_without_a_429() {
    let (refused, last) = opening_burst(
        LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE,
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(refused, 0);
    // What it costs: the 30 granted on refill go half a second later, once.
    assert_eq!(last, Duration::from_millis(30_500));
}

#[tokio::test(start_paused = true)]
async fn with_no_skew_the_allowance_is_not_needed_and_costs_only_its_half_second() {
    let same = Duration::from_millis(20);
    let (refused, last) = opening_burst(Duration::ZERO, same).await;
    assert_eq!((refused, last), (0, Duration::from_secs(30)));
    let (refused, last) = opening_burst(LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE, same).await;
    assert_eq!((refused, last), (0, Duration::from_millis(30_500)));
}
