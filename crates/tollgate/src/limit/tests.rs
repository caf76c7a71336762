//! Property tests of the limiter's invariants on a paused clock.

use std::time::Duration;

use crate::clock;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

use super::{Cost, LimiterConfig, Priority, TokenBucketRateLimiter};
use crate::catalog::Dimension;
use crate::catalog::Limits;

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
}

/// Runs `arrivals` (delay before arriving, input tokens, output tokens) against a limiter
/// and returns each grant's time (ns since start) and cost.
fn simulate(limits: Limits, arrivals: Vec<(u64, u64, u64)>) -> Vec<(u64, Cost)> {
    let arrivals = arrivals
        .into_iter()
        .map(|(delay, input, output)| (delay, input, output, Priority::Default))
        .collect();
    simulate_classes(limits, LimiterConfig::DEFAULT_AGING, arrivals)
        .into_iter()
        .map(|(at, cost, _, _)| (at, cost))
        .collect()
}

/// As [`simulate`], each arrival with its class; returns each grant's time, cost, class
/// and arrival index.
fn simulate_classes(
    limits: Limits,
    aging: Duration,
    arrivals: Vec<(u64, u64, u64, Priority)>,
) -> Vec<(u64, Cost, Priority, usize)> {
    paused_runtime().block_on(async move {
        let limiter = TokenBucketRateLimiter::new(
            LimiterConfig::new("p", limits)
                .with_adaptive(false)
                .with_aging(aging),
        );
        let start = clock::now();
        let mut tasks = Vec::new();
        let mut at = 0;
        for (i, (delay_ms, input, output, priority)) in arrivals.into_iter().enumerate() {
            at += delay_ms;
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until(start + Duration::from_millis(at)).await;
                let cost = Cost::call(input, output);
                let mut r = limiter
                    .reserve_with(cost, priority)
                    .await
                    .expect("fits the bucket");
                r.mark_sent();
                (
                    u64::try_from(start.elapsed().as_nanos()).unwrap(),
                    cost,
                    priority,
                    i,
                )
            }));
        }
        let mut grants = Vec::new();
        for t in tasks {
            grants.push(t.await.expect("task"));
        }
        grants.sort_by_key(|g| g.0);
        grants
    })
}

fn class() -> impl Strategy<Value = Priority> {
    prop::sample::select(Priority::ALL.to_vec())
}

