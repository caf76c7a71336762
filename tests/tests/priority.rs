//! Priority classes in the rate limiter, through its public API, on tokio's paused clock:
//! a higher class is granted first, FIFO within a class, aging promotes a waiter that has
//! waited too long, `try_reserve_with` passes only lower classes, cancellation in any
//! class gives everything back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tollgate::catalog::Limits;
use tollgate::clock;
use tollgate::limit::{
    Burst, Cost, LimiterConfig, Priority, TokenBucketRateLimiter, TryReserveError,
};

/// One request per second, a bucket of one.
fn one_per_second(aging: Duration) -> TokenBucketRateLimiter {
    let limits = Limits {
        rpm: 60,
        ..Limits::default()
    };
    TokenBucketRateLimiter::new(
        LimiterConfig::new("p", limits)
            .with_arrival_allowance(Duration::ZERO)
            .with_adaptive(false)
            .with_burst(Burst::Seconds(1))
            .with_aging(aging),
    )
}

/// 60 tokens a minute (one a second), a bucket of 60.
fn sixty_tokens(aging: Duration) -> TokenBucketRateLimiter {
    let limits = Limits {
        tpm: 60,
        ..Limits::default()
    };
    TokenBucketRateLimiter::new(
        LimiterConfig::new("p", limits)
            .with_arrival_allowance(Duration::ZERO)
            .with_adaptive(false)
            .with_aging(aging),
    )
}

