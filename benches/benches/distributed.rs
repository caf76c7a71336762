//! Benchmark 4: many processes, one provider quota. 4 OS processes × 50 callers share
//! one model's rpm and tpm against one simulated provider served over HTTP on loopback
//! (`tollgate_bench::sim_http`), which enforces the limit and counts 429s. Compared:
//! `tollgate-redis`, and per-process in-process limiters at the full limit (what users
//! get today) and at limit/4. Real time (the processes share the machine's clock):
//! `TOLLGATE_DIST_SECONDS` per configuration (default 300).
//!
//! The bench binary is its own child: with `TOLLGATE_DIST_CHILD` set it runs one
//! process's callers and prints what it saw.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tollgate::catalog::Limits;
use tollgate::limit::{
    Cost, Feedback, LimiterBackend, LimiterConfig, Priority, TokenBucketRateLimiter,
};
use tollgate_bench::redis_server::RedisServer;
use tollgate_bench::report::{Section, Table, num, ratio};
use tollgate_bench::sim_http::{self, Answer};
use tollgate_bench::stats::percentile;
use tollgate_redis::{RedisConfig, RedisLimiters};
use tollgate_sim::{SimConfig, SimLatency, SimLimits, SimProvider, SimRequest};

const PROCESSES: usize = 4;
const CALLERS: usize = 50;
const RPM: u64 = 600;
/// Input tokens per minute (the simulated provider limits input and output separately;
/// the calls here are all input).
const TPM: u64 = 300_000;
const INPUT: u64 = 600;
const MAX_OUTPUT: u64 = 0;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Redis,
    Full,
    Quarter,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Redis => "redis",
            Mode::Full => "full",
            Mode::Quarter => "quarter",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Redis => "tollgate-redis (one shared limit)",
            Mode::Full => "in-process, full limit in each process (today)",
            Mode::Quarter => "in-process, limit / 4 in each process",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        [Mode::Redis, Mode::Full, Mode::Quarter]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

fn limits(divisor: u64) -> Limits {
    Limits {
        rpm: RPM / divisor,
        input_tpm: TPM / divisor,
        ..Limits::default()
    }
}

fn seconds() -> u64 {
    std::env::var("TOLLGATE_DIST_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

fn main() {
    if let Ok(mode) = std::env::var("TOLLGATE_DIST_CHILD") {
        let mode = Mode::parse(&mode).expect("a mode");
        runtime().block_on(child(mode));
        return;
    }
    let run = seconds();
    let Some(redis) = RedisServer::find_or_start() else {
        let mut section = Section {
            title: "6. Many processes, one quota (tollgate-redis)".into(),
            ..Section::default()
        };
        section.intro.push(
            "Skipped: no Redis (set TOLLGATE_REDIS_URL, or put redis-server on PATH).".into(),
        );
        section.emit();
        return;
    };
    let mut table = Table::new(&[
        "limiters",
        "goodput (of the limit)",
        "429s",
        "accepted",
        "round trips / reservation",
        "p50 reservation",
        "p99 reservation",
    ]);
    for mode in [Mode::Redis, Mode::Full, Mode::Quarter] {
        let row = runtime().block_on(scenario(mode, &redis.url, run));
        eprintln!("{}: {row:?}", mode.name());
        table.row(row);
    }
    let section = Section {
        title: "6. Many processes, one quota (tollgate-redis)".into(),
        intro: vec![format!(
            "{PROCESSES} OS processes × {CALLERS} greedy callers share one model's limits \
             (rpm {RPM}, input tpm {TPM}; every call {INPUT} input tokens, so the token \
             limit binds at {} calls a minute) against one simulated provider served over \
             HTTP on loopback, which enforces them exactly (full-minute buckets) and answers \
             in 100 ms. {run} s of real time per row; on a 429 a caller tells its limiter \
             (`retry-after`) and tries again.",
            TPM / INPUT
        )],
        table,
        notes: vec![
            "goodput: input tokens the provider accepted over the bound `capacity + rate × \
             duration` (what a perfect client gets)."
                .into(),
            "round trips / reservation: reservation script calls per reservation asked for; \
             other calls: refunds of the slots booked when the run ended (one per caller) and \
             throttle feedback, if any (every call costs what was reserved, so nothing is \
             settled)."
                .into(),
            "reservation latency: request to answer of the reservation call on loopback \
             (excluding the booked wait); in process there is no round trip."
                .into(),
            "limit / 4 matches the shared limit here only because every process is equally \
             busy; with uneven load an idle process's quarter is lost."
                .into(),
        ],
    };
    section.emit();
    drop(redis);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// One configuration: the provider, four child processes, the row.
async fn scenario(mode: Mode, redis_url: &str, run: u64) -> Vec<String> {
    let provider = SimProvider::new(
        SimConfig::new(SimLimits {
            rpm: RPM,
            input_tpm: TPM,
            output_tpm: 0,
        })
        .with_latency(SimLatency {
            base: Duration::from_millis(100),
            per_output_token: Duration::ZERO,
            refusal: Duration::ZERO,
        }),
    );
    let port = sim_http::serve(provider.clone()).await.expect("a port");
    let exe = std::env::current_exe().expect("this binary");
    let prefix = format!("tollgate-bench-{}-{}", std::process::id(), mode.name());
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .env("TOLLGATE_DIST_CHILD", mode.name())
                .env("TOLLGATE_DIST_PORT", port.to_string())
                .env("TOLLGATE_DIST_SECONDS", run.to_string())
                .env("TOLLGATE_DIST_PREFIX", &prefix)
                .env("TOLLGATE_REDIS_URL", redis_url)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("a child")
        })
        .collect();
    let outputs = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|c| c.wait_with_output().expect("the child's output"))
            .collect::<Vec<_>>()
    })
    .await
    .expect("the children");
    let mut latencies = Vec::new();
    let (mut reservations, mut round_trips, mut other_calls) = (0u64, 0u64, 0u64);
    for out in &outputs {
        assert!(out.status.success(), "a child failed");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(us) = line.strip_prefix("RTT ") {
                latencies.push(us.trim().parse::<f64>().unwrap_or(f64::NAN));
            } else if let Some(rest) = line.strip_prefix("COUNTS ") {
                let mut it = rest
                    .split_whitespace()
                    .map(|x| x.parse::<u64>().unwrap_or(0));
                reservations += it.next().unwrap_or(0);
                round_trips += it.next().unwrap_or(0);
                other_calls += it.next().unwrap_or(0);
            }
        }
    }
    let stats = provider.stats();
    let bound = TPM as f64 + TPM as f64 * run as f64 / 60.0;
    let goodput = stats.accepted_charge.input_tokens as f64 / bound;
    let ms = |q: f64| {
        if latencies.is_empty() {
            "–".to_owned()
        } else {
            format!("{} ms", num(percentile(&latencies, q) / 1000.0, 2))
        }
    };
    vec![
        mode.label().to_owned(),
        ratio(goodput),
        stats.rate_limited.to_string(),
        stats.accepted.to_string(),
        if mode == Mode::Redis {
            format!(
                "{} ({reservations} reservations; {other_calls} other calls)",
                num(round_trips as f64 / reservations.max(1) as f64, 3)
            )
        } else {
            "–".to_owned()
        },
        ms(0.50),
        ms(0.99),
    ]
}

