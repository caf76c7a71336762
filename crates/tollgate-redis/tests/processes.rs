//! Several OS processes (this test binary, spawned again as children) sharing one limit
//! on Redis, on Redis `TIME`. Each child books greedily and prints the start of every
//! slot it was given; the parent checks the union.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{busiest, fresh_prefix, redis_url, rpm_with_one_second_burst, spawn_children};
use tollgate::limit::{Cost, LimiterConfig, Priority};
use tollgate_redis::{RedisConfig, RedisLimiters};

const CHILD_PREFIX_ENV: &str = "TOLLGATE_REDIS_CHILD_PREFIX";
const PROCESSES: usize = 4;
const CALLERS_PER_PROCESS: usize = 5;
/// 1200 rpm with a one-second burst: 20 at once, then 20 a second.
const RPM: u64 = 1200;
const CAPACITY: usize = 20;
const RUN: Duration = Duration::from_secs(2);

fn config() -> LimiterConfig {
    rpm_with_one_second_burst("shared", RPM)
        .with_adaptive(false)
        // The bound checked is the bucket's arithmetic alone: no arrival allowance.
        .with_arrival_allowance(Duration::ZERO)
}

/// The child's side: runs only when spawned by the parent test below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of several_processes_share_one_limit"]
async fn child_books_greedily() {
    let Ok(prefix) = std::env::var(CHILD_PREFIX_ENV) else {
        return;
    };
    let url = std::env::var("TOLLGATE_REDIS_URL").unwrap();
    let limiters = RedisLimiters::new(RedisConfig::new(url).with_key_prefix(prefix)).unwrap();
    let limiter = limiters.limiter(&config());
    let starts = Arc::new(Mutex::new(Vec::new()));
    let begin = tollgate::clock::now();
    let mut tasks = Vec::new();
    for _ in 0..CALLERS_PER_PROCESS {
        let limiter = limiter.clone();
        let starts = starts.clone();
        tasks.push(tokio::spawn(async move {
            while begin.elapsed() < RUN {
                let (mut r, booking) = limiter
                    .reserve_booked(Cost::call(0, 0), Priority::default())
                    .await
                    .unwrap();
                r.mark_sent();
                starts.lock().unwrap().push(booking.unwrap().start_us);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for s in starts.lock().unwrap().iter() {
        println!("BOOKED {s}");
    }
}

#[test]
fn several_processes_share_one_limit_and_no_window_exceeds_capacity_plus_refill() {
    let Some(url) = redis_url() else { return };
    let prefix = fresh_prefix();
    let children = spawn_children(
        PROCESSES,
        "child_books_greedily",
        &[(CHILD_PREFIX_ENV, &prefix), ("TOLLGATE_REDIS_URL", &url)],
    );
    let mut starts = Vec::new();
    let mut per_process = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a child failed");
        let mine: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("BOOKED "))
            .map(|n| n.trim().parse().unwrap())
            .collect();
        per_process.push(mine.len());
        starts.extend(mine);
    }
    starts.sort_unstable();
    assert!(
        per_process.iter().all(|n| *n > 0),
        "every process got slots: {per_process:?}"
    );
    // Any window of W seconds holds at most capacity + W × rate; for W = 1 s, 40.
    let rate_per_s = (RPM / 60) as usize;
    for window_s in [1u64, 2] {
        let bound = CAPACITY + rate_per_s * window_s as usize;
        let busiest = busiest(&starts, window_s);
        assert!(
            busiest <= bound,
            "{busiest} slots in {window_s} s (bound {bound})"
        );
    }
    // Shared, not multiplied: the whole run is close to one limit's worth.
    let span_s = (starts[starts.len() - 1] - starts[0]) as f64 / 1e6;
    let bound = CAPACITY as f64 + rate_per_s as f64 * span_s;
    eprintln!(
        "{} slots over {span_s:.2} s from {PROCESSES} processes {per_process:?}; bound {bound:.1}",
        starts.len()
    );
    assert!(
        starts.len() as f64 <= bound + 1.0,
        "{} slots in {span_s:.2} s",
        starts.len()
    );
    assert!(
        starts.len() as f64 >= 0.9 * bound,
        "only {} slots in {span_s:.2} s (bound {bound:.0}); per process {per_process:?}",
        starts.len()
    );
}
