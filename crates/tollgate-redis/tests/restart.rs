//! Redis going away: connections dropped, the server killed and restarted. Each test
//! runs its own `redis-server` (so that killing it disturbs no other test).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Harness, PrivateRedis, admin, fresh_prefix, without_time_jumps};
use tollgate::catalog::Limits;
use tollgate::limit::{Burst, Cost, LimiterBackend, LimiterConfig, Priority};
use tollgate::{Dimension, Error};
use tollgate_redis::{RedisClock, RedisConfig};

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

#[tokio::test(start_paused = true)]
async fn settlements_survive_a_dropped_connection_and_apply_once() {
    let Some(server) = PrivateRedis::start() else {
        return;
    };
    let h = Harness::with(
        RedisConfig::new(server.url())
            .with_key_prefix(fresh_prefix())
            .with_clock(RedisClock::Tokio {
                epoch: tollgate::clock::now(),
            }),
    );
    let l = h.limiter(rpm(10));
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(l.reserve(one(), Priority::default()).await.unwrap());
    }
    // The server closes every client connection but the admin's.
    let mut admin = admin(&server.url()).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(killed >= 1);
    drop(held); // four refunds over a connection that is gone: retried after reconnecting
    h.flush().await;
    let snap = without_time_jumps(l.snapshot()).await.unwrap();
    assert_eq!(snap.levels, [(Dimension::Requests, 10.0, 10)]);
    // Each applied once: four more reservations leave six.
    for _ in 0..4 {
        let mut r = l.try_reserve(one(), Priority::default()).await.unwrap();
        r.mark_sent();
    }
    let snap = l.snapshot().await.unwrap();
    assert_eq!(snap.levels, [(Dimension::Requests, 6.0, 10)]);
}

/// Greedy callers for `run`, recording each booked slot's start (Redis TIME, µs).
async fn greedy(l: &tollgate_redis::RedisLimiter, callers: usize, run: Duration) -> Vec<u64> {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let begin = tollgate::clock::now();
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let l = l.clone();
        let starts = starts.clone();
        tasks.push(tokio::spawn(async move {
            while begin.elapsed() < run {
                let (mut r, booking) = l.reserve_booked(one(), Priority::default()).await.unwrap();
                r.mark_sent();
                starts.lock().unwrap().push(booking.unwrap().start_us);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut v = starts.lock().unwrap().clone();
    v.sort_unstable();
    v
}

/// The most slots booked into any window of `window_us`.
fn busiest_window(starts: &[u64], window_us: u64) -> usize {
    (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|s| **s < starts[i] + window_us)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn redis_killed_and_restarted_mid_run_fails_closed_then_recovers_without_overshoot() {
    let Some(mut server) = PrivateRedis::start() else {
        return;
    };
    let h = Harness::with(
        RedisConfig::new(server.url())
            .with_key_prefix(fresh_prefix())
            .with_call_timeout(Duration::from_millis(250)),
    );
    // 600 rpm with a one-second burst: 10 at once, then one every 100 ms; any 1 s holds
    // at most capacity + a second's refill = 20.
    let l = h.limiter(rpm(600).with_burst(Burst::Seconds(1)));
    let before = greedy(&l, 4, Duration::from_millis(1500)).await;
    assert!(busiest_window(&before, 1_000_000) <= 20, "{before:?}");
    assert!(before.len() >= 20, "{} before the kill", before.len());

    server.kill();
    let mut refused = 0;
    let down = tollgate::clock::now();
    while down.elapsed() < Duration::from_millis(500) {
        match l.reserve(one(), Priority::default()).await {
            Err(Error::LimiterUnavailable {
                backend, model_id, ..
            }) => {
                assert_eq!((backend.as_str(), model_id.as_str()), ("redis", "m"));
                refused += 1;
            }
            other => panic!("expected LimiterUnavailable while Redis is down, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused >= 5, "{refused} refusals");

    server.restart();
    let up = tollgate::clock::now();
    loop {
        match l.try_reserve(one(), Priority::default()).await {
            Ok(mut r) => {
                r.mark_sent();
                break;
            }
            Err(e) => assert!(
                up.elapsed() < Duration::from_secs(10),
                "no reconnect after 10 s: {e:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = greedy(&l, 4, Duration::from_millis(1500)).await;
    // The restarted server starts empty (full buckets): the bound holds from there on.
    assert!(busiest_window(&after, 1_000_000) <= 20, "{after:?}");
    assert!(after.len() >= 20, "{} after the restart", after.len());
}

#[tokio::test]
async fn slow_redis_times_out_into_the_typed_error_and_nothing_is_taken() {
    let Some(server) = PrivateRedis::start() else {
        return;
    };
    let h = Harness::with(
        RedisConfig::new(server.url())
            .with_key_prefix(fresh_prefix())
            .with_call_timeout(Duration::from_millis(200)),
    );
    let l = h.limiter(rpm(60));
    let mut r = l.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    // The server holds every client's commands for a second.
    let mut admin = admin(&server.url()).await;
    let () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "1000", "ALL"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let asked = tollgate::clock::now();
    match l.reserve(one(), Priority::default()).await {
        Err(Error::LimiterUnavailable {
            backend, model_id, ..
        }) => assert_eq!((backend.as_str(), model_id.as_str()), ("redis", "m")),
        other => panic!("expected LimiterUnavailable, got {other:?}"),
    }
    assert!(asked.elapsed() < Duration::from_millis(900));
    // Once the server answers again it has granted the first reservation and, if the
    // timed-out one reached it after all, that one too (held until it refills, never
    // sent), and nothing more: the caller did not retry behind the limiter's back.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let snap = l.snapshot().await.unwrap();
    assert!((1..=2).contains(&snap.grants), "{snap:?}");
}
