//! The rate limiter through its public API, on tokio's paused clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::clock;

use tollgate::catalog::Limits;
use tollgate::catalog::RateWindow;
use tollgate::limit::{
    AccountingRule, Burst, Cost, Feedback, LimiterConfig, MAX_PROVIDER_PAUSE, OutputAccounting,
    TokenBucketRateLimiter, TryReserveError,
};
use tollgate::{Dimension, Error, Usage};

// The catalogs here name `fake`: linking its crate registers the key.
use tollgate_fake as _;

/// A limiter whose timings are the bucket's arithmetic alone (no arrival allowance).
fn limiter(limits: Limits) -> TokenBucketRateLimiter {
    TokenBucketRateLimiter::new(exact("m", limits).with_adaptive(false))
}

fn exact(model_id: &str, limits: Limits) -> LimiterConfig {
    LimiterConfig::new(model_id, limits).with_arrival_allowance(Duration::ZERO)
}

fn rpm(n: u64) -> Limits {
    Limits {
        rpm: n,
        ..Limits::default()
    }
}

fn one() -> Cost {
    Cost::call(0, 0)
}

/// PicoClaw: `rpm = 3` and nothing else. The first three calls go at once, then one
/// every 20 seconds exactly: the first of them half a second later, the default arrival
/// allowance (the three of the opening burst may reach the provider that much later than
/// the ones after them).
#[tokio::test(start_paused = true)]
async fn picoclaw_rpm_3_sends_three_at_once_then_one_every_20_seconds() {
    for (config, late) in [
        (LimiterConfig::new("picoclaw", rpm(3)), 500),
        (exact("picoclaw", rpm(3)), 0),
    ] {
        let limiter = TokenBucketRateLimiter::new(config);
        let start = clock::now();
        let mut sent_at = Vec::new();
        for _ in 0..7 {
            let mut reservation = limiter.reserve(Cost::call(500, 200)).await.unwrap();
            reservation.mark_sent();
            sent_at.push(start.elapsed());
        }
        let at = |s: u64| Duration::from_millis(s * 1000 + if s > 0 { late } else { 0 });
        assert_eq!(
            sent_at,
            [at(0), at(0), at(0), at(20), at(40), at(60), at(80)]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn oversize_call_fails_at_once_from_both_forms() {
    let limiter = limiter(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    });
    let start = clock::now();
    let err = limiter.reserve(Cost::call(900, 200)).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO);
    match err {
        Error::TooLargeForBucket {
            model_id,
            dimension,
            needed,
            capacity,
        } => {
            assert_eq!(
                (model_id.as_str(), dimension, needed, capacity),
                ("m", Dimension::Tokens, 1100, 1000)
            );
        }
        other => panic!("expected TooLargeForBucket, got {other:?}"),
    }
    match limiter.try_reserve(Cost::call(900, 200)) {
        Err(TryReserveError::TooLarge(Error::TooLargeForBucket { needed: 1100, .. })) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // A cost that fits the bucket is still served.
    assert!(limiter.try_reserve(Cost::call(900, 100)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn try_reserve_never_waits_and_says_when_to_come_back() {
    let limiter = limiter(rpm(60));
    let held: Vec<_> = (0..60)
        .map(|_| limiter.try_reserve(one()).unwrap())
        .collect();
    let start = clock::now();
    match limiter.try_reserve(one()) {
        Err(TryReserveError::WouldWait { ready_in }) => {
            assert_eq!(ready_in, Duration::from_secs(1))
        }
        other => panic!("expected WouldWait, got {other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    for mut r in held {
        r.mark_sent();
    }
}

#[tokio::test(start_paused = true)]
async fn waiters_are_granted_in_fifo_order() {
    let limiter = limiter(rpm(60));
    let held: Vec<_> = (0..60)
        .map(|_| limiter.try_reserve(one()).unwrap())
        .collect();
    held.into_iter().for_each(|mut r| r.mark_sent());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (limiter, order) = (limiter.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let mut r = limiter.reserve(one()).await.unwrap();
            r.mark_sent();
            order.lock().unwrap().push(i);
        }));
        tokio::task::yield_now().await; // each joins the queue before the next
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
}

#[tokio::test(start_paused = true)]
async fn large_request_is_not_starved_by_a_stream_of_small_ones() {
    let limiter = limiter(Limits {
        tpm: 6000,
        ..Limits::default()
    });
    // Drain the bucket, then queue a request for the whole bucket.
    limiter
        .try_reserve(Cost::call(6000, 0))
        .unwrap()
        .mark_sent();
    let big = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let mut r = limiter.reserve(Cost::call(6000, 0)).await.unwrap();
            r.mark_sent();
            clock::now()
        })
    };
    tokio::task::yield_now().await;
    let start = clock::now();
    // Small requests keep arriving; none may overtake the big one.
    let small = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let mut first_small = None;
            for _ in 0..50 {
                if let Ok(mut r) = limiter.try_reserve(Cost::call(10, 0)) {
                    r.mark_sent();
                    first_small.get_or_insert(clock::now());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            first_small
        })
    };
    let big_at = big.await.unwrap();
    assert_eq!(
        big_at - start,
        Duration::from_secs(60),
        "the big request waits exactly one refill"
    );
    if let Some(first_small) = small.await.unwrap() {
        assert!(
            first_small > big_at,
            "a small request went before the big one"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn wake_up_lands_within_2ms_of_the_analytic_time() {
    // 7 per minute: each token takes 60/7 s, an awkward 8.571428571… s.
    let limiter = limiter(rpm(7));
    for _ in 0..7 {
        limiter.try_reserve(one()).unwrap().mark_sent();
    }
    let start = clock::now();
    for k in 1..=10u32 {
        let mut r = limiter.reserve(one()).await.unwrap();
        r.mark_sent();
        let analytic = Duration::from_secs_f64(60.0 / 7.0 * f64::from(k));
        let actual = start.elapsed();
        assert!(
            actual >= analytic && actual <= analytic + Duration::from_millis(2),
            "grant {k}: {actual:?} vs {analytic:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_a_waiting_reserve_leaves_the_queue_and_lets_the_next_go() {
    let limiter = limiter(Limits {
        tpm: 100,
        ..Limits::default()
    });
    limiter.try_reserve(Cost::call(100, 0)).unwrap().mark_sent();
    // A big waiter at the head, a small one behind it.
    let big = tokio::spawn({
        let limiter = limiter.clone();
        async move {
            limiter
                .reserve(Cost::call(100, 0))
                .await
                .map(|mut r| r.mark_sent())
        }
    });
    tokio::task::yield_now().await;
    let small = tokio::spawn({
        let limiter = limiter.clone();
        async move {
            let mut r = limiter.reserve(Cost::call(10, 0)).await.unwrap();
            r.mark_sent();
            clock::now()
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(limiter.snapshot().queued, 2);
    let start = clock::now();
    tokio::time::sleep(Duration::from_secs(6)).await; // 10 tokens refilled
    big.abort();
    let _ = big.await;
    // The small waiter, now at the head, goes at once.
    assert_eq!(small.await.unwrap() - start, Duration::from_secs(6));
    assert_eq!(limiter.snapshot().queued, 0);
}

#[tokio::test(start_paused = true)]
async fn cancellation_at_every_await_leaks_nothing() {
    let limiter = limiter(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    });
    // Cancel waiters at many points in time; afterwards, the bucket refills to full.
    for round in 0..20u64 {
        let mut handles = Vec::new();
        for _ in 0..5 {
            let limiter = limiter.clone();
            handles.push(tokio::spawn(async move {
                let r = limiter.reserve(Cost::call(150, 50)).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(r); // never sent: refunded
            }));
        }
        tokio::time::sleep(Duration::from_millis(round * 137)).await;
        for h in handles {
            h.abort();
        }
    }
    tokio::time::sleep(Duration::from_secs(61)).await;
    let snapshot = limiter.snapshot();
    assert_eq!(snapshot.queued, 0);
    for (d, level, capacity) in snapshot.levels {
        assert_eq!(level, capacity as f64, "{d:?} leaked");
    }
}

#[tokio::test(start_paused = true)]
async fn a_grant_never_picked_up_is_given_back_when_the_future_is_dropped() {
    use std::future::Future;
    use std::task::{Context, Waker};

    let limiter = limiter(rpm(1));
    limiter.try_reserve(one()).unwrap().mark_sent(); // the bucket is empty for a minute
    let mut waiting = Box::pin(limiter.reserve(one()));
    let polled = waiting
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    assert!(polled.is_pending(), "queued behind the empty bucket");
    tokio::time::sleep(Duration::from_secs(61)).await; // the driver grants it at 60 s
    let snapshot = limiter.snapshot();
    assert_eq!((snapshot.queued, snapshot.grants), (0, 2), "granted");
    assert!(
        limiter.try_reserve(one()).is_err(),
        "held by the unclaimed grant"
    );
    drop(waiting); // never polled again: nothing was sent
    assert!(
        limiter.try_reserve(one()).is_ok(),
        "the unclaimed grant was given back"
    );
}

#[tokio::test(start_paused = true)]
async fn conservation_everything_refunded_leaves_the_bucket_full() {
    let limiter = limiter(Limits {
        rpm: 10,
        tpm: 1000,
        input_tpm: 800,
        output_tpm: 300,
    });
    let held: Vec<_> = (0..4)
        .map(|_| limiter.try_reserve(Cost::call(200, 50)).unwrap())
        .collect();
    drop(held); // none sent
    for (d, level, capacity) in limiter.snapshot().levels {
        assert_eq!(level, capacity as f64, "{d:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn sent_and_dropped_keeps_the_charge_settle_reconciles() {
    let limiter = limiter(Limits {
        tpm: 1000,
        ..Limits::default()
    });
    let level = |l: &TokenBucketRateLimiter| l.snapshot().levels[0].1;
    let mut r = limiter.try_reserve(Cost::call(100, 400)).unwrap();
    r.mark_sent();
    drop(r);
    assert_eq!(level(&limiter), 500.0);
    // Output counted as produced: the unused output limit comes back.
    let mut r = limiter.try_reserve(Cost::call(100, 400)).unwrap();
    r.mark_sent();
    let actual = AccountingRule {
        output: OutputAccounting::Actual,
        ..AccountingRule::default()
    };
    r.settle(
        &Usage {
            input_tokens: 100,
            output_tokens: 50,
            ..Usage::default()
        },
        actual,
    );
    assert_eq!(level(&limiter), 350.0);
    // Underestimated input becomes debt: the next waiter waits longer.
    let mut r = limiter.try_reserve(Cost::call(100, 0)).unwrap();
    r.mark_sent();
    r.settle(
        &Usage {
            input_tokens: 500,
            ..Usage::default()
        },
        actual,
    );
    assert_eq!(level(&limiter), -150.0);
    let start = clock::now();
    limiter
        .reserve(Cost::call(50, 0))
        .await
        .unwrap()
        .mark_sent();
    assert_eq!(start.elapsed(), Duration::from_secs(12)); // 200 tokens at 1000/min
}

#[tokio::test(start_paused = true)]
async fn reservation_is_all_or_nothing_across_dimensions() {
    let limiter = limiter(Limits {
        rpm: 100,
        input_tpm: 1000,
        output_tpm: 100,
        ..Limits::default()
    });
    limiter.try_reserve(Cost::call(0, 100)).unwrap().mark_sent(); // output bucket empty
    assert!(matches!(
        limiter.try_reserve(Cost::call(10, 10)),
        Err(TryReserveError::WouldWait { .. })
    ));
    let levels = limiter.snapshot().levels;
    assert_eq!(
        levels[0],
        (Dimension::Requests, 99.0, 100),
        "requests untouched by the refusal"
    );
    assert_eq!(
        levels[1],
        (Dimension::InputTokens, 1000.0, 1000),
        "input untouched by the refusal"
    );
}

#[tokio::test(start_paused = true)]
async fn burst_seconds_enforces_60_rpm_as_one_per_second() {
    let limiter = TokenBucketRateLimiter::new(
        exact("m", rpm(60))
            .with_burst(Burst::Seconds(1))
            .with_adaptive(false),
    );
    let start = clock::now();
    let mut at = Vec::new();
    for _ in 0..4 {
        limiter.reserve(one()).await.unwrap().mark_sent();
        at.push(start.elapsed().as_secs());
    }
    assert_eq!(at, [0, 1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn a_429_slows_the_refill_for_every_caller_of_the_model() {
    let adaptive = TokenBucketRateLimiter::new(exact("m", rpm(60)));
    for _ in 0..60 {
        adaptive.try_reserve(one()).unwrap().mark_sent();
    }
    adaptive.feedback(Feedback::RateLimited { retry_after: None });
    assert!(adaptive.snapshot().rate_factor < 1.0);
    let other_caller = adaptive.clone();
    let start = clock::now();
    other_caller.reserve(one()).await.unwrap().mark_sent();
    assert!(
        start.elapsed() > Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_pauses_the_model_for_everyone() {
    let limiter = TokenBucketRateLimiter::new(exact("m", rpm(600)));
    limiter.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(7)),
    });
    assert!(matches!(
        limiter.try_reserve(one()),
        Err(TryReserveError::WouldWait { .. })
    ));
    let start = clock::now();
    limiter.reserve(one()).await.unwrap().mark_sent();
    assert_eq!(start.elapsed(), Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn provider_remaining_header_lowers_the_bucket() {
    let limiter = limiter(Limits {
        tpm: 1000,
        ..Limits::default()
    });
    limiter.feedback(Feedback::Remaining {
        dimension: Dimension::Tokens,
        remaining: 100,
    });
    assert_eq!(limiter.snapshot().levels[0].1, 100.0);
    // It never raises the level.
    limiter.feedback(Feedback::Remaining {
        dimension: Dimension::Tokens,
        remaining: 900,
    });
    assert_eq!(limiter.snapshot().levels[0].1, 100.0);
}

#[tokio::test(start_paused = true)]
async fn a_day_of_greedy_traffic_admits_exactly_the_analytic_bound() {
    let limiter = limiter(Limits {
        rpm: 3,
        tpm: 0,
        ..Limits::default()
    });
    let start = clock::now();
    let mut admitted = 0u64;
    while start.elapsed() < Duration::from_secs(24 * 3600) {
        limiter.reserve(one()).await.unwrap().mark_sent();
        admitted += 1;
    }
    // The last grant landed at exactly 24 h: capacity 3 plus 3 per minute for 1440 minutes.
    assert_eq!(start.elapsed(), Duration::from_secs(24 * 3600));
    assert_eq!(admitted, 3 + 3 * 1440);
}

mod admission {
    use super::*;
    use tokio::sync::Semaphore;
    use tollgate::limit::{Admission, LimiterBackend, SemaphoreResource};

    #[tokio::test(start_paused = true)]
    async fn admission_grants_the_reservation_and_permits_together() {
        let limiter = limiter(rpm(60));
        let pool = Arc::new(Semaphore::new(2));
        let admission =
            Admission::new(Arc::new(limiter.clone())).with(SemaphoreResource::new(pool.clone(), 1));
        let grant = admission.admit(one()).await.unwrap();
        assert_eq!(pool.available_permits(), 1);
        assert_eq!(limiter.snapshot().levels[0].1, 59.0);
        drop(grant); // unsent: everything comes back
        assert_eq!(pool.available_permits(), 2);
        assert_eq!(limiter.snapshot().levels[0].1, 60.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_job_holds_none_of_the_resources() {
        let limiter = limiter(rpm(60));
        let pool = Arc::new(Semaphore::new(1));
        let backend: Arc<dyn LimiterBackend> = Arc::new(limiter.clone());
        let admission = Admission::new(backend).with(SemaphoreResource::new(pool.clone(), 1));
        // Someone else holds the only connection.
        let held = pool.clone().try_acquire_owned().unwrap();
        let job = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(one()).await.map(|g| g.into_parts()) }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        // While it waits for the connection, it holds no reservation.
        assert_eq!(limiter.snapshot().levels[0].1, 60.0);
        assert!(!job.is_finished());
        drop(held);
        let (reservation, guards) = job.await.unwrap().unwrap();
        assert_eq!(guards.len(), 1);
        assert_eq!(pool.available_permits(), 0);
        drop((reservation, guards));
        assert_eq!(pool.available_permits(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_waiting_on_the_bucket_holds_no_permit() {
        let limiter = limiter(rpm(1));
        limiter.try_reserve(one()).unwrap().mark_sent();
        let pool = Arc::new(Semaphore::new(1));
        let admission =
            Admission::new(Arc::new(limiter.clone())).with(SemaphoreResource::new(pool.clone(), 1));
        let job = tokio::spawn(async move { admission.admit(one()).await.map(|_| clock::now()) });
        let start = clock::now();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            pool.available_permits(),
            1,
            "no permit is held while waiting for the bucket"
        );
        assert_eq!(job.await.unwrap().unwrap() - start, Duration::from_secs(60));
    }
}

mod fallback {
    use super::*;
    use tollgate::catalog::ModelEntry;
    use tollgate::limit::{FallbackChain, LimiterBackend};
    use tollgate::{Catalog, Models};

    fn chain(limits: &[u64]) -> (FallbackChain, Vec<TokenBucketRateLimiter>) {
        let limiters: Vec<_> = limits.iter().map(|n| limiter(rpm(*n))).collect();
        let candidates = limiters
            .iter()
            .enumerate()
            .map(|(i, l)| {
                (
                    format!("m{i}"),
                    Arc::new(l.clone()) as Arc<dyn LimiterBackend>,
                )
            })
            .collect();
        (FallbackChain::new(candidates), limiters)
    }

    #[tokio::test(start_paused = true)]
    async fn fallback_prefers_the_first_model_that_can_serve_now() {
        let (chain, limiters) = chain(&[1, 10]);
        let first = chain.reserve(one()).await.unwrap();
        assert_eq!((first.model_id.as_str(), first.position), ("m0", 0));
        first.reservation.release();
        limiters[0].try_reserve(one()).unwrap().mark_sent(); // m0 now empty
        let start = clock::now();
        let second = chain.reserve(one()).await.unwrap();
        assert_eq!(second.model_id, "m1", "a busy candidate is skipped at once");
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn fallback_skips_a_candidate_its_429_paused_until_the_retry_after() {
        let (chain, limiters) = chain(&[10, 10]);
        chain.rate_limited("m0", Some(Duration::from_secs(5)));
        assert!(
            limiters[0].try_reserve(one()).is_err(),
            "the limiter is the one that knows m0 is paused"
        );
        assert_eq!(chain.reserve(one()).await.unwrap().model_id, "m1");
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(chain.reserve(one()).await.unwrap().model_id, "m0");
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_last_remaining_candidate_waits() {
        let (chain, limiters) = chain(&[1, 1]);
        for l in &limiters {
            l.try_reserve(one()).unwrap().mark_sent();
        }
        let start = clock::now();
        let grant = chain.reserve(one()).await.unwrap();
        assert_eq!(grant.model_id, "m1");
        assert_eq!(start.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn when_every_candidate_is_paused_the_chain_waits_for_the_first_to_recover() {
        let (chain, _) = chain(&[10, 10]);
        chain.rate_limited("m1", Some(Duration::from_secs(9)));
        chain.rate_limited("m0", Some(Duration::from_secs(4)));
        let start = clock::now();
        let grant = chain.reserve(one()).await.unwrap();
        assert_eq!(
            (grant.model_id.as_str(), start.elapsed()),
            ("m0", Duration::from_secs(4))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fallback_chain_comes_from_the_catalog() {
        let catalog = Catalog::builder()
            .model(
                ModelEntry::new("main", "fake", "a")
                    .with_output_tokens(100, 10)
                    .with_fallbacks(["backup"])
                    .with_limits(rpm(1)),
            )
            .model(
                ModelEntry::new("backup", "fake", "b")
                    .with_output_tokens(100, 10)
                    .with_limits(rpm(5)),
            )
            .build()
            .unwrap();
        let models = Models::builder().catalog(catalog).build().unwrap();
        let chain = models.fallback_chain("main").unwrap();
        assert_eq!(chain.models(), ["main", "backup"]);
        // The chain shares the handle's limiters: draining `main` there is seen here.
        models
            .limiter("main")
            .unwrap()
            .try_reserve(one(), tollgate::limit::Priority::Default)
            .await
            .unwrap()
            .mark_sent();
        assert_eq!(chain.reserve(one()).await.unwrap().model_id, "backup");
    }

    #[tokio::test(start_paused = true)]
    async fn fallback_reports_too_large_when_no_candidate_can_ever_fit() {
        let limiters = [
            limiter(Limits {
                tpm: 100,
                ..Limits::default()
            }),
            limiter(Limits {
                tpm: 50,
                ..Limits::default()
            }),
        ];
        let chain = FallbackChain::new(
            limiters
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    (
                        format!("m{i}"),
                        Arc::new(l.clone()) as Arc<dyn LimiterBackend>,
                    )
                })
                .collect(),
        );
        let err = chain.reserve(Cost::call(500, 0)).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::TooLargeForBucket {
                    needed: 500,
                    capacity: 100,
                    ..
                }
            ),
            "{err}"
        );
        // One that fits only the first is served there.
        assert_eq!(
            chain.reserve(Cost::call(80, 0)).await.unwrap().model_id,
            "m0"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn provider_reporting_nothing_left_without_a_limit_waits_for_our_refill_not_the_reset() {
    let limiter = limiter(Limits {
        tpm: 1000,
        ..Limits::default()
    });
    limiter.feedback(Feedback::Remaining {
        dimension: Dimension::Tokens,
        remaining: 0,
    });
    limiter.feedback(Feedback::Exhausted {
        dimension: Dimension::Tokens,
        reset_in: Duration::from_secs(30),
    });
    let start = clock::now();
    // The provider's bucket is full again in 30 s; 10 tokens have refilled in 0.6 s.
    limiter
        .reserve(Cost::call(10, 0))
        .await
        .unwrap()
        .mark_sent();
    assert_eq!(start.elapsed(), Duration::from_millis(600));
}

/// What the headers of an answer say about requests.
fn reported(limit: Option<u64>, remaining: u64, reset_in: Duration) -> Feedback {
    Feedback::Reported {
        dimension: Dimension::Requests,
        limit,
        remaining: Some(remaining),
        reset_in: Some(reset_in),
        since: None,
    }
}

/// When each of `n` callers, queued at once, is granted.
async fn grant_times(limiter: &TokenBucketRateLimiter, n: usize) -> Vec<Duration> {
    let start = clock::now();
    let times = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (limiter, times) = (limiter.clone(), times.clone());
        tasks.push(tokio::spawn(async move {
            limiter.reserve(one()).await.unwrap().mark_sent();
            times.lock().unwrap().push(start.elapsed());
        }));
        tokio::task::yield_now().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut times = times.lock().unwrap().clone();
    times.sort();
    times
}

#[tokio::test(start_paused = true)]
async fn header_reset_means_bucket_full_not_next_request() {
    // rpm 30, the provider's bucket empty and full again in 60 s: the next request may go
    // after one request has refilled (2 s), not after 60 s.
    let limiter = limiter(rpm(30));
    limiter.feedback(reported(Some(30), 0, Duration::from_secs(60)));
    assert_eq!(grant_times(&limiter, 1).await, [Duration::from_secs(2)]);
}

#[tokio::test(start_paused = true)]
async fn remaining_zero_continuous_allows_next_after_one_unit() {
    // Without a `*-limit` header, our own refill of one unit decides; with one, the
    // provider's rate (`reset / limit`). Either way, queued callers then go one by one,
    // never in a burst after a pause.
    let limiter = limiter(rpm(30));
    limiter.feedback(reported(None, 0, Duration::from_secs(60)));
    let secs = |v: &[u64]| {
        v.iter()
            .map(|s| Duration::from_secs(*s))
            .collect::<Vec<_>>()
    };
    assert_eq!(grant_times(&limiter, 4).await, secs(&[2, 4, 6, 8]));
    // The provider says its limit is 20 a minute, full in 30 s (so 10 were used): one
    // unit refills every 3 s at its rate, and its limit caps ours.
    let limiter = self::limiter(rpm(30));
    limiter.feedback(reported(Some(20), 0, Duration::from_secs(30)));
    let times = grant_times(&limiter, 3).await;
    assert_eq!(times, secs(&[3, 6, 9]));
}

#[tokio::test(start_paused = true)]
async fn remaining_zero_fixed_window_waits_for_reset() {
    let limiter = TokenBucketRateLimiter::new(
        exact("m", rpm(30))
            .with_adaptive(false)
            .with_window(RateWindow::Fixed),
    );
    // 40 s into a one-minute window the provider has nothing left: the window turns in
    // 20 s and nothing goes before. Then the bucket is full again, as the fresh window
    // is, and its allowance may go at once.
    limiter.feedback(reported(Some(30), 0, Duration::from_secs(20)));
    let times = grant_times(&limiter, 31).await;
    assert!(
        times[..30].iter().all(|t| *t == Duration::from_secs(20)),
        "{times:?}"
    );
    // And from then on, full at every turn of the window, nothing in between.
    assert_eq!(times[30], Duration::from_secs(80));
}

#[tokio::test(start_paused = true)]
async fn fixed_window_remaining_is_all_there_is_until_the_reset() {
    // 5 left in a window that turns in 30 s: 5 go now, nothing refills before the turn
    // (a continuous bucket would have let 15 more through by then).
    let limiter = TokenBucketRateLimiter::new(
        exact("m", rpm(30))
            .with_adaptive(false)
            .with_window(RateWindow::Fixed),
    );
    limiter.feedback(reported(Some(30), 5, Duration::from_secs(30)));
    let times = grant_times(&limiter, 6).await;
    assert!(times[..5].iter().all(|t| t.is_zero()), "{times:?}");
    assert_eq!(times[5], Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn a_429_empties_the_request_bucket() {
    let limiter = limiter(rpm(60));
    limiter.feedback(Feedback::RateLimited { retry_after: None });
    assert_eq!(
        grant_times(&limiter, 2).await,
        [Duration::from_secs(1), Duration::from_secs(2)]
    );
}

#[tokio::test(start_paused = true)]
async fn header_never_pauses_longer_than_a_429() {
    // A fixed window that turns in ten minutes (a daily or hourly limit read as one) holds
    // the model back no longer than a 429's `retry-after` can.
    let fixed = TokenBucketRateLimiter::new(
        exact("m", rpm(600))
            .with_adaptive(false)
            .with_window(RateWindow::Fixed),
    );
    fixed.feedback(reported(Some(600), 0, Duration::from_secs(600)));
    assert_eq!(grant_times(&fixed, 1).await, [MAX_PROVIDER_PAUSE]);
    // A continuous bucket whose one unit takes an hour at the provider's rate: the same.
    let continuous = limiter(rpm(600));
    continuous.feedback(reported(Some(1), 0, Duration::from_secs(3600)));
    let times = grant_times(&continuous, 1).await;
    assert_eq!(times, [MAX_PROVIDER_PAUSE]);
}

#[tokio::test(start_paused = true)]
async fn limit_header_caps_the_bucket_but_never_raises_it_above_the_catalog() {
    let limiter = limiter(rpm(60));
    let capacity = |l: &TokenBucketRateLimiter| l.snapshot().levels[0].2;
    let report = |limit| Feedback::Reported {
        dimension: Dimension::Requests,
        limit: Some(limit),
        remaining: None,
        reset_in: None,
        since: None,
    };
    limiter.feedback(report(30));
    assert_eq!(capacity(&limiter), 30);
    assert_eq!(limiter.snapshot().levels[0].1, 30.0);
    limiter.feedback(report(120));
    assert_eq!(capacity(&limiter), 60);
}
