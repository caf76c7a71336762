//! Benchmark 2, reduced: tollgate against a provider with exactly the limits it was told,
//! on tokio's paused clock. Hard assertions on behaviour; nothing here reads the wall clock.

use std::time::Duration;

use tollgate_bench::clients::{RequestOutcome, Strategy};
use tollgate_bench::pacing::{self, PacingConfig};

// As many callers as the benchmark (fewer would not saturate profile B's refunded output
// limit), for 3 simulated minutes instead of 10.
const REDUCED: PacingConfig = PacingConfig {
    callers: 200,
    duration: Duration::from_secs(180),
    batch: 0,
    oversize_at: Duration::from_secs(10),
    seed: 11,
};

#[tokio::test(start_paused = true)]
async fn tollgate_uses_the_whole_limit_without_a_single_429_on_both_profiles() {
    for profile in pacing::profiles() {
        for strategy in [Strategy::Tollgate, Strategy::TollgateFixed] {
            let r = pacing::run(strategy, &profile, REDUCED).await;
            let at = format!("{} / {}", profile.name, strategy.name());
            assert_eq!(r.rate_limited, 0, "{at}: 429s");
            assert!(
                r.goodput_of_possible >= 0.98,
                "{at}: goodput {} of the most possible",
                r.goodput_of_possible
            );
            // What the provider's own bucket spilled is lost to any client; tollgate's
            // pacing loses nothing beyond it.
            let accounted = r.goodput_of_possible + r.spilled.0 + r.spilled.1;
            assert!(
                accounted >= 0.995,
                "{at}: goodput {} + spilled {:?} leaves {} unexplained",
                r.goodput_of_possible,
                r.spilled,
                1.0 - accounted
            );
            assert!(
                r.window_ratio <= 1.0,
                "{at}: 60 s window {}",
                r.window_ratio
            );
            assert_eq!(r.fifo_violations, 0, "{at}");
            let pacing = r.pacing_error.expect("tollgate's grants are replayed");
            assert!(
                pacing.waited > 0,
                "{at}: nothing waited, the run is too small"
            );
            assert!(
                pacing.min_ns >= 0 && pacing.max_ns <= 2_000_000,
                "{at}: a grant landed outside [t, t + 2 ms] of the analytic time: {pacing:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_oversize_request_fails_at_once_and_is_never_sent() {
    for profile in pacing::profiles() {
        let r = pacing::run(Strategy::Tollgate, &profile, REDUCED).await;
        assert_eq!(
            r.oversize.outcome,
            Some(RequestOutcome::TooLarge),
            "{}",
            profile.name
        );
        assert_eq!(r.oversize.sends, 0, "{}", profile.name);
        assert_eq!(r.oversize.after, Duration::ZERO, "{}", profile.name);
    }
}

#[tokio::test(start_paused = true)]
async fn the_simulation_tells_clients_apart_naive_retry_is_refused_and_sends_the_oversize() {
    let profile = &pacing::profiles()[0];
    let r = pacing::run(Strategy::Naive, profile, REDUCED).await;
    assert!(r.rate_limited > 0);
    assert!(
        r.window_ratio > 1.0,
        "naive sends more than the limit allows"
    );
    assert!(r.oversize.sends > 0);
}

#[tokio::test(start_paused = true)]
async fn a_fixed_batch_finishes_close_to_the_analytic_bound() {
    let profile = &pacing::profiles()[0];
    let config = PacingConfig {
        batch: 150,
        ..REDUCED
    };
    let batch = pacing::run(Strategy::Tollgate, profile, config)
        .await
        .batch
        .expect("a batch run");
    let makespan = batch.makespan.expect("the batch finishes");
    assert_eq!(batch.failed, 0);
    assert!(makespan >= batch.bound, "{makespan:?} < {:?}", batch.bound);
    // At most the bound plus the slowest answer (300 ms + 15 ms × 4,096 tokens).
    assert!(
        makespan <= batch.bound + Duration::from_millis(300 + 15 * 4_096),
        "{makespan:?} vs bound {:?}",
        batch.bound
    );
}
