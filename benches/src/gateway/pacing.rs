//! Pacing through gateway replicas: one llmock enforcing an rpm limit per API key, two
//! `tollgate serve --redis` replicas sharing one Redis (catalog right), and three client
//! processes (this benchmark's binary, [`CHILD_ENV`] set) each sending its third of one
//! batch to a replica; beside it, two LiteLLM proxies with the same `rpm` on their
//! deployment and `router_settings` on the same Redis, with the same three clients, on
//! their own llmock key, at the same time. llmock's journal says what reached it; a
//! replay of its buckets gives the best possible makespan (as in benchmark 9).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process::{
    Server, catalog, litellm_binary, litellm_config, start_litellm, start_tollgate,
};
use crate::peers::journal::ClientTrace;
use crate::peers::measure::{Measured, measure};
use crate::peers::oracle::BucketLimits;
use crate::peers::server::{Clock, PeersRun};
use crate::peers::wire::{Dialect, Job, RawAnswer, Target, http_client, send, workload};
use crate::redis_server::RedisServer;
use crate::report::{Section, Table, num, ratio};

/// The variable that makes the benchmark binary run one client process and exit.
pub const CHILD_ENV: &str = "TOLLGATE_GATEWAY_CHILD";
/// Makespan over the best allowed.
pub const TARGET_MAKESPAN_RATIO: f64 = 1.05;
/// Sends per request a client process makes at most (a 429 from the gateway is retried
/// after its `retry-after`, as the SDKs do).
pub const CLIENT_ATTEMPTS: u32 = 20;

/// The batch and the limit.
#[derive(Debug, Clone, Copy)]
pub struct PacingConfig {
    /// llmock's requests per minute per key (and what both gateways are told).
    pub rpm: u64,
    /// Requests in the batch (split over the client processes).
    pub requests: usize,
    /// Client processes.
    pub processes: usize,
    /// Callers per client process.
    pub callers: usize,
    /// Gateway replicas.
    pub replicas: usize,
    /// Prompt words, least and most.
    pub words: (u64, u64),
    /// `max_tokens`.
    pub max_tokens: u64,
    /// llmock's latency before it admits (`--latency-ms`).
    pub latency_ms: u64,
    /// The batch's seed.
    pub seed: u64,
}

impl PacingConfig {
    /// The benchmark as `cargo xtask bench` runs it.
    pub const FULL: PacingConfig = PacingConfig {
        rpm: 60,
        requests: 120,
        processes: 3,
        callers: 10,
        replicas: 2,
        words: (10, 60),
        max_tokens: 50,
        latency_ms: 200,
        seed: 10,
    };

    fn limits(&self) -> BucketLimits {
        BucketLimits {
            rpm: Some(self.rpm),
            tpm: None,
        }
    }
}

/// What one client process reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChildReport {
    /// 429s the gateway answered the client.
    pub client_429: u32,
    /// Other failed sends (status or transport).
    pub client_errors: u32,
    /// Requests never answered 200.
    pub failed: u32,
}

impl ChildReport {
    fn line(&self) -> String {
        format!(
            "REPORT client_429={} client_errors={} failed={}",
            self.client_429, self.client_errors, self.failed
        )
    }

    fn parse(text: &str) -> Option<ChildReport> {
        let line = text.lines().find(|l| l.starts_with("REPORT "))?;
        let get = |k: &str| -> Option<u32> {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))?
                .parse()
                .ok()
        };
        Some(ChildReport {
            client_429: get("client_429")?,
            client_errors: get("client_errors")?,
            failed: get("failed")?,
        })
    }

    fn add(&mut self, other: ChildReport) {
        self.client_429 += other.client_429;
        self.client_errors += other.client_errors;
        self.failed += other.failed;
    }
}

/// One client process's work: `url` (a replica), the model, its part of the batch.
fn child_spec(url: &str, model: &str, part: usize, c: &PacingConfig) -> String {
    format!(
        "url={url} model={model} part={part} parts={} requests={} callers={} words={}-{} max_tokens={} seed={}",
        c.processes, c.requests, c.callers, c.words.0, c.words.1, c.max_tokens, c.seed
    )
}