/// One process's callers.
async fn child(mode: Mode) {
    let port: u16 = std::env::var("TOLLGATE_DIST_PORT")
        .expect("a port")
        .parse()
        .expect("a port");
    let run = Duration::from_secs(seconds());
    let config = |divisor| LimiterConfig::new("bench-model", limits(divisor));
    let redis = match mode {
        Mode::Redis => {
            let url = std::env::var("TOLLGATE_REDIS_URL").expect("a Redis URL");
            let prefix = std::env::var("TOLLGATE_DIST_PREFIX").expect("a prefix");
            let limiters =
                RedisLimiters::new(RedisConfig::new(url).with_key_prefix(prefix)).expect("URL");
            Some(limiters.limiter(&config(1)))
        }
        _ => None,
    };
    let backend: Arc<dyn LimiterBackend> = match (mode, &redis) {
        (Mode::Redis, Some(r)) => Arc::new(r.clone()),
        (Mode::Quarter, _) => Arc::new(TokenBucketRateLimiter::new(config(PROCESSES as u64))),
        _ => Arc::new(TokenBucketRateLimiter::new(config(1))),
    };
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let reservations = Arc::new(AtomicU64::new(0));
    let begin = tollgate::clock::now();
    let mut tasks = Vec::new();
    for _ in 0..CALLERS {
        let backend = backend.clone();
        let redis = redis.clone();
        let latencies = latencies.clone();
        let reservations = reservations.clone();
        tasks.push(tokio::spawn(async move {
            let mut client = sim_http::Client::connect(port).await.expect("the provider");
            let cost = Cost::call(INPUT, MAX_OUTPUT);
            let request = SimRequest::new(INPUT, MAX_OUTPUT, 0);
            while begin.elapsed() < run {
                let mut reservation = match &redis {
                    Some(r) => {
                        let (res, booking) = r
                            .reserve_booked(cost, Priority::default())
                            .await
                            .expect("a reservation");
                        if let Some(b) = booking {
                            latencies.lock().await.push(b.round_trip.as_micros() as u64);
                        }
                        res
                    }
                    None => backend
                        .reserve(cost, Priority::default())
                        .await
                        .expect("a reservation"),
                };
                reservations.fetch_add(1, Ordering::Relaxed);
                if begin.elapsed() >= run {
                    break; // dropped unsent: given back
                }
                reservation.mark_sent();
                match client.call(request).await.expect("an answer") {
                    Answer::Ok => backend.feedback(Feedback::Success),
                    Answer::RateLimited(retry_after) => {
                        // A refused call counts its request, not its tokens.
                        reservation.settle_counted(Cost {
                            requests: 1,
                            ..Cost::default()
                        });
                        backend.feedback(Feedback::RateLimited { retry_after });
                    }
                    Answer::Other(_) => {}
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("a caller");
    }
    if let Some(r) = &redis {
        r.flush().await;
    }
    let mut out = String::new();
    for us in latencies.lock().await.iter() {
        out += &format!("RTT {us}\n");
    }
    out += &format!(
        "COUNTS {} {} {}\n",
        reservations.load(Ordering::Relaxed),
        redis.as_ref().map_or(0, |r| r.reserve_round_trips()),
        redis
            .as_ref()
            .map_or(0, |r| r.round_trips() - r.reserve_round_trips())
    );
    print!("{out}");
}
