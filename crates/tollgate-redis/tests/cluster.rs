//! The backend on a Redis Cluster (three primaries, one replica each, started by
//! `scripts/peers.sh` for `cargo xtask test-all`: `TOLLGATE_REDIS_CLUSTER_URL`, and
//! `TOLLGATE_REDIS_CLUSTER_DIR` with the nodes' pid files and start scripts), on Redis
//! `TIME` (the cluster's own clock: real time). Several processes pace models whose keys
//! live on different primaries; a primary killed mid-run makes its model's calls fail
//! closed until its replica is promoted, and the limit holds over the whole run.
//!
//! The pacing test uses only slots 5461–16383 and the failover test only slots 0–5460 (the
//! first primary's, whichever node holds them now), so that running at once (nextest runs
//! each test in its own process) they do not disturb each other.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{busiest, fresh_prefix, rpm_with_one_second_burst, spawn_children};
use tollgate::limit::{Cost, LimiterConfig, Priority};
use tollgate_redis::{RedisConfig, RedisLimiters};

const CHILD_ENV: &str = "TOLLGATE_REDIS_CLUSTER_CHILD";
const PROCESSES: usize = 3;
const CALLERS: usize = 4;
/// 600 rpm with a one-second burst: 10 at once, then 10 a second.
const RPM: u64 = 600;
const CAPACITY: usize = 10;
const RUN: Duration = Duration::from_secs(2);

fn cluster_url() -> Option<String> {
    tollgate_testkit::peers::url("TOLLGATE_REDIS_CLUSTER_URL")
}

fn config(model: &str) -> LimiterConfig {
    rpm_with_one_second_burst(model, RPM)
        .with_adaptive(false)
        .with_arrival_allowance(Duration::ZERO)
}

/// The seeds of a `redis+cluster://a:1,b:2` URL, as `redis://` URLs.
fn seeds(url: &str) -> Vec<String> {
    url.trim_start_matches("redis+cluster://")
        .split(',')
        .map(|s| format!("redis://{s}/"))
        .collect()
}

/// A connection to one live node (any seed that answers).
async fn any_node(url: &str) -> redis::aio::MultiplexedConnection {
    for seed in seeds(url) {
        if let Ok(client) = redis::Client::open(seed.as_str())
            && let Ok(c) = client.get_multiplexed_async_connection().await
        {
            return c;
        }
    }
    panic!("no cluster node answers");
}

async fn keyslot(url: &str, key: &str) -> u16 {
    let mut c = any_node(url).await;
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap()
}

/// A model id whose key (under `prefix`) is in `slots`.
async fn model_in(url: &str, prefix: &str, slots: std::ops::RangeInclusive<u16>) -> String {
    for i in 0.. {
        let model = format!("m{i}");
        if slots.contains(&keyslot(url, &format!("{prefix}:{{{model}}}:lim")).await) {
            return model;
        }
    }
    unreachable!()
}

/// A fresh key prefix whose settle ids' counter (`<prefix>:instances`) is off the
/// failover test's slots.
async fn prefix_off_the_failover(url: &str) -> String {
    loop {
        let prefix = fresh_prefix();
        if keyslot(url, &format!("{prefix}:instances")).await > 5460 {
            return prefix;
        }
    }
}

/// The port of the live primary that serves `slot`, if one does.
async fn primary_of(url: &str, slot: u16) -> Option<u16> {
    let mut c = any_node(url).await;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .unwrap();
    nodes.lines().find_map(|line| {
        let f: Vec<&str> = line.split(' ').collect();
        let primary = f[2].contains("master") && !f[2].contains("fail");
        let serves = f[8..].iter().any(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
        });
        let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
        (primary && serves).then_some(port)
    })
}

/// The limit's bound on sorted slot starts: no window of 1 or 2 s holds more than the
/// burst plus the refill, nor the whole run more than the burst plus the run's refill.
fn assert_within_limit(starts: &[u64], what: &str) {
    let rate = (RPM / 60) as usize;
    for w in [1u64, 2] {
        let n = busiest(starts, w);
        assert!(
            n <= CAPACITY + rate * w as usize,
            "{what}: {n} slots in {w} s"
        );
    }
    let span_s = (starts[starts.len() - 1] - starts[0]) as f64 / 1e6;
    assert!(
        starts.len() as f64 <= CAPACITY as f64 + rate as f64 * span_s + 1.0,
        "{what}: {} slots in {span_s:.2} s",
        starts.len()
    );
}

