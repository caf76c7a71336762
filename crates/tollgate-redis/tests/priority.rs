//! Priority classes on Redis (`priority.rs`): a batch reservation books only slots close
//! to now, so that an interactive one arriving after it goes first, until it has aged.

mod common;

use std::time::Duration;

use common::Harness;
use tollgate::catalog::Limits;
use tollgate::clock;
use tollgate::limit::{Cost, LimiterBackend, LimiterConfig, Priority};

/// rpm 6 (a unit every 10 s), drained; aging as given.
async fn drained(h: &Harness, aging: Duration) -> tollgate_redis::RedisLimiter {
    let l = h.limiter(
        LimiterConfig::new(
            "m",
            Limits {
                rpm: 6,
                ..Limits::default()
            },
        )
        .with_adaptive(false)
        .with_arrival_allowance(Duration::ZERO)
        .with_aging(aging),
    );
    for _ in 0..6 {
        let mut r = l
            .try_reserve(Cost::call(0, 0), Priority::Interactive)
            .await
            .unwrap();
        r.mark_sent();
    }
    l
}

/// Reserves at `priority` and returns when it was granted (from `start`).
fn reserve_at(
    l: &tollgate_redis::RedisLimiter,
    priority: Priority,
    start: tokio::time::Instant,
) -> tokio::task::JoinHandle<Duration> {
    let l = l.clone();
    tokio::spawn(async move {
        let mut r = l.reserve(Cost::call(0, 0), priority).await.unwrap();
        r.mark_sent();
        start.elapsed()
    })
}

/// Waits (in 1 ms steps of the paused clock) until `l` has made `n` reserve calls. A
/// plain timer would not do: while a call is on its way to Redis the paused clock jumps
/// to the next timer, which would let the second reservation overtake the first's.
async fn until_reserve_calls(l: &tollgate_redis::RedisLimiter, n: u64) {
    while l.reserve_round_trips() < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_interactive_reservation_goes_before_a_batch_one_that_asked_first() {
    let Some(h) = Harness::new() else { return };
    let l = drained(&h, LimiterConfig::DEFAULT_AGING).await;
    let start = clock::now();
    let batch = reserve_at(&l, Priority::Batch, start);
    until_reserve_calls(&l, 6 + 1).await;
    let interactive = reserve_at(&l, Priority::Interactive, start);
    assert_eq!(interactive.await.unwrap(), Duration::from_secs(10));
    assert_eq!(batch.await.unwrap(), Duration::from_secs(20));
    // The batch reservation asked three times: refused at 0 s and at 9 s (the slot it
    // was offered had moved to 20 s), granted at 19 s.
    assert_eq!(l.reserve_round_trips(), 6 + 1 + 3);
}

#[tokio::test(start_paused = true)]
async fn a_default_reservation_books_any_slot_in_one_round_trip() {
    let Some(h) = Harness::new() else { return };
    let l = drained(&h, LimiterConfig::DEFAULT_AGING).await;
    let start = clock::now();
    let default = reserve_at(&l, Priority::Default, start);
    until_reserve_calls(&l, 6 + 1).await;
    let interactive = reserve_at(&l, Priority::Interactive, start);
    assert_eq!(default.await.unwrap(), Duration::from_secs(10));
    assert_eq!(interactive.await.unwrap(), Duration::from_secs(20));
    assert_eq!(l.reserve_round_trips(), 6 + 2);
}

#[tokio::test(start_paused = true)]
async fn an_aged_batch_reservation_books_whatever_slot_it_is_given() {
    let Some(h) = Harness::new() else { return };
    // Aged after 5 s, it asks again then and books the slot at 10 s, ahead of an
    // interactive reservation arriving after that.
    let l = drained(&h, Duration::from_secs(5)).await;
    let start = clock::now();
    let batch = reserve_at(&l, Priority::Batch, start);
    until_reserve_calls(&l, 6 + 2).await;
    assert!(start.elapsed() >= Duration::from_secs(5));
    let interactive = reserve_at(&l, Priority::Interactive, start);
    assert_eq!(batch.await.unwrap(), Duration::from_secs(10));
    assert_eq!(interactive.await.unwrap(), Duration::from_secs(20));
}
