//! Four OS processes (this test binary, spawned again as children) of 16 callers each
//! share one model on Redis and call one llmock that enforces half the catalog's rate.
//! Every 429's `retry-after` is fed back; each child reads Redis `TIME` just before it
//! sends that feedback and again once it is applied. The parent checks that no process
//! let a call start inside a pause that had been learned (and published) before the
//! call's start: the slots booked ahead at the catalog's rate move past the pause.
//!
//! Real time: Redis `TIME` for the limiter and the readings, llmock's own clock for its
//! buckets. Nothing asserts how long anything took.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fresh_prefix, redis_url, rpm_with_one_second_burst, spawn_child};
use tollgate::limit::{Cost, Feedback, LimiterBackend, LimiterConfig, Priority};
use tollgate_redis::{RedisConfig, RedisLimiters};

const CHILD_ENV: &str = "TOLLGATE_REDIS_PAUSES_CHILD";
const PROCESSES: usize = 4;
const CALLERS_PER_PROCESS: usize = 16;
const CALLS_PER_CALLER: usize = 2;
/// What llmock enforces per API key: 10 a second (its bucket holds a minute's worth; the
/// parent empties it first, so that it refuses from the start).
const SERVED_RPM: u64 = 600;
/// What the catalog says: twice as much, with a one-second burst (20 at once).
const CATALOG_RPM: u64 = 2 * SERVED_RPM;
/// How long after a pause's feedback is applied (the second `TIME` reading) a waiter may
/// still start inside it: the publish's latency to the other processes' subscriptions
/// and their waking, on one host (`docs/distributed.md`: a move published in the
/// instant before a waiter's start is not heard in time).
const PUBLISH_TOLERANCE_US: u64 = 5_000;
const API_KEY: &str = "sk-pauses-test";

fn config() -> LimiterConfig {
    rpm_with_one_second_burst("m", CATALOG_RPM)
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// One chat completion at llmock `url`; its status and `retry-after-ms`.
async fn call(http: &reqwest::Client, url: &str) -> (u16, Option<Duration>) {
    let resp = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .json(&serde_json::json!({
            "model": "m",
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "hi"}],
        }))
        .send()
        .await
        .expect("llmock answers");
    let retry_after = resp
        .headers()
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .map(Duration::from_millis);
    (resp.status().as_u16(), retry_after)
}

/// Redis `TIME` in µs.
async fn redis_time(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    s * 1_000_000 + us
}