/// The child's side of the pacing test: books greedily on every model in `CHILD_ENV`
/// (`prefix models…`) and prints each slot's start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of models_on_every_primary_hold_their_limits_across_processes"]
async fn cluster_child_books_greedily() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let url = std::env::var("TOLLGATE_REDIS_CLUSTER_URL").unwrap();
    let mut words = spec.split(' ');
    let prefix = words.next().unwrap().to_owned();
    let limiters = RedisLimiters::new(RedisConfig::new(url).with_key_prefix(prefix)).unwrap();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let begin = tollgate::clock::now();
    let mut tasks = Vec::new();
    for model in words {
        let limiter = limiters.limiter(&config(model));
        for _ in 0..CALLERS {
            let (limiter, starts, model) = (limiter.clone(), starts.clone(), model.to_owned());
            tasks.push(tokio::spawn(async move {
                while begin.elapsed() < RUN {
                    let start = book(&limiter).await.unwrap();
                    starts.lock().unwrap().push((model.clone(), start));
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    for (model, start) in starts.lock().unwrap().iter() {
        println!("BOOKED {model} {start}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_on_every_primary_hold_their_limits_across_processes() {
    let Some(url) = cluster_url() else { return };
    let prefix = prefix_off_the_failover(&url).await;
    // One model on each of the other two primaries.
    let models = [
        model_in(&url, &prefix, 5461..=10922).await,
        model_in(&url, &prefix, 10923..=16383).await,
    ];
    let spec = format!("{prefix} {} {}", models[0], models[1]);
    let children = spawn_children(
        PROCESSES,
        "cluster_child_books_greedily",
        &[(CHILD_ENV, &spec), ("TOLLGATE_REDIS_CLUSTER_URL", &url)],
    );
    let mut starts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut processes_booking = 0;
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert!(out.status.success(), "a child failed");
        let mut booked = 0;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(rest) = line.strip_prefix("BOOKED ") {
                let (model, start) = rest.split_once(' ').unwrap();
                starts
                    .entry(model.to_owned())
                    .or_default()
                    .push(start.trim().parse().unwrap());
                booked += 1;
            }
        }
        processes_booking += usize::from(booked > 0);
    }
    assert_eq!(processes_booking, PROCESSES, "every process got slots");
    for model in &models {
        let s = starts.get_mut(model).expect("slots for every model");
        s.sort_unstable();
        assert_within_limit(s, model);
        // Shared, not multiplied by the processes: at least most of one limit's worth.
        assert!(s.len() >= CAPACITY, "{model}: only {} slots", s.len());
    }
    // The keys are where the hash tag says: on the primaries of their slots.
    for model in &models {
        let slot = keyslot(&url, &format!("{prefix}:{{{model}}}:lim")).await;
        let port = primary_of(&url, slot).await.unwrap();
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("{prefix}:{{{model}}}:lim"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(exists, "{model}'s hash is on the primary of slot {slot}");
    }
}

/// Waits (real time: the cluster's failure detection and election run on it) until
/// `done` holds, for at most `limit`: a bound on liveness, not on speed.
async fn eventually<F: std::future::Future<Output = bool>>(
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let begin = tollgate::clock::now();
    while !done().await {
        assert!(begin.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs a killed node's start script (from `scripts/peers.sh`) when dropped.
struct Revive(std::path::PathBuf);

impl Drop for Revive {
    fn drop(&mut self) {
        let started = std::process::Command::new("bash").arg(&self.0).status();
        assert!(
            started.is_ok_and(|s| s.success()) || std::thread::panicking(),
            "could not start {} again",
            self.0.display()
        );
    }
}

/// A reservation on `limiter`: its slot's start, or the error.
async fn book(limiter: &tollgate_redis::RedisLimiter) -> tollgate::Result<u64> {
    let (mut r, booking) = limiter
        .reserve_booked(Cost::call(0, 0), Priority::default())
        .await?;
    r.mark_sent();
    Ok(booking.unwrap().start_us)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_fails_its_calls_closed_until_its_replica_takes_over() {
    let Some(url) = cluster_url() else { return };
    let dir = std::path::PathBuf::from(
        tollgate_testkit::peers::url("TOLLGATE_REDIS_CLUSTER_DIR").expect("the cluster's dir"),
    );
    let prefix = fresh_prefix();
    let model = model_in(&url, &prefix, 0..=5460).await;
    let slot = keyslot(&url, &format!("{prefix}:{{{model}}}:lim")).await;
    let limiters =
        RedisLimiters::new(RedisConfig::new(url.clone()).with_key_prefix(prefix)).unwrap();
    let limiter = limiters.limiter(&config(&model));
    let mut starts = Vec::new();
    // Before: the burst and more, paced.
    while starts.len() < 2 * CAPACITY {
        starts.push(book(&limiter).await.unwrap());
    }
    // Every write so far on the replica (`WAIT`): what this test checks is the limiter
    // across a failover, not Redis's asynchronous replication (see docs/distributed.md).
    let port = primary_of(&url, slot)
        .await
        .expect("a primary for the slot");
    let no_timeout = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut primary = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_multiplexed_async_connection_with_config(&no_timeout)
        .await
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(
        acked, 1,
        "the primary on {port} has a replica with every booking (else restart the peers)"
    );
    let pidfile = dir.join(format!("redis@cluster-{port}.pid"));
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success(), "killed the primary (pid {pid})");
    // Started again however this test ends, so that the cluster stays whole.
    let revive = Revive(dir.join(format!("{port}.sh")));
    drop(primary);
    // While the slot has no primary, calls fail closed, with the limiter's error.
    let mut failures = 0;
    loop {
        match book(&limiter).await {
            Err(tollgate::Error::LimiterUnavailable { backend, .. }) => {
                assert_eq!(backend, "redis");
                failures += 1;
            }
            Err(e) => panic!("not the fail-closed error: {e}"),
            Ok(start) if failures == 0 => {
                // Answered by the dying primary's last moments: counted all the same.
                starts.push(start);
                assert!(
                    starts.len() < 4 * CAPACITY,
                    "calls went on without a primary"
                );
            }
            Ok(start) => {
                starts.push(start);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            failures < 600,
            "calls never went through again: no replica took over, or the promoted one \
             refused the scripts it lacks"
        );
    }
    assert!(failures > 0, "calls failed while the slot had no primary");
    // The nodes' view of who serves the slot follows by gossip.
    eventually(
        Duration::from_secs(60),
        "the cluster names a new primary",
        || {
            let url = url.clone();
            async move { primary_of(&url, slot).await.is_some_and(|p| p != port) }
        },
    )
    .await;
    // After: paced again, from what the replica had.
    let before = starts.len();
    while starts.len() < before + 2 * CAPACITY {
        starts.push(book(&limiter).await.unwrap());
    }
    starts.sort_unstable();
    assert_within_limit(&starts, &model);
    // The snapshot script, on the promoted primary (which had to be sent it again).
    let snapshot = tollgate::limit::LimiterBackend::snapshot(&limiter)
        .await
        .unwrap();
    assert_eq!(snapshot.levels.len(), 1, "{snapshot:?}");
    // The killed node back, as a replica of the promoted one, for the next run.
    drop(revive);
    let back = format!("redis://127.0.0.1:{port}/");
    eventually(
        Duration::from_secs(60),
        "the old primary rejoins as a replica",
        || {
            let back = back.clone();
            async move {
                let Ok(mut c) = redis::Client::open(back.as_str())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                else {
                    return false;
                };
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut c)
                    .await
                    .unwrap_or_default();
                info.contains("master_link_status:up")
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_caps_on_the_cluster_count_every_ledgers_calls_against_one_account() {
    let Some(url) = cluster_url() else { return };
    let prefix = prefix_off_the_failover(&url).await;
    // A cap whose account (and its settle ids, same hash tag) is off the failover's slots.
    let mut cap = String::new();
    for i in 0.. {
        cap = format!("key:{i} daily budget");
        if keyslot(&url, &format!("{prefix}:{{spend:{cap}}}:acct")).await > 5460 {
            break;
        }
    }
    let ledger = || -> Arc<dyn tollgate::pipeline::SpendLedger> {
        let config = RedisConfig::new(url.clone()).with_key_prefix(prefix.clone());
        Arc::new(RedisLimiters::new(config).unwrap().spend())
    };
    let here = tollgate::SpendCap::shared(cap.as_str(), 1.0, ledger());
    let there = tollgate::SpendCap::shared(cap.as_str(), 1.0, ledger());
    let hold = here.reserve(0.6).await.unwrap();
    match there.reserve(0.5).await {
        Err(tollgate::Error::SpendCapExceeded { remaining_usd, .. }) => {
            assert!((remaining_usd - 0.4).abs() < 1e-9, "{remaining_usd}")
        }
        other => panic!("expected SpendCapExceeded, got {other:?}"),
    }
    hold.settle(0.25);
    // The settle (a script call with its id key beside the account) runs on a task.
    eventually(Duration::from_secs(10), "the settle lands", || {
        let there = there.clone();
        async move {
            match there.reserve(0.75).await {
                Ok(h) => {
                    h.settle(0.0);
                    true
                }
                Err(_) => false,
            }
        }
    })
    .await;
}
