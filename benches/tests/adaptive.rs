//! Benchmark 3, reduced: a provider that publishes L but serves half of it, on tokio's
//! paused clock. Hard assertions on behaviour; nothing here reads the wall clock.

use std::time::Duration;

use tollgate_bench::adaptive::{self, AdaptiveConfig, AdaptiveReport, Scenario};
use tollgate_bench::clients::Strategy;

// A fifth of the benchmark's rate and a third of its callers; the same 10 simulated minutes,
// so that steady state (the second half) spans several of the throttle's probe cycles.
const REDUCED: AdaptiveConfig = AdaptiveConfig {
    published_rpm: 1_200,
    callers: 60,
    seed: 5,
};

/// The targets of BENCHMARKS.md §3: within ±10% of αL inside 60 s, fewer than one 429 a
/// minute in steady state.
fn assert_converged_within_a_minute_quietly(r: &AdaptiveReport) {
    let converge = r.converge.expect("tollgate converges");
    assert!(
        converge <= Duration::from_secs(60),
        "converged after {converge:?}"
    );
    assert!(
        r.steady_429_per_min < 1.0,
        "{} 429s per minute in steady state",
        r.steady_429_per_min
    );
}

#[tokio::test(start_paused = true)]
async fn tollgate_converges_to_half_the_published_rate_within_a_minute() {
    let scenario = Scenario::fixed(0.5, Duration::from_secs(600));
    let r = adaptive::run(Strategy::Tollgate, &scenario, REDUCED).await;
    assert_converged_within_a_minute_quietly(&r);
    assert!(r.goodput >= 0.9, "goodput {}", r.goodput);
}

#[tokio::test(start_paused = true)]
async fn tollgate_converges_within_a_minute_after_a_step_down_and_recovers_after_the_step_up() {
    let step = adaptive::scenarios()
        .into_iter()
        .find(|s| s.name.starts_with("step"))
        .expect("the step scenario");
    let r = adaptive::run(Strategy::Tollgate, &step, REDUCED).await;
    assert_converged_within_a_minute_quietly(&r);
    assert!(r.recover.is_some(), "never found the full rate again");
}

#[tokio::test(start_paused = true)]
async fn naive_retry_never_converges_it_floods() {
    let scenario = Scenario::fixed(0.5, Duration::from_secs(120));
    let r = adaptive::run(Strategy::Naive, &scenario, REDUCED).await;
    assert_eq!(r.converge, None);
    assert!(r.sent_ratio > 1.5, "sent {} of αL", r.sent_ratio);
}

#[test]
fn convergence_is_the_start_of_the_first_window_run_in_band() {
    // 20/s for 30 s, then 5/s: target 5/s converges when windows hold only 5/s.
    let per_second: Vec<u32> = (0..200).map(|s| if s < 30 { 20 } else { 5 }).collect();
    let at = adaptive::converge(&per_second, Duration::ZERO, Duration::from_secs(200), 5.0);
    assert_eq!(at, Some(Duration::from_secs(30)));
    let never = adaptive::converge(&per_second, Duration::ZERO, Duration::from_secs(200), 20.0);
    assert_eq!(never, None);
}
