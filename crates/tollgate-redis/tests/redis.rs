//! What the Redis backend does beyond the shared acceptance suite: many "processes"
//! (limiters on their own connections) sharing one quota, one round trip per
//! reservation, keys, failure policy, reconnects, and `Models` configuration.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Harness, admin, fresh_prefix, redis_url};
use tollgate::catalog::Limits;
use tollgate::limit::{Cost, Feedback, LimiterBackend, LimiterConfig, Priority, TryReserveError};
use tollgate::{Dimension, Error};
use tollgate_redis::{FailurePolicy, RedisClock, RedisConfig, RedisLimiter};

fn rpm(n: u64) -> LimiterConfig {
    LimiterConfig::new(
        "m",
        Limits {
            rpm: n,
            ..Limits::default()
        },
    )
    .with_adaptive(false)
    // Timings here are the bucket's arithmetic alone: no arrival allowance.
    .with_arrival_allowance(Duration::ZERO)
}

fn one() -> Cost {
    Cost::call(0, 0)
}

/// Two harnesses on one prefix and one epoch: two processes' views of one quota, each
/// with its own connection.
fn two_processes() -> Option<(Harness, Harness)> {
    let url = redis_url()?;
    let prefix = fresh_prefix();
    let epoch = tollgate::clock::now();
    let config = RedisConfig::new(url)
        .with_key_prefix(prefix)
        .with_clock(RedisClock::Tokio { epoch });
    Some((Harness::with(config.clone()), Harness::with(config)))
}

/// How long `try_reserve` says one request would wait (it must not fit now).
async fn ready_in(l: &RedisLimiter) -> Duration {
    match l.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::WouldWait { ready_in }) => ready_in,
        other => panic!("expected WouldWait, got {other:?}"),
    }
}

async fn drain(l: &RedisLimiter, n: usize) {
    for _ in 0..n {
        let mut r = l.try_reserve(one(), Priority::default()).await.unwrap();
        r.mark_sent();
    }
}

#[tokio::test(start_paused = true)]
async fn one_round_trip_per_reservation() {
    let Some(h) = Harness::new() else { return };
    let l = h.limiter(LimiterConfig::new(
        "m",
        Limits {
            rpm: 100,
            tpm: 100_000,
            input_tpm: 50_000,
            output_tpm: 50_000,
        },
    ));
    for _ in 0..20 {
        let mut r = l
            .reserve(Cost::call(100, 100), Priority::default())
            .await
            .unwrap();
        r.mark_sent();
    }
    for _ in 0..10 {
        let mut r = l
            .try_reserve(Cost::call(100, 100), Priority::default())
            .await
            .unwrap();
        r.mark_sent();
    }
    assert_eq!(l.round_trips(), 30, "four dimensions, one call each time");
}

#[tokio::test(start_paused = true)]
async fn fifo_across_processes_is_arrival_order_at_redis() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let a = p1.limiter(rpm(60));
    let b = p2.limiter(rpm(60));
    drain(&a, 30).await;
    drain(&b, 30).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6 {
        let l = if i % 2 == 0 { a.clone() } else { b.clone() };
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = l.reserve(one(), Priority::default()).await.unwrap();
            r.mark_sent();
            log.lock().unwrap().push((i, start.elapsed()));
        }));
        p1.flush().await;
        p2.flush().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let expected: Vec<_> = (0..6)
        .map(|i| (i, Duration::from_secs(i as u64 + 1)))
        .collect();
    assert_eq!(log, expected);
}

#[tokio::test(start_paused = true)]
async fn a_429_seen_by_one_process_slows_every_process() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let config = rpm(60).with_adaptive(true);
    let a = p1.limiter(config.clone());
    let b = p2.limiter(config);
    drain(&b, 60).await;
    let start = tollgate::clock::now();
    a.feedback(Feedback::RateLimited { retry_after: None });
    p1.flush().await;
    let snap = b.snapshot().await.unwrap();
    assert!((snap.rate_factor - 0.8).abs() < 1e-9, "{snap:?}");
    let mut r = b.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    assert_eq!(start.elapsed(), Duration::from_millis(1250));
}

