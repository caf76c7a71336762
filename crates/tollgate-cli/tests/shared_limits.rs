//! `--redis URL` puts every model's buckets in Redis: several `tollgate run` processes
//! on one model pace as one, against the simulated provider served over HTTP on
//! 127.0.0.1. The Redis is the private one `scripts/peers.sh start` runs
//! (`TOLLGATE_REDIS_URL`); without it the test that needs it is skipped, or fails under
//! `TOLLGATE_PEERS_REQUIRED=1` (as in `cargo xtask test-all`).

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{
    Served, assert_one_line_per_id, chat_line, output_lines, run_batch, text, tollgate, write_batch,
};
use tollgate_sim::{SimCapacity, SimConfig, SimLatency, SimLimits};

const PROCESSES: usize = 4;
const PER_PROCESS: usize = 15;

/// 600 requests a minute enforced per second: 10 at once, then 10 a second. One
/// process's batch of 15 paces within it; four at once, each pacing alone, do not.
fn provider() -> SimConfig {
    SimConfig::new(SimLimits {
        rpm: 600,
        input_tpm: 0,
        output_tpm: 0,
    })
    .with_capacity(SimCapacity::PerSecond)
    .with_latency(SimLatency {
        base: Duration::from_millis(50),
        per_output_token: Duration::ZERO,
        refusal: Duration::ZERO,
    })
}

/// Starts one `tollgate run` per process at once, each on its own batch and output.
fn start(
    dir: &Path,
    catalog: &Path,
    model: &str,
    redis: Option<&str>,
) -> Vec<(Child, Vec<String>)> {
    (0..PROCESSES)
        .map(|p| {
            let sub = dir.join(format!("p{p}"));
            std::fs::create_dir_all(&sub).unwrap();
            let ids: Vec<String> = (0..PER_PROCESS).map(|i| format!("p{p}-{i}")).collect();
            let lines: Vec<String> = ids.iter().map(|id| chat_line(id, "Hi")).collect();
            let input = write_batch(&sub, &lines);
            let mut cmd = run_batch(Some(catalog), &input, model, &sub.join("out.jsonl"));
            if let Some(url) = redis {
                cmd.args(["--redis", url]);
            }
            let child = cmd
                .arg("--quiet")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, ids)
        })
        .collect()
}