fn tokens(n: u64) -> Cost {
    Cost::call(n, 0)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

type Log = Arc<Mutex<Vec<(&'static str, Duration)>>>;

/// Spawns a waiter that reserves `cost` at `priority`, marks it sent and logs its name
/// and grant time; returns once it is queued (it must not fit now).
async fn waiter(
    limiter: &TokenBucketRateLimiter,
    log: &Log,
    start: Instant,
    name: &'static str,
    priority: Priority,
    cost: Cost,
) -> JoinHandle<()> {
    let queued = limiter.snapshot().queued;
    let (l, log) = (limiter.clone(), log.clone());
    let handle = tokio::spawn(async move {
        let mut r = l.reserve_with(cost, priority).await.expect("fits a bucket");
        r.mark_sent();
        log.lock().unwrap().push((name, start.elapsed()));
    });
    for _ in 0..100 {
        if limiter.snapshot().queued > queued {
            return handle;
        }
        tokio::task::yield_now().await;
    }
    panic!("{name} did not queue");
}

fn names(log: &Log) -> Vec<&'static str> {
    log.lock().unwrap().iter().map(|(n, _)| *n).collect()
}

fn granted_at(log: &Log, name: &str) -> Option<Duration> {
    log.lock()
        .unwrap()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// `actual` is within [expected, expected + 2 ms] (tokio's timer resolution).
fn assert_near(actual: Option<Duration>, expected: Duration, what: &str) {
    let actual = actual.unwrap_or_else(|| panic!("{what} was never granted"));
    assert!(
        actual >= expected && actual <= expected + Duration::from_millis(2),
        "{what} granted at {actual:?}, expected {expected:?}"
    );
}

fn ready_in(r: Result<tollgate::limit::Reservation, TryReserveError>) -> Duration {
    match r {
        Err(TryReserveError::WouldWait { ready_in }) => ready_in,
        other => panic!("expected WouldWait, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn interactive_is_granted_before_queued_batch() {
    let limiter = one_per_second(LimiterConfig::DEFAULT_AGING);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let one = Cost::call(0, 0);
    let mut tasks = vec![
        waiter(&limiter, &log, start, "batch", Priority::Batch, one).await,
        waiter(&limiter, &log, start, "default", Priority::Default, one).await,
        waiter(
            &limiter,
            &log,
            start,
            "interactive",
            Priority::Interactive,
            one,
        )
        .await,
    ];
    assert_eq!(limiter.snapshot().queued_by_class, [1, 1, 1]);
    for t in tasks.drain(..) {
        t.await.unwrap();
    }
    assert_eq!(names(&log), ["interactive", "default", "batch"]);
    assert_near(granted_at(&log, "interactive"), secs(1), "interactive");
    assert_near(granted_at(&log, "default"), secs(2), "default");
    assert_near(granted_at(&log, "batch"), secs(3), "batch");
}

#[tokio::test(start_paused = true)]
async fn reserve_and_try_reserve_are_the_default_class() {
    let limiter = one_per_second(LimiterConfig::DEFAULT_AGING);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let one = Cost::call(0, 0);
    let batch = waiter(&limiter, &log, start, "batch", Priority::Batch, one).await;
    // A plain reserve() queues in the default class, ahead of the batch waiter.
    let (l, log2) = (limiter.clone(), log.clone());
    let plain = tokio::spawn(async move {
        l.reserve(one).await.unwrap().mark_sent();
        log2.lock().unwrap().push(("plain", start.elapsed()));
    });
    tokio::task::yield_now().await;
    assert_eq!(limiter.snapshot().queued_by_class, [1, 1, 0]);
    // try_reserve() must not jump the default waiter.
    assert!(limiter.try_reserve(one).is_err());
    plain.await.unwrap();
    batch.await.unwrap();
    assert_eq!(names(&log), ["plain", "batch"]);
}

#[tokio::test(start_paused = true)]
async fn fifo_within_a_class() {
    let limiter = one_per_second(LimiterConfig::DEFAULT_AGING);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let one = Cost::call(0, 0);
    let order = [
        ("b1", Priority::Batch),
        ("i1", Priority::Interactive),
        ("d1", Priority::Default),
        ("b2", Priority::Batch),
        ("i2", Priority::Interactive),
        ("d2", Priority::Default),
        ("b3", Priority::Batch),
        ("i3", Priority::Interactive),
    ];
    let mut tasks = Vec::new();
    for (name, priority) in order {
        tasks.push(waiter(&limiter, &log, start, name, priority, one).await);
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        names(&log),
        ["i1", "i2", "i3", "d1", "d2", "b1", "b2", "b3"]
    );
    for (i, name) in names(&log).into_iter().enumerate() {
        assert_near(granted_at(&log, name), secs(i as u64 + 1), name);
    }
}

/// Interactive callers that each reserve again as soon as granted, until `until`: the
/// interactive queue is never empty.
fn saturate_interactive(
    limiter: &TokenBucketRateLimiter,
    log: &Log,
    start: Instant,
    until: Duration,
) -> Vec<JoinHandle<()>> {
    (0..5)
        .map(|_| {
            let (l, log) = (limiter.clone(), log.clone());
            tokio::spawn(async move {
                while start.elapsed() < until {
                    let mut r = l
                        .reserve_with(Cost::call(0, 0), Priority::Interactive)
                        .await
                        .unwrap();
                    r.mark_sent();
                    log.lock().unwrap().push(("interactive", start.elapsed()));
                }
            })
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn aging_promotes_a_starving_batch_waiter() {
    let limiter = one_per_second(secs(10));
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let batch = waiter(
        &limiter,
        &log,
        start,
        "batch",
        Priority::Batch,
        Cost::call(0, 0),
    )
    .await;
    let load = saturate_interactive(&limiter, &log, start, secs(30));
    batch.await.unwrap();
    // Interactive calls take every grant until the batch waiter has waited 10 s; then it
    // ranks above them and takes the next one.
    assert_near(granted_at(&log, "batch"), secs(10), "batch");
    let before = names(&log).iter().take_while(|n| **n != "batch").count();
    assert_eq!(before, 9, "interactive grants at 1 s … 9 s");
    for t in load {
        t.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn without_aging_a_saturating_higher_class_starves_batch() {
    let limiter = one_per_second(Duration::MAX);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let batch = waiter(
        &limiter,
        &log,
        start,
        "batch",
        Priority::Batch,
        Cost::call(0, 0),
    )
    .await;
    let load = saturate_interactive(&limiter, &log, start, secs(30));
    batch.await.unwrap();
    let at = granted_at(&log, "batch").unwrap();
    assert!(at >= secs(30), "batch granted at {at:?} under load");
    for t in load {
        t.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn aging_wakes_the_driver_when_a_promoted_waiter_fits_before_the_head() {
    // The batch waiter needs 3 tokens; at 1 s an interactive one that needs 50 arrives
    // and becomes the head. The batch waiter is promoted at 5 s, when it fits: it goes
    // then, not after the head.
    let limiter = sixty_tokens(secs(5));
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(tokens(60)).unwrap().mark_sent();
    let batch = waiter(&limiter, &log, start, "batch", Priority::Batch, tokens(3)).await;
    tokio::time::sleep(secs(1)).await;
    let big = waiter(
        &limiter,
        &log,
        start,
        "big",
        Priority::Interactive,
        tokens(50),
    )
    .await;
    batch.await.unwrap();
    big.await.unwrap();
    assert_near(granted_at(&log, "batch"), secs(5), "batch");
    assert_near(granted_at(&log, "big"), secs(53), "big");
}

#[tokio::test(start_paused = true)]
async fn a_promoted_head_keeps_the_lead_over_a_younger_promoted_waiter() {
    // The interactive head (50 tokens) arrives first, the batch waiter (3 tokens) a
    // second later. Both are promoted in time; the older goes first, as FIFO would.
    let limiter = sixty_tokens(secs(5));
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(tokens(60)).unwrap().mark_sent();
    let big = waiter(
        &limiter,
        &log,
        start,
        "big",
        Priority::Interactive,
        tokens(50),
    )
    .await;
    tokio::time::sleep(secs(1)).await;
    let batch = waiter(&limiter, &log, start, "batch", Priority::Batch, tokens(3)).await;
    batch.await.unwrap();
    big.await.unwrap();
    assert_near(granted_at(&log, "big"), secs(50), "big");
    assert_near(granted_at(&log, "batch"), secs(53), "batch");
}

#[tokio::test(start_paused = true)]
async fn zero_aging_is_fifo_across_classes() {
    let limiter = one_per_second(Duration::ZERO);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let one = Cost::call(0, 0);
    let mut tasks = Vec::new();
    for (name, priority) in [
        ("b", Priority::Batch),
        ("d", Priority::Default),
        ("i", Priority::Interactive),
    ] {
        tasks.push(waiter(&limiter, &log, start, name, priority, one).await);
        // Distinct arrival times (a tie would go to the higher class).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(names(&log), ["b", "d", "i"]);
}

#[tokio::test(start_paused = true)]
async fn try_reserve_at_higher_class_passes_lower_waiters_only() {
    let limiter = sixty_tokens(LimiterConfig::DEFAULT_AGING);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(tokens(50)).unwrap().mark_sent(); // level 10
    let batch = waiter(&limiter, &log, start, "batch", Priority::Batch, tokens(30)).await;

    // Its own class: never jumps the batch waiter; counts it in the estimate.
    let r = limiter.try_reserve_with(tokens(5), Priority::Batch);
    assert_eq!(ready_in(r), secs(35 - 10));
    // Higher classes pass it when they fit.
    limiter
        .try_reserve_with(tokens(5), Priority::Default)
        .unwrap()
        .mark_sent();
    limiter
        .try_reserve_with(tokens(5), Priority::Interactive)
        .unwrap()
        .mark_sent(); // level 0
    // ... and their estimate does not count the batch waiter, which would go after them.
    let r = limiter.try_reserve_with(tokens(10), Priority::Interactive);
    assert_eq!(ready_in(r), secs(10));
    assert_eq!(ready_in(limiter.try_reserve(tokens(10))), secs(10));
    let r = limiter.try_reserve_with(tokens(10), Priority::Batch);
    assert_eq!(ready_in(r), secs(40));

    // An interactive waiter: nobody jumps it, not even its own class.
    let urgent = waiter(
        &limiter,
        &log,
        start,
        "urgent",
        Priority::Interactive,
        tokens(3),
    )
    .await;
    let r = limiter.try_reserve_with(tokens(1), Priority::Interactive);
    assert_eq!(ready_in(r), secs(4));
    let r = limiter.try_reserve_with(tokens(1), Priority::Default);
    assert_eq!(ready_in(r), secs(4));
    let r = limiter.try_reserve_with(tokens(1), Priority::Batch);
    assert_eq!(ready_in(r), secs(34));

    urgent.await.unwrap();
    batch.await.unwrap();
    assert_eq!(names(&log), ["urgent", "batch"]);
    assert_near(granted_at(&log, "urgent"), secs(3), "urgent");
    assert_near(granted_at(&log, "batch"), secs(33), "batch");
}

#[tokio::test(start_paused = true)]
async fn try_reserve_does_not_pass_a_promoted_waiter() {
    let limiter = sixty_tokens(secs(5));
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(tokens(50)).unwrap().mark_sent(); // level 10
    let batch = waiter(&limiter, &log, start, "batch", Priority::Batch, tokens(30)).await;
    tokio::time::sleep(secs(4)).await; // level 14; the batch waiter is not promoted yet
    limiter
        .try_reserve_with(tokens(1), Priority::Interactive)
        .unwrap()
        .mark_sent(); // level 13
    tokio::time::sleep(secs(2)).await; // 6 s: promoted; level 15
    let r = limiter.try_reserve_with(tokens(1), Priority::Interactive);
    assert_eq!(ready_in(r), secs(30 + 1 - 15));
    batch.await.unwrap();
    assert_near(granted_at(&log, "batch"), secs(6 + 15), "batch");
}

#[tokio::test(start_paused = true)]
async fn cancelled_waiter_of_any_class_gives_back_and_next_goes() {
    let limiter = one_per_second(LimiterConfig::DEFAULT_AGING);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(Cost::call(0, 0)).unwrap().mark_sent();
    let one = Cost::call(0, 0);
    let i1 = waiter(&limiter, &log, start, "i1", Priority::Interactive, one).await;
    let i2 = waiter(&limiter, &log, start, "i2", Priority::Interactive, one).await;
    let d1 = waiter(&limiter, &log, start, "d1", Priority::Default, one).await;
    let d2 = waiter(&limiter, &log, start, "d2", Priority::Default, one).await;
    let b1 = waiter(&limiter, &log, start, "b1", Priority::Batch, one).await;
    let b2 = waiter(&limiter, &log, start, "b2", Priority::Batch, one).await;
    // The head (i1), a non-head of a middle class (d2) and a class head that is not the
    // queue's head (b1).
    for t in [&i1, &d2, &b1] {
        t.abort();
    }
    for t in [i1, d2, b1] {
        assert!(t.await.unwrap_err().is_cancelled());
    }
    assert_eq!(limiter.snapshot().queued_by_class, [1, 1, 1]);
    for t in [i2, d1, b2] {
        t.await.unwrap();
    }
    assert_eq!(names(&log), ["i2", "d1", "b2"]);
    assert_near(granted_at(&log, "i2"), secs(1), "i2");
    assert_near(granted_at(&log, "d1"), secs(2), "d1");
    assert_near(granted_at(&log, "b2"), secs(3), "b2");

    // A large head of one class holds back a small waiter of another; cancelling the
    // head lets the small one go at once.
    let limiter = sixty_tokens(LimiterConfig::DEFAULT_AGING);
    let log = Log::default();
    let start = clock::now();
    limiter.try_reserve(tokens(50)).unwrap().mark_sent(); // level 10
    let big = waiter(
        &limiter,
        &log,
        start,
        "big",
        Priority::Interactive,
        tokens(50),
    )
    .await;
    let small = waiter(&limiter, &log, start, "small", Priority::Batch, tokens(5)).await;
    big.abort();
    assert!(big.await.unwrap_err().is_cancelled());
    small.await.unwrap();
    assert_eq!(granted_at(&log, "small"), Some(Duration::ZERO));

    // Everything not sent is given back: with nothing held, the bucket refills to full.
    let limiter = sixty_tokens(LimiterConfig::DEFAULT_AGING);
    let held = limiter.try_reserve(tokens(60)).unwrap();
    let mut tasks = Vec::new();
    for priority in Priority::ALL {
        for _ in 0..3 {
            let l = limiter.clone();
            tasks.push(tokio::spawn(async move {
                l.reserve_with(tokens(7), priority).await.map(drop)
            }));
        }
    }
    tokio::task::yield_now().await;
    assert_eq!(limiter.snapshot().queued_by_class, [3, 3, 3]);
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        assert!(t.await.unwrap_err().is_cancelled());
    }
    drop(held); // never sent: refunded
    let snapshot = limiter.snapshot();
    assert_eq!(snapshot.queued, 0);
    assert_eq!(snapshot.levels, [(tollgate::Dimension::Tokens, 60.0, 60)]);
}