#[tokio::test(start_paused = true)]
async fn retry_after_seen_by_one_process_pauses_every_process() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let a = p1.limiter(rpm(60));
    let b = p2.limiter(rpm(60));
    let start = tollgate::clock::now();
    a.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(7)),
    });
    p1.flush().await;
    let mut r = b.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    assert_eq!(start.elapsed(), Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn provider_remaining_header_lowers_the_shared_bucket() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let a = p1.limiter(rpm(60));
    let b = p2.limiter(rpm(60));
    a.feedback(Feedback::Remaining {
        dimension: Dimension::Requests,
        remaining: 2,
    });
    p1.flush().await;
    drain(&b, 2).await;
    assert_eq!(ready_in(&b).await, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_provider_report_ends_the_arrival_allowance_hold_for_every_process() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let allowed = || rpm(60).with_arrival_allowance(LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE);
    let (a, b) = (p1.limiter(allowed()), p2.limiter(allowed()));
    drain(&a, 60).await;
    // Out of a full bucket: the refill waits the allowance.
    assert_eq!(ready_in(&b).await, Duration::from_millis(1500));
    // The provider says what it has left: it has seen a request, its refill runs.
    a.feedback(Feedback::Remaining {
        dimension: Dimension::Requests,
        remaining: 0,
    });
    p1.flush().await;
    assert_eq!(ready_in(&b).await, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_waiter_dropped_while_its_booking_is_on_the_way_gives_it_back() {
    let Some(h) = Harness::new() else { return };
    let l = h.limiter(rpm(10));
    for _ in 0..5 {
        let fut = l.reserve(one(), Priority::default());
        // Polled once (the booking leaves), then dropped before the answer.
        let _ = tokio::time::timeout(Duration::ZERO, fut).await;
    }
    h.flush().await;
    let snap = l.snapshot().await.unwrap();
    assert_eq!(snap.levels, [(Dimension::Requests, 10.0, 10)]);
}

#[tokio::test(start_paused = true)]
async fn keys_carry_the_model_as_hash_tag_and_expire_when_idle() {
    let Some(url) = redis_url() else { return };
    let prefix = fresh_prefix();
    let h = Harness::with(
        RedisConfig::new(url.clone())
            .with_key_prefix(prefix.clone())
            .with_clock(RedisClock::Tokio {
                epoch: tollgate::clock::now(),
            }),
    );
    let l = h.limiter(rpm(60));
    assert_eq!(l.key(), format!("{prefix}:{{m}}:lim"));
    drain(&l, 30).await;
    let mut admin = admin(&url).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(l.key())
        .query_async(&mut admin)
        .await
        .unwrap();
    // 30 of 60 missing refill in 30 s; the key lives that long plus a second.
    assert!((30_000..=31_000).contains(&pttl), "PTTL {pttl}");
}

/// A port nothing listens on, held (bound, not listening) for as long as the value
/// lives, so that no concurrent test's server can take it.
fn closed_port() -> tollgate_testkit::provider::RefusingPort {
    tollgate_testkit::provider::RefusingPort::bind()
}

#[tokio::test]
async fn unreachable_redis_fails_closed_with_a_typed_error_naming_redis_and_the_model() {
    let closed = closed_port();
    let url = format!("redis://127.0.0.1:{}/", closed.port());
    let h = Harness::with(RedisConfig::new(url).with_call_timeout(Duration::from_millis(300)));
    let l = h.limiter(rpm(60));
    match l.reserve(one(), Priority::default()).await {
        Err(Error::LimiterUnavailable {
            backend, model_id, ..
        }) => assert_eq!((backend.as_str(), model_id.as_str()), ("redis", "m")),
        other => panic!("expected LimiterUnavailable, got {other:?}"),
    }
    match l.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::Unavailable(Error::LimiterUnavailable { backend, .. })) => {
            assert_eq!(backend, "redis")
        }
        other => panic!("expected LimiterUnavailable, got {other:?}"),
    }
    assert!(l.failures() >= 2);
}

#[tokio::test]
async fn local_fallback_is_opt_in_and_serves_at_limit_over_expected_processes() {
    let closed = closed_port();
    let url = format!("redis://127.0.0.1:{}/", closed.port());
    let h = Harness::with(
        RedisConfig::new(url)
            .with_call_timeout(Duration::from_millis(300))
            .with_failure_policy(FailurePolicy::LocalFallback {
                expected_processes: 4,
            }),
    );
    let l = h.limiter(rpm(40));
    for _ in 0..10 {
        let mut r = l.try_reserve(one(), Priority::default()).await.unwrap();
        r.mark_sent();
    }
    match l.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::WouldWait { .. }) => {}
        other => panic!("expected WouldWait from the local share, got {other:?}"),
    }
}