#[test]
fn run_processes_sharing_one_redis_pace_as_one_where_apart_they_meet_429s() {
    let Some(url) = tollgate_testkit::peers::url("TOLLGATE_REDIS_URL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A model id of this test run alone: its keys in Redis are `tollgate:{<id>}:lim`.
    let model = format!("shared-{}", std::process::id());
    let limits = "rpm = 600\nburst_seconds = 1";

    // Apart: each process paces itself at the whole limit, so together they send four
    // times what the provider allows.
    let apart = Served::new(provider(), 4);
    let catalog = dir.path().join("apart.toml");
    std::fs::write(&catalog, apart.catalog(&model, limits)).unwrap();
    for (child, _) in start(&dir.path().join("apart"), &catalog, &model, None) {
        child.wait_with_output().unwrap();
    }
    assert!(
        apart.server.stats().rate_limited > 0,
        "four processes pacing alone exceed the limit: {:?}",
        apart.server.stats()
    );

    // Together on one Redis: one limit for all four.
    runs_pace_as_one(dir.path(), &model, limits, &url);
}

/// Four `tollgate run`s at once on `--redis url` (one node or a cluster), on `model`
/// with `limits` at a fresh provider: every request answered, none refused by it.
fn runs_pace_as_one(dir: &Path, model: &str, limits: &str, url: &str) {
    let shared = Served::new(provider(), 4);
    let catalog = dir.join("shared.toml");
    std::fs::write(&catalog, shared.catalog(model, limits)).unwrap();
    let runs = start(&dir.join("shared"), &catalog, model, Some(url));
    for (p, (child, ids)) in runs.into_iter().enumerate() {
        let result = child.wait_with_output().unwrap();
        assert!(
            result.status.success(),
            "{}{}",
            text(&result.stdout),
            text(&result.stderr)
        );
        let out = dir.join(format!("shared/p{p}/out.jsonl"));
        let parsed = output_lines(&out);
        assert_one_line_per_id(&parsed, &ids);
        assert!(parsed.iter().all(|l| l["error"].is_null()), "{parsed:#?}");
    }
    let stats = shared.server.stats();
    assert_eq!(stats.rate_limited, 0, "paced as one: {stats:?}");
    assert_eq!(
        stats.accepted,
        (PROCESSES * PER_PROCESS) as u64,
        "{stats:?}"
    );
}

/// The Redis Cluster slot of a hash tag (CRC16/XMODEM mod 16384), to keep this test's
/// keys off the slots tollgate-redis's failover test kills the primary of (0–5460).
fn slot(tag: &str) -> u16 {
    let mut crc: u16 = 0;
    for b in tag.bytes() {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

#[test]
fn run_processes_sharing_one_redis_cluster_pace_as_one() {
    let Some(url) = tollgate_testkit::peers::url("TOLLGATE_REDIS_CLUSTER_URL") else {
        return;
    };
    assert_eq!(slot("123456789"), 12739, "the cluster's CRC16");
    let dir = tempfile::tempdir().unwrap();
    // `redis+cluster://` with every node as a seed; the model's key on a slot of its own.
    let mut models = (0..)
        .map(|i| format!("cluster-{}-{i}", std::process::id()))
        .filter(|m| slot(m) > 5460);
    let model = models.next().unwrap();
    runs_pace_as_one(dir.path(), &model, "rpm = 600\nburst_seconds = 1", &url);
    // The other form: comma-separated redis:// seeds.
    let seeds: Vec<String> = url
        .trim_start_matches("redis+cluster://")
        .split(',')
        .map(|s| format!("redis://{s}"))
        .collect();
    let again = dir.path().join("seeds");
    std::fs::create_dir_all(&again).unwrap();
    runs_pace_as_one(
        &again,
        &models.next().unwrap(),
        "rpm = 600\nburst_seconds = 1",
        &seeds.join(","),
    );
}

#[test]
fn run_with_redis_unanswering_sends_nothing_and_leaves_every_request_to_the_rerun() {
    let dir = tempfile::tempdir().unwrap();
    // A port that takes connections and never answers: each reservation times out.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/", silent.local_addr().unwrap());
    let served = Served::new(provider(), 4);
    let catalog = dir.path().join("models.toml");
    std::fs::write(&catalog, served.catalog("m", "rpm = 600")).unwrap();
    let ids: Vec<String> = (1..=3).map(|i| format!("r{i}")).collect();
    let lines: Vec<String> = ids.iter().map(|id| chat_line(id, "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let result = run_batch(Some(&catalog), &input, "m", &out)
        .args(["--redis", &url, "--quiet"])
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1), "{}", text(&result.stderr));
    assert_eq!(served.server.stats().calls, 0, "fails closed: nothing sent");
    let parsed = output_lines(&out);
    assert_one_line_per_id(&parsed, &ids);
    for l in &parsed {
        assert_eq!(l["error"]["code"], "limiter_unavailable", "{l}");
        assert_eq!(l["error"]["retryable"], true, "{l}");
    }
    drop(silent);
}

#[test]
fn redis_option_with_a_url_that_is_not_redis_says_what_to_give() {
    let result = tollgate()
        .args(["--redis", "http://127.0.0.1:6379/", "models"])
        .output()
        .unwrap();
    assert!(!result.status.success());
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("--redis") && stderr.contains("redis://"),
        "{stderr}"
    );
}

/// The keys matching `pattern` in the Redis at `url` (a plain RESP `KEYS` over TCP).
fn redis_keys(url: &str, pattern: &str) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    let address = url
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "*2\r\n$4\r\nKEYS\r\n${}\r\n{pattern}\r\n",
        pattern.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let count: usize = line.trim().trim_start_matches('*').parse().unwrap();
    (0..count)
        .map(|_| {
            let (mut len, mut key) = (String::new(), String::new());
            reader.read_line(&mut len).unwrap();
            reader.read_line(&mut key).unwrap();
            key.trim_end().to_owned()
        })
        .collect()
}

#[test]
fn redis_prefix_puts_a_runs_buckets_under_keys_of_its_own() {
    let Some(url) = tollgate_testkit::peers::url("TOLLGATE_REDIS_URL") else {
        return;
    };
    let prefix = format!("tollgate-prefix-test-{}", std::process::id());
    let result = tollgate()
        .args(["--redis", &url, "--redis-prefix", &prefix])
        .args(["chat", "-m", "demo", "Why reserve first?"])
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let keys = redis_keys(&url, &format!("{prefix}:*"));
    assert!(
        keys.iter().any(|k| k == &format!("{prefix}:{{demo}}:lim")),
        "{keys:?}"
    );
    // Without --redis there is nothing to prefix: the option says so.
    let alone = tollgate()
        .args(["--redis-prefix", &prefix, "models"])
        .output()
        .unwrap();
    assert!(!alone.status.success());
    assert!(
        text(&alone.stderr).contains("--redis"),
        "{}",
        text(&alone.stderr)
    );
}