/// Runs one client process (the child side) and prints its [`ChildReport`].
pub fn child_main(line: &str) {
    let get = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_else(|| {
                eprintln!("gateway child: no `{k}`");
                std::process::exit(2)
            })
    };
    let n = |k: &str| get(k).parse::<u64>().unwrap_or(0);
    let (lo, hi) = get("words").split_once('-').unwrap_or(("10", "10"));
    let words = (lo.parse().unwrap_or(10), hi.parse().unwrap_or(10));
    let (part, parts) = (n("part") as usize, n("parts").max(1) as usize);
    let jobs: Vec<Job> = workload(n("requests") as usize, words, n("max_tokens"), n("seed"))
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % parts == part)
        .map(|(_, j)| j)
        .collect();
    let target = Target {
        dialect: Dialect::OpenAi,
        llmock: get("url").to_owned(),
        api_key: "bench".into(),
        model: get("model").to_owned(),
    };
    let report = crate::real_runtime().block_on(run_client(target, jobs, n("callers") as usize));
    println!("{}", report.line());
}

async fn run_client(target: Target, jobs: Vec<Job>, callers: usize) -> ChildReport {
    let queue = std::sync::Arc::new(std::sync::Mutex::new(
        jobs.into_iter().collect::<std::collections::VecDeque<_>>(),
    ));
    let http = http_client();
    let tasks: Vec<_> = (0..callers.max(1))
        .map(|_| {
            let (queue, http, target) = (queue.clone(), http.clone(), target.clone());
            tokio::spawn(async move {
                let mut report = ChildReport::default();
                loop {
                    let job = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                    let Some(job) = job else { break };
                    let mut ok = false;
                    for _ in 0..CLIENT_ATTEMPTS {
                        match send(&http, &target, &job).await {
                            RawAnswer::Ok => {
                                ok = true;
                                break;
                            }
                            RawAnswer::RateLimited(wait) => {
                                report.client_429 += 1;
                                tokio::time::sleep(wait.unwrap_or(Duration::from_secs(1))).await;
                            }
                            RawAnswer::Failed(_) => {
                                report.client_errors += 1;
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                        }
                    }
                    report.failed += u32::from(!ok);
                }
                report
            })
        })
        .collect();
    let mut total = ChildReport::default();
    for t in tasks {
        total.add(t.await.unwrap_or_default());
    }
    total
}

/// One gateway's row.
#[derive(Debug, Clone)]
pub struct PacingRow {
    /// `tollgate serve` or `LiteLLM`, with how many replicas.
    pub gateway: String,
    /// From llmock's journal, against the replay.
    pub measured: Measured,
    /// What the client processes saw.
    pub clients: ChildReport,
    /// When the last client process ended, seconds from the batch's start.
    pub clients_done: f64,
}

/// Starts two replicas of each gateway, runs both batches at once, reads the journal.
pub async fn run(c: &PacingConfig, tollgate: &Path, dir: &Path) -> (Vec<PacingRow>, Vec<String>) {
    match run_inner(c, tollgate, dir).await {
        Ok(rows) => (rows, Vec::new()),
        Err(e) => (Vec::new(), vec![e]),
    }
}

struct Planned {
    gateway: String,
    model: &'static str,
    replicas: Vec<Server>,
}

async fn run_inner(
    c: &PacingConfig,
    tollgate: &Path,
    dir: &Path,
) -> Result<Vec<PacingRow>, String> {
    let redis = RedisServer::find_or_start()
        .ok_or("no Redis (redis-server on PATH, or TOLLGATE_REDIS_URL)")?;
    let peers = PeersRun::new(format!("bench-gateway-{}", std::process::id()));
    let llmock = peers.llmock("gateway-pacing", c.limits(), c.latency_ms)?;
    let mut planned = Vec::new();
    // tollgate serve: the catalog says what llmock enforces; the credential is the key.
    let model = "gw-tollgate";
    let (catalog_path, credentials) = (
        dir.join("pacing-catalog.toml"),
        dir.join("pacing-credentials.toml"),
    );
    let extra = format!("credential = \"llmock\"\nrpm = {}\n", c.rpm);
    std::fs::write(&catalog_path, catalog(model, &llmock.url, &extra))
        .map_err(|e| e.to_string())?;
    std::fs::write(&credentials, format!("llmock = \"key-{model}\"\n"))
        .map_err(|e| e.to_string())?;
    let global = [
        "--catalog".to_owned(),
        catalog_path.display().to_string(),
        "--credentials".to_owned(),
        credentials.display().to_string(),
        "--redis".to_owned(),
        redis.url.clone(),
    ];
    let replicas = (0..c.replicas)
        .map(|i| start_tollgate(&format!("tollgate serve {i}"), tollgate, &global))
        .collect::<Result<Vec<_>, _>>()?;
    planned.push(Planned {
        gateway: format!("`tollgate serve` ×{}, `--redis`", c.replicas),
        model,
        replicas,
    });
    // LiteLLM: rpm on the deployment, usage-based routing, the same Redis.
    let model = "gw-litellm";
    let port = redis
        .url
        .rsplit(':')
        .next()
        .unwrap_or("6379")
        .trim_end_matches('/');
    let config = dir.join("pacing-litellm.yaml");
    let router = format!(
        "  routing_strategy: usage-based-routing-v2\n  redis_host: 127.0.0.1\n  redis_port: {port}\n"
    );
    let params = format!("      rpm: {}\n", c.rpm);
    std::fs::write(
        &config,
        litellm_config(model, &llmock.url, &params, &router),
    )
    .map_err(|e| e.to_string())?;
    match litellm_binary().and_then(|bin| {
        (0..c.replicas)
            .map(|i| {
                start_litellm(
                    &format!("LiteLLM {i}"),
                    &bin,
                    &config,
                    1,
                    &dir.join(format!("pacing-litellm-{i}.log")),
                )
            })
            .collect::<Result<Vec<_>, _>>()
    }) {
        Ok(replicas) => planned.push(Planned {
            gateway: format!("LiteLLM ×{}, `rpm` + Redis", c.replicas),
            model,
            replicas,
        }),
        Err(e) => eprintln!("gateway pacing: LiteLLM: {e}"),
    }
    let sent = llmock.probe().await;
    let mut runs = Vec::new();
    for p in &planned {
        let specs: Vec<String> = (0..c.processes)
            .map(|i| child_spec(&p.replicas[i % p.replicas.len()].url, p.model, i, c))
            .collect();
        runs.push(tokio::spawn(run_children(specs)));
    }
    let mut outcomes = Vec::new();
    for r in runs {
        outcomes.push(r.await.map_err(|e| e.to_string())??);
    }
    let journal = llmock.journal().await?;
    let clock =
        Clock::from_journal(sent, &journal).ok_or("the clock probe is not in the journal")?;
    let mut rows = Vec::new();
    for (p, (t0, clients, clients_done)) in planned.iter().zip(outcomes) {
        let trace = ClientTrace::from_records(&journal, p.model, c.requests);
        let concurrency = c.processes * c.callers;
        let (measured, _) = measure(
            &p.gateway,
            &trace,
            clock.server(t0),
            c.limits(),
            concurrency,
            c.latency_ms as f64 / 1000.0,
        );
        eprintln!("gateway pacing: {measured:?} {clients:?}");
        rows.push(PacingRow {
            gateway: p.gateway.clone(),
            measured,
            clients,
            clients_done: clients_done.as_secs_f64(),
        });
    }
    drop(planned);
    drop(peers);
    drop(redis);
    Ok(rows)
}

/// Starts the client processes at once; the instant they started and their reports.
async fn run_children(
    specs: Vec<String>,
) -> Result<(tokio::time::Instant, ChildReport, Duration), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let t0 = tollgate::clock::now();
    let children = specs
        .iter()
        .map(|spec| {
            Command::new(&exe)
                .env(CHILD_ENV, spec)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
        })
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    tokio::task::spawn_blocking(move || {
        let mut total = ChildReport::default();
        for child in children {
            let out = child.wait_with_output().map_err(|e| e.to_string())?;
            let report = ChildReport::parse(&String::from_utf8_lossy(&out.stdout))
                .ok_or_else(|| format!("a client process reported nothing ({})", out.status))?;
            total.add(report);
        }
        Ok((t0, total, t0.elapsed()))
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The section: each gateway's row, with the targets.
pub fn section(rows: &[PacingRow], c: &PacingConfig, problems: &[String]) -> Section {
    let mut table = Table::new(&[
        "gateway",
        "requests",
        "upstream sends",
        "upstream 429s",
        "client 429s",
        "other client errors",
        "failed",
        "clients done s",
        "makespan s",
        "best s",
        "makespan / best",
        "mean s",
        "mean / best",
        "goodput",
    ]);
    let mut notes = Vec::new();
    for r in rows {
        let m = &r.measured;
        let comparable = |x: f64| if m.failed > 0 { "–".into() } else { ratio(x) };
        table.row(vec![
            r.gateway.clone(),
            m.requests.to_string(),
            m.sends.to_string(),
            m.rate_limited.to_string(),
            r.clients.client_429.to_string(),
            r.clients.client_errors.to_string(),
            r.clients.failed.to_string(),
            num(r.clients_done, 1),
            if m.failed > 0 {
                format!("{} (answered only)", num(m.makespan, 1))
            } else {
                num(m.makespan, 1)
            },
            num(m.best_makespan, 1),
            comparable(m.makespan_ratio()),
            num(m.mean, 1),
            comparable(m.mean_ratio()),
            ratio(m.goodput),
        ]);
        if r.gateway.starts_with("`tollgate serve`") {
            let met = |b: bool| if b { "met" } else { "missed" };
            notes.push(format!(
                "Targets for `tollgate serve`: 0 upstream 429s: {}, **{}**; makespan ≤ {TARGET_MAKESPAN_RATIO}× best: {:.3}×, **{}**.",
                m.rate_limited,
                met(m.rate_limited == 0),
                m.makespan_ratio(),
                met(m.makespan_ratio() <= TARGET_MAKESPAN_RATIO)
            ));
        }
    }
    notes.extend([
        format!(
            "One llmock (`--rpm {}`, continuous buckets per API key that start full, `--latency-ms {}`); each gateway has its own key on it, so both batches run at once. {} requests of {}–{} words, `max_tokens` {}, split over {} client processes of {} callers each (process i sends to replica i mod {}); a client retries a 429 after its `retry-after` (up to {CLIENT_ATTEMPTS} sends), as the SDKs do.",
            c.rpm, c.latency_ms, c.requests, c.words.0, c.words.1, c.max_tokens, c.processes, c.callers, c.replicas
        ),
        format!(
            "`tollgate serve`: catalog `rpm = {}` (what llmock enforces), `--redis` on one private redis-server shared by both replicas. LiteLLM 1.81.16: `rpm: {}` on the deployment, `routing_strategy: usage-based-routing-v2`, `redis_host`/`redis_port` of the same Redis in `router_settings`, one worker per replica.",
            c.rpm, c.rpm
        ),
        "upstream sends and 429s: from llmock's journal. client 429s / other errors: what the client processes were answered by the gateway. makespan and mean: from the batch's start to each request's accepted answer, on llmock's clock; best: the replay of llmock's buckets (earliest admission of each request in batch order, with the observed service times), as in benchmark 9. goodput: accepted over what the buckets allowed by the last accepted admission. clients done: when the last client process exited (having its answers, or having given up). With requests never answered, makespan and mean cover the answered ones only, so their ratios to the best are not comparable.".to_owned(),
    ]);
    for p in problems {
        notes.push(format!("Not measured: {p}."));
    }
    Section {
        title: "8b. Pacing through gateway replicas on Redis (llmock)".into(),
        intro: vec![
            "Three client processes through two replicas of each gateway sharing one Redis, against llmock enforcing a limit; `tollgate serve` and LiteLLM's proxy in the same run.".into(),
        ],
        table,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_report_survives_its_line() {
        let r = ChildReport {
            client_429: 3,
            client_errors: 1,
            failed: 2,
        };
        assert_eq!(
            ChildReport::parse(&format!("noise\n{}\n", r.line())),
            Some(r)
        );
    }
}