#[tokio::test]
async fn server_clock_refills_by_redis_time() {
    let Some(url) = redis_url() else { return };
    let h = Harness::with(RedisConfig::new(url).with_key_prefix(fresh_prefix()));
    // 600 rpm with a one-second burst: 10 at once, then one every 100 ms.
    let l = h.limiter(rpm(600).with_burst(tollgate::limit::Burst::Seconds(1)));
    let mut starts = Vec::new();
    for _ in 0..13 {
        let (mut r, booking) = l.reserve_booked(one(), Priority::default()).await.unwrap();
        r.mark_sent();
        starts.push(booking.unwrap().start_us);
    }
    let span = starts[12] - starts[0];
    assert!(
        (290_000..=310_000).contains(&span),
        "13 reservations spanned {span} µs of Redis TIME"
    );
}

#[tokio::test]
async fn models_builder_runs_some_models_on_redis_and_others_in_process() {
    let Some(url) = redis_url() else { return };
    let prefix = fresh_prefix();
    let redis = tollgate_redis::RedisLimiters::new(
        RedisConfig::new(url.clone()).with_key_prefix(prefix.clone()),
    )
    .unwrap();
    // Only the limiters are used: the catalog is told the key, no provider is linked.
    let known = tollgate::catalog::KnownProviders::empty().with("openai", "tollgate-openai", true);
    let catalog = tollgate::Catalog::from_toml_str_with(
        r#"
[models.shared]
provider = "openai"
credential = "k"
max_output_tokens = 100
rpm = 60

[models.local]
provider = "openai"
credential = "k"
max_output_tokens = 100
rpm = 60
"#,
        &known,
    )
    .unwrap();
    let models = tollgate::Models::builder()
        .catalog(catalog)
        .limiter_backend_for(["shared"], redis)
        .build()
        .unwrap();
    for id in ["shared", "local"] {
        let mut r = models
            .limiter(id)
            .unwrap()
            .reserve(one(), Priority::default())
            .await
            .unwrap();
        r.mark_sent();
    }
    let mut admin = admin(&url).await;
    let exists = |key: String| redis::cmd("EXISTS").arg(key).clone();
    let shared: i64 = exists(format!("{prefix}:{{shared}}:lim"))
        .query_async(&mut admin)
        .await
        .unwrap();
    let local: i64 = exists(format!("{prefix}:{{local}}:lim"))
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!((shared, local), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn successes_after_a_429_bring_the_shared_factor_back_up() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let config = rpm(60).with_adaptive(true);
    let a = p1.limiter(config.clone());
    let b = p2.limiter(config);
    let start = tollgate::clock::now();
    a.feedback(Feedback::RateLimited { retry_after: None });
    p1.flush().await;
    // b learns the factor from its next reservation's answer (after 1.25 s: the 429 left
    // nothing on requests, which refill at 0.8 a second).
    let mut r = b.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    // 5 s without a decrease, then 10 % of the gap closed per second: 5 s in, half.
    tokio::time::sleep_until(start + Duration::from_secs(10)).await;
    b.feedback(Feedback::Success);
    p2.flush().await;
    let snap = a.snapshot().await.unwrap();
    assert!((snap.rate_factor - 0.9).abs() < 1e-9, "{snap:?}");
}

fn requests_limit(limit: Option<u64>) -> Feedback {
    Feedback::Reported {
        dimension: Dimension::Requests,
        limit,
        remaining: None,
        reset_in: None,
        since: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_limit_learned_by_one_process_paces_every_process() {
    let Some((p1, p2)) = two_processes() else {
        return;
    };
    let (a, b) = (p1.limiter(rpm(60)), p2.limiter(rpm(60)));
    drain(&b, 20).await;
    // a's answer says the provider allows 30 a minute: every process's bucket is 30, with
    // what b took kept out of it.
    a.feedback(requests_limit(Some(30)));
    p1.flush().await;
    let snap = b.snapshot().await.unwrap();
    assert_eq!(snap.levels, [(Dimension::Requests, 10.0, 30)]);
    drain(&b, 10).await;
    assert_eq!(ready_in(&b).await, Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_learned_limit_is_kept_in_the_hash_for_ten_minutes_and_dropped_when_raised() {
    let Some(url) = redis_url() else { return };
    let h = Harness::with(
        RedisConfig::new(url.clone())
            .with_key_prefix(fresh_prefix())
            .with_clock(RedisClock::Tokio {
                epoch: tollgate::clock::now(),
            }),
    );
    let l = h.limiter(rpm(60));
    let mut admin = admin(&url).await;
    l.feedback(requests_limit(Some(30)));
    h.flush().await;
    let (limit, cap, pttl): (Option<String>, Option<String>, i64) = redis::pipe()
        .hget(l.key(), "limit:rpm")
        .hget(l.key(), "cap:rpm")
        .pttl(l.key())
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!((limit.as_deref(), cap.as_deref()), (Some("30"), Some("30")));
    // The buckets are full, yet the key outlives them: absent, it would mean the catalog's
    // limit.
    assert!(pttl > 600_000 - 1000, "PTTL {pttl}");
    // The provider says it allows the catalog's limit again: nothing learned remains, and
    // the key expires once the 30 left have refilled to 60.
    l.feedback(requests_limit(Some(60)));
    h.flush().await;
    let (limit, pttl): (Option<String>, i64) = redis::pipe()
        .hget(l.key(), "limit:rpm")
        .pttl(l.key())
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(limit, None);
    assert!((30_000..=31_000).contains(&pttl), "PTTL {pttl}");
}

#[tokio::test(start_paused = true)]
async fn each_feedback_is_at_most_one_script_call() {
    let Some(h) = Harness::new() else { return };
    let l = h.limiter(rpm(60).with_adaptive(true));
    let calls = |f: Feedback| {
        let l = l.clone();
        let h = &h;
        async move {
            let before = l.round_trips();
            l.feedback(f);
            h.flush().await;
            l.round_trips() - before
        }
    };
    let pause = Some(Duration::from_secs(1));
    // A 429 throttles, empties requests and pauses in one call.
    assert_eq!(calls(Feedback::RateLimited { retry_after: pause }).await, 1);
    assert_eq!(calls(Feedback::Overloaded { retry_after: pause }).await, 1);
    assert_eq!(
        calls(Feedback::RateLimitedAgain { retry_after: pause }).await,
        1
    );
    // Without a retry-after too: it marks the last refusal (as in process).
    assert_eq!(
        calls(Feedback::RateLimitedAgain { retry_after: None }).await,
        1
    );
    assert_eq!(calls(requests_limit(Some(30))).await, 1);
    // A dimension the catalog does not limit has nothing to report to.
    let tokens = Feedback::Remaining {
        dimension: Dimension::Tokens,
        remaining: 5,
    };
    assert_eq!(calls(tokens).await, 0);
}