/// The child's side: runs only when spawned by the parent test below. Prints `START s`
/// for every slot it was given and `PAUSE t0 t1 retry_after` for every 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of no_process_starts_a_call_inside_a_pause_learned_before_it"]
async fn child_calls_llmock_and_feeds_back_its_429s() {
    let Ok(child) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (prefix, llmock) = child.split_once(' ').unwrap();
    let url = std::env::var("TOLLGATE_REDIS_URL").unwrap();
    let limiters =
        RedisLimiters::new(RedisConfig::new(url.clone()).with_key_prefix(prefix)).unwrap();
    let limiter = limiters.limiter(&config());
    // The same model's hash, through a limiter of its own: its `flush` waits for the
    // feedback alone, not for the bookings on their way.
    let reporter = RedisLimiters::new(RedisConfig::new(url.clone()).with_key_prefix(prefix))
        .unwrap()
        .limiter(&config());
    let conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..CALLERS_PER_PROCESS {
        let (limiter, reporter, lines) = (limiter.clone(), reporter.clone(), lines.clone());
        let (mut conn, http, llmock) = (conn.clone(), http(), llmock.to_owned());
        tasks.push(tokio::spawn(async move {
            for _ in 0..CALLS_PER_CALLER {
                let (mut r, booking) = limiter
                    .reserve_booked(Cost::call(0, 0), Priority::default())
                    .await
                    .unwrap();
                r.mark_sent();
                let start = booking.unwrap().start_us;
                lines.lock().unwrap().push(format!("START {start}"));
                match call(&http, &llmock).await {
                    (429, retry_after) => {
                        let retry_after = retry_after.expect("llmock's 429 says when");
                        let t0 = redis_time(&mut conn).await;
                        reporter.feedback(Feedback::RateLimited {
                            retry_after: Some(retry_after),
                        });
                        reporter.flush().await;
                        let t1 = redis_time(&mut conn).await;
                        let ra = retry_after.as_micros();
                        lines.lock().unwrap().push(format!("PAUSE {t0} {t1} {ra}"));
                    }
                    (200, _) => limiter.feedback(Feedback::Success),
                    (status, _) => panic!("llmock answered {status}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // On a line of its own, after the harness's "test … " without a newline.
    println!();
    for l in lines.lock().unwrap().iter() {
        println!("{l}");
    }
}

/// An llmock of this test's own (`scripts/peers.sh llmock`), stopped when dropped.
struct Llmock {
    run: String,
    url: String,
}

impl Llmock {
    fn peers(run: &str, args: &[&str]) -> Command {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/peers.sh");
        let mut command = Command::new("bash");
        command.arg(script).args(args).env("PEERS_RUN", run);
        command
    }

    /// `None` (the test is skipped) without the peers (no `TOLLGATE_LLMOCK_URL`).
    fn start(rpm: u64) -> Option<Llmock> {
        tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL")?;
        let run = format!("redis-pauses-{}", std::process::id());
        let out = Llmock::peers(&run, &["llmock", "served", "--rpm", &rpm.to_string()])
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/peers.sh runs");
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(out.status.success() && url.starts_with("http://"), "{url}");
        Some(Llmock { run, url })
    }
}

impl Drop for Llmock {
    fn drop(&mut self) {
        let _ = Llmock::peers(&self.run, &["stop"]).status();
    }
}

/// Calls llmock until it refuses, 16 at a time: its bucket is then empty.
async fn drain(url: &str) {
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (http, url) = (http(), url.to_owned());
            tokio::spawn(async move { while call(&http, &url).await.0 == 200 {} })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// A pause as one child saw it: feedback sent after `t0` (Redis `TIME`), applied by
/// `t1`, pausing for `retry_after_us` from when it was applied.
struct Pause {
    t0: u64,
    t1: u64,
    retry_after_us: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_starts_a_call_inside_a_pause_learned_before_it() {
    let Some(url) = redis_url() else { return };
    let Some(llmock) = Llmock::start(SERVED_RPM) else {
        return;
    };
    drain(&llmock.url).await;
    let prefix = fresh_prefix();
    let child = format!("{prefix} {}", llmock.url);
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            spawn_child(
                "child_calls_llmock_and_feeds_back_its_429s",
                &[(CHILD_ENV, &child), ("TOLLGATE_REDIS_URL", &url)],
            )
        })
        .collect();
    let (mut starts, mut pauses) = (Vec::new(), Vec::new());
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert!(out.status.success(), "a child failed");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let numbers = |rest: &str| -> Vec<u64> {
                rest.split(' ').map(|n| n.trim().parse().unwrap()).collect()
            };
            if let Some(rest) = line.strip_prefix("START ") {
                starts.push(numbers(rest)[0]);
            } else if let Some(rest) = line.strip_prefix("PAUSE ") {
                let n = numbers(rest);
                pauses.push(Pause {
                    t0: n[0],
                    t1: n[1],
                    retry_after_us: n[2],
                });
            }
        }
    }
    assert_eq!(
        starts.len(),
        PROCESSES * CALLERS_PER_PROCESS * CALLS_PER_CALLER
    );
    // The check could not fail without a pause that outlasts its own feedback's trip.
    let open = pauses
        .iter()
        .filter(|p| p.t0 + p.retry_after_us > p.t1 + PUBLISH_TOLERANCE_US)
        .count();
    assert!(open > 0, "no 429 paused the model for long enough to check");
    // A pause applied by `t1` lasts at least until `t0 + retry_after`; a start after
    // `t1` (and the publish's latency) was booked or checked knowing it.
    let inside: Vec<_> = pauses
        .iter()
        .flat_map(|p| {
            starts
                .iter()
                .filter(move |s| **s > p.t1 + PUBLISH_TOLERANCE_US && **s < p.t0 + p.retry_after_us)
                .map(move |s| (p.t0, p.t1, p.retry_after_us, *s))
        })
        .collect();
    eprintln!(
        "{} starts, {} pauses ({open} checkable)",
        starts.len(),
        pauses.len()
    );
    assert!(
        inside.is_empty(),
        "{} starts inside a pause learned before them (t0, t1, retry_after µs, start): {:?}",
        inside.len(),
        &inside[..inside.len().min(10)]
    );
}