/// Over any window W, admitted ≤ capacity + rate · W on `dimension`.
fn assert_window_bound(
    grants: &[(u64, Cost)],
    limit: u64,
    dimension: Dimension,
) -> Result<(), TestCaseError> {
    for i in 0..grants.len() {
        let mut admitted = 0u128;
        for j in i..grants.len() {
            admitted += u128::from(grants[j].1.on(dimension));
            let window_ns = u128::from(grants[j].0 - grants[i].0);
            // capacity + rate · W, in tokens × 60e9 to stay in integers.
            let bound = u128::from(limit) * 60_000_000_000 + u128::from(limit) * window_ns;
            prop_assert!(
                admitted * 60_000_000_000 <= bound,
                "limit {} admitted {} in {} ns",
                limit,
                admitted,
                window_ns
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        // A fixed seed: the same cases on every run, so the suite is deterministic.
        rng_seed: RngSeed::Fixed(0x7011_6a7e),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Over any window W, what was admitted is at most capacity + rate · W, on every
    /// dimension (here with full-minute capacity, so capacity = limit).
    #[test]
    fn admitted_in_any_window_is_at_most_capacity_plus_rate_times_window(
        rpm in 1u64..30,
        tpm in 600u64..5_000,
        output_tpm in 200u64..2_000,
        arrivals in prop::collection::vec((0u64..3_000, 0u64..400, 0u64..200), 1..40),
    ) {
        let limits = Limits { rpm, tpm, output_tpm, ..Limits::default() };
        let grants = simulate(limits, arrivals);
        let dims = [(rpm, Dimension::Requests), (tpm, Dimension::Tokens), (output_tpm, Dimension::OutputTokens)];
        for (limit, dimension) in dims {
            for i in 0..grants.len() {
                let mut admitted = 0u128;
                for j in i..grants.len() {
                    admitted += u128::from(grants[j].1.on(dimension));
                    let window_ns = u128::from(grants[j].0 - grants[i].0);
                    // capacity + rate · W, in tokens × 60e9 to stay in integers.
                    let bound = u128::from(limit) * 60_000_000_000 + u128::from(limit) * window_ns;
                    prop_assert!(admitted * 60_000_000_000 <= bound,
                        "limit {} admitted {} in {} ns", limit, admitted, window_ns);
                }
            }
        }
    }

    /// Grants come out in arrival order when every arrival is distinct in time.
    #[test]
    fn grants_follow_arrival_order(
        arrivals in prop::collection::vec((1u64..2_000, 0u64..300, 0u64..100), 1..30),
    ) {
        let limits = Limits { rpm: 5, tpm: 1_000, ..Limits::default() };
        let costs: Vec<Cost> = arrivals.iter().map(|a| Cost::call(a.1, a.2)).collect();
        let grants = simulate(limits, arrivals);
        // Sorting by grant time is stable, and ties keep spawn order: equal sequences
        // mean nobody overtook anybody.
        let granted: Vec<Cost> = grants.iter().map(|g| g.1).collect();
        prop_assert_eq!(granted, costs);
    }

    /// Whatever the mix of classes and the aging bound, grants never exceed capacity +
    /// rate · W in any window W, and every waiter is granted.
    #[test]
    fn priorities_conserve_capacity(
        rpm in 1u64..30,
        tpm in 600u64..5_000,
        aging_ms in prop::sample::select(vec![0u64, 500, 5_000, 30_000, u64::MAX]),
        arrivals in prop::collection::vec((0u64..3_000, 0u64..400, 0u64..200, class()), 1..40),
    ) {
        let n = arrivals.len();
        let limits = Limits { rpm, tpm, ..Limits::default() };
        let grants = simulate_classes(limits, Duration::from_millis(aging_ms), arrivals);
        prop_assert_eq!(grants.len(), n);
        let grants: Vec<(u64, Cost)> = grants.iter().map(|g| (g.0, g.1)).collect();
        assert_window_bound(&grants, rpm, Dimension::Requests)?;
        assert_window_bound(&grants, tpm, Dimension::Tokens)?;
    }

    /// Within each class, grants come out in arrival order, whatever the other classes
    /// do and whatever the aging bound.
    #[test]
    fn each_class_is_fifo(
        aging_ms in prop::sample::select(vec![0u64, 2_000, 30_000, u64::MAX]),
        arrivals in prop::collection::vec((1u64..2_000, 0u64..300, 0u64..100, class()), 1..30),
    ) {
        let limits = Limits { rpm: 5, tpm: 1_000, ..Limits::default() };
        let grants = simulate_classes(limits, Duration::from_millis(aging_ms), arrivals);
        for p in Priority::ALL {
            let order: Vec<usize> = grants.iter().filter(|g| g.2 == p).map(|g| g.3).collect();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(order, sorted, "class {}", p);
        }
    }
}

#[test]
fn held_counts_the_reservations_alive_and_returns_to_zero_however_they_end() {
    let limiter = TokenBucketRateLimiter::new(
        LimiterConfig::new(
            "p",
            Limits {
                rpm: 100,
                ..Limits::default()
            },
        )
        .with_adaptive(false),
    );
    let held = |l: &TokenBucketRateLimiter| l.snapshot().held;
    let cost = Cost::call(1, 1);
    let dropped = limiter.try_reserve(cost).unwrap();
    let mut sent = limiter.try_reserve(cost).unwrap();
    let settled = limiter.try_reserve(cost).unwrap();
    let released = limiter.try_reserve(cost).unwrap();
    assert_eq!(held(&limiter), 4);
    drop(dropped);
    sent.mark_sent();
    drop(sent);
    settled.settle(&crate::Usage::default(), super::AccountingRule::default());
    assert_eq!(held(&limiter), 1);
    released.release();
    assert_eq!(held(&limiter), 0);
    // Clones of the limiter are not reservations; a `reserve` future counts until it
    // ends, granted (then as its reservation) or not.
    let clone = limiter.clone();
    assert_eq!(held(&clone), 0);
    let pending = clone.reserve(cost);
    assert_eq!(held(&limiter), 1);
    drop(pending);
    assert_eq!(held(&limiter), 0);
}

#[tokio::test(start_paused = true)]
async fn a_limiter_that_would_wait_says_so_as_itself_not_as_a_provider_429() {
    let limiter = TokenBucketRateLimiter::new(
        LimiterConfig::new(
            "m",
            Limits {
                rpm: 1,
                ..Limits::default()
            },
        )
        .with_adaptive(false),
    );
    let cost = Cost::call(1, 1);
    limiter.try_reserve(cost).unwrap().mark_sent();
    let error = crate::Error::from(limiter.try_reserve(cost).unwrap_err());
    match &error {
        // A minute's refill of the one request (plus the arrival allowance's hold).
        crate::Error::WouldWait { ready_in } => assert!(*ready_in >= Duration::from_secs(60)),
        other => panic!("expected the limiter's own WouldWait, got {other:?}"),
    }
    assert!(
        !error.is_retryable(),
        "nothing was sent: no provider refused"
    );
    assert_eq!(error.kind(), "would_wait");
}
