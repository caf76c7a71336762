//! Benchmark 9's rows, run in phases: the clients of a phase run at the same time against
//! one llmock, each with its own API key (llmock's buckets are per key, so they do not
//! share a limit) and its own model name (how the journal tells them apart). After a
//! phase, its journal is read and cleared.

use std::future::Future;
use std::pin::Pin;

use tokio::time::Instant;

use super::child::{ChildClient, ChildSpec, cli_binary, cli_command, spawn_child};
use super::clients::{models, run_cookbook, run_naive, run_tollgate};
use super::journal::ClientTrace;
use super::measure::{Measured, Targets, Verdict, measure, verdicts};
use super::oracle::BucketLimits;
use super::server::{Clock, Llmock, PeersRun};
use super::wire::{Dialect, Job, workload};

/// The sizes of benchmark 9.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeersConfig {
    /// llmock's requests per minute per key in the rpm rows.
    pub rpm: u64,
    /// Requests per rpm row.
    pub requests: usize,
    /// Callers per client (split evenly over the processes of the Redis row).
    pub concurrency: usize,
    /// Prompt words in the rpm rows, least and most.
    pub words: (u64, u64),
    /// `max_tokens` in the rpm rows.
    pub max_tokens: u64,
    /// llmock's tokens per minute per key in the tokens row (no rpm there).
    pub tpm: u64,
    /// Requests in the tokens row.
    pub tokens_requests: usize,
    /// Prompt words in the tokens row, least and most.
    pub tokens_words: (u64, u64),
    /// `max_tokens` in the tokens row.
    pub tokens_max_tokens: u64,
    /// llmock's latency before it admits and answers (`--latency-ms`).
    pub latency_ms: u64,
    /// Processes in the Redis row.
    pub processes: usize,
    /// The workload's seed.
    pub seed: u64,
}

impl PeersConfig {
    /// The benchmark as `cargo xtask bench` runs it.
    pub const FULL: PeersConfig = PeersConfig {
        rpm: 60,
        requests: 120,
        concurrency: 32,
        words: (10, 60),
        max_tokens: 50,
        tpm: 120_000,
        tokens_requests: 300,
        tokens_words: (20, 800),
        tokens_max_tokens: 100,
        latency_ms: 200,
        processes: 4,
        seed: 9,
    };

    fn rpm_limits(&self, factor: u64) -> BucketLimits {
        BucketLimits {
            rpm: Some(self.rpm * factor),
            tpm: None,
        }
    }

    fn tpm_limits(&self) -> BucketLimits {
        BucketLimits {
            rpm: None,
            tpm: Some(self.tpm),
        }
    }
}

/// A group of rows run at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// One dialect at the rpm limit, the catalog right and at 2×.
    Dialect(Dialect),
    /// OpenAI, bound by tokens per minute, mixed prompt sizes.
    Tokens,
    /// `tollgate run` on a batch file.
    Cli,
    /// Several processes on one key, tollgate through `tollgate-redis`.
    Redis,
}

impl Phase {
    /// Every phase, in the order they run.
    pub const ALL: [Phase; 6] = [
        Phase::Dialect(Dialect::OpenAi),
        Phase::Dialect(Dialect::Anthropic),
        Phase::Dialect(Dialect::Gemini),
        Phase::Tokens,
        Phase::Cli,
        Phase::Redis,
    ];

    /// Its name for `TOLLGATE_PEERS_ROWS` (`openai`, `anthropic`, `gemini`, `tokens`,
    /// `cli`, `redis`).
    pub fn tag(self) -> &'static str {
        match self {
            Phase::Dialect(d) => d.tag(),
            Phase::Tokens => "tokens",
            Phase::Cli => "cli",
            Phase::Redis => "redis",
        }
    }
}

/// One row's figures: every client, and tollgate's verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct RowResult {
    /// The row's name.
    pub title: String,
    /// llmock's limits and what the catalog says.
    pub setting: String,
    /// The clients, tollgate first.
    pub clients: Vec<Measured>,
    /// tollgate's targets and whether they were met.
    pub verdicts: Vec<Verdict>,
}

/// How a client of a phase runs.
#[derive(Debug, Clone)]
enum How {
    Tollgate(BucketLimits),
    Cookbook(BucketLimits),
    Naive,
    Cli(BucketLimits),
    Children(ChildClient, u64),
}

/// A client of a phase.
#[derive(Debug, Clone)]
struct Planned {
    row: usize,
    label: String,
    model: String,
    how: How,
    cookbook: bool,
}

/// A row of a phase before it runs.
#[derive(Debug, Clone)]
struct PlannedRow {
    title: String,
    setting: String,
    dialect: Dialect,
    jobs: Vec<Job>,
    targets: Targets,
}

type Started = Pin<Box<dyn Future<Output = Result<Instant, String>> + Send>>;

/// Everything a phase needs from outside: the run's llmocks and a Redis URL.
#[derive(Debug)]
pub struct Context<'a> {
    /// The llmocks of this run.
    pub peers: &'a PeersRun,
    /// The Redis for the shared row (`None`: that row is skipped).
    pub redis: Option<&'a str>,
    /// A unique prefix for Redis keys.
    pub prefix: String,
}

/// Runs one phase; its rows.
pub async fn run_phase(
    phase: Phase,
    config: &PeersConfig,
    context: &Context<'_>,
) -> Result<Vec<RowResult>, String> {
    let c = config;
    let (server, name) = match phase {
        Phase::Tokens => (c.tpm_limits(), "tpm"),
        _ => (c.rpm_limits(1), "rpm"),
    };
    let llmock = context.peers.llmock(name, server, c.latency_ms)?;
    let limit = |l: BucketLimits| match (l.rpm, l.tpm) {
        (Some(r), _) => format!("rpm {r}"),
        (_, Some(t)) => format!("tpm {t}"),
        _ => "none".into(),
    };
    let rpm_jobs = || workload(c.requests, c.words, c.max_tokens, c.seed);
    // An OpenAI row whose catalog says what llmock enforces.
    let at_limit = |title: String, jobs: Vec<Job>, targets: Targets| PlannedRow {
        title,
        setting: format!("llmock {}, catalog {}", limit(server), limit(server)),
        dialect: Dialect::OpenAi,
        jobs,
        targets,
    };
    let mut rows = Vec::new();
    let mut planned = Vec::new();
    let trio = |planned: &mut Vec<Planned>,
                row: usize,
                tag: &str,
                first: (&str, How),
                book: BucketLimits| {
        for (label, how, cookbook) in [
            (first.0.to_owned(), first.1, false),
            ("cookbook port".to_owned(), How::Cookbook(book), true),
            ("naive".to_owned(), How::Naive, false),
        ] {
            let model = format!("{tag}-{}", label.split_whitespace().next().unwrap_or("x"));
            planned.push(Planned {
                row,
                label,
                model,
                how,
                cookbook,
            });
        }
    };
    match phase {
        Phase::Dialect(dialect) => {
            for (factor, targets) in [(1, Targets::CatalogRight), (2, Targets::CatalogDouble)] {
                let row = rows.len();
                let catalog = c.rpm_limits(factor);
                rows.push(PlannedRow {
                    title: format!(
                        "{}, catalog {}",
                        dialect.name(),
                        if factor == 1 {
                            "right".into()
                        } else {
                            format!("{factor}×")
                        }
                    ),
                    setting: format!("llmock {}, catalog {}", limit(server), limit(catalog)),
                    dialect,
                    jobs: rpm_jobs(),
                    targets,
                });
                let tag = format!("{}-{factor}x", dialect.tag());
                trio(
                    &mut planned,
                    row,
                    &tag,
                    ("tollgate", How::Tollgate(catalog)),
                    catalog,
                );
            }
        }
        Phase::Tokens => {
            let jobs = workload(
                c.tokens_requests,
                c.tokens_words,
                c.tokens_max_tokens,
                c.seed,
            );
            let title = "OpenAI, tokens-bound, catalog right".into();
            rows.push(at_limit(title, jobs, Targets::CatalogRight));
            trio(
                &mut planned,
                0,
                "tokens",
                ("tollgate", How::Tollgate(server)),
                server,
            );
        }
        Phase::Cli => {
            rows.push(at_limit(
                "`tollgate run` (OpenAI), catalog right".into(),
                rpm_jobs(),
                Targets::CatalogRight,
            ));
            trio(
                &mut planned,
                0,
                "cli",
                ("tollgate run", How::Cli(server)),
                server,
            );
        }
        Phase::Redis => {
            if context.redis.is_none() {
                return Ok(Vec::new());
            }
            rows.push(at_limit(
                format!("{} processes on one key, tollgate-redis", c.processes),
                rpm_jobs(),
                Targets::Shared,
            ));
            let rpm = c.rpm;
            let quarter = (rpm / c.processes as u64).max(1);
            for (label, model, client, told, cookbook) in [
                (
                    "tollgate-redis".to_owned(),
                    "redis-tollgate",
                    ChildClient::TollgateRedis,
                    rpm,
                    false,
                ),
                (
                    "cookbook port, full limit per process".to_owned(),
                    "redis-cookbook-full",
                    ChildClient::Cookbook,
                    rpm,
                    true,
                ),
                (
                    format!("cookbook port, limit / {} per process", c.processes),
                    "redis-cookbook-part",
                    ChildClient::Cookbook,
                    quarter,
                    true,
                ),
                (
                    "naive".to_owned(),
                    "redis-naive",
                    ChildClient::Naive,
                    0,
                    false,
                ),
            ] {
                planned.push(Planned {
                    row: 0,
                    label,
                    model: model.into(),
                    how: How::Children(client, told),
                    cookbook,
                });
            }
        }
    }
    // Start every client at once; each reports the instant it started.
    let sent = llmock.probe().await;
    let mut started: Vec<Started> = Vec::new();
    for p in &planned {
        let row = &rows[p.row];
        started.push(start(p, row, &llmock, config, context));
    }
    let handles: Vec<_> = started.into_iter().map(tokio::spawn).collect();
    let mut t0s = Vec::new();
    for h in handles {
        t0s.push(h.await.map_err(|e| e.to_string())??);
    }
    let journal = llmock.journal().await?;
    llmock.clear_journal().await?;
    let clock =
        Clock::from_journal(sent, &journal).ok_or("the clock probe is not in the journal")?;
    let pre_admission = c.latency_ms as f64 / 1000.0;
    let mut results: Vec<RowResult> = rows
        .iter()
        .map(|r| RowResult {
            title: r.title.clone(),
            setting: r.setting.clone(),
            clients: Vec::new(),
            verdicts: Vec::new(),
        })
        .collect();
    let mut cookbooks: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    for (p, t0) in planned.iter().zip(t0s) {
        let trace = ClientTrace::from_records(&journal, &p.model, rows[p.row].jobs.len());
        let (m, _) = measure(
            &p.label,
            &trace,
            clock.server(t0),
            server,
            c.concurrency,
            pre_admission,
        );
        eprintln!("peers: {} / {}: {m:?}", rows[p.row].title, p.label);
        if p.cookbook {
            cookbooks[p.row].push(results[p.row].clients.len());
        }
        results[p.row].clients.push(m);
    }
    for ((result, row), books) in results.iter_mut().zip(&rows).zip(cookbooks) {
        let books: Vec<&Measured> = books.iter().map(|i| &result.clients[*i]).collect();
        result.verdicts = verdicts(row.targets, &result.clients[0], &books);
    }
    Ok(results)
}

/// Starts one client; the future ends when it has, with the instant it started.
fn start(
    p: &Planned,
    row: &PlannedRow,
    llmock: &Llmock,
    c: &PeersConfig,
    context: &Context<'_>,
) -> Started {
    let target = llmock.target(row.dialect, &p.model);
    let jobs = row.jobs.clone();
    let concurrency = c.concurrency;
    match p.how.clone() {
        How::Tollgate(catalog) => Box::pin(async move {
            let models = models("bench", &target, catalog, None).map_err(|e| e.to_string())?;
            let t0 = tollgate::clock::now();
            run_tollgate(&models, "bench", jobs, concurrency).await;
            Ok(t0)
        }),
        How::Cookbook(catalog) => Box::pin(async move {
            let t0 = tollgate::clock::now();
            run_cookbook(&target, jobs, concurrency, catalog).await;
            Ok(t0)
        }),
        How::Naive => Box::pin(async move {
            let t0 = tollgate::clock::now();
            run_naive(&target, jobs, concurrency).await;
            Ok(t0)
        }),
        How::Cli(catalog) => Box::pin(async move {
            let binary = cli_binary()?;
            let dir =
                std::env::temp_dir().join(format!("tollgate-peers-cli-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let mut command = cli_command(&binary, &dir, &target, catalog, &jobs, concurrency)
                .map_err(|e| e.to_string())?;
            let t0 = tollgate::clock::now();
            let status = tokio::task::spawn_blocking(move || command.status())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            eprintln!("peers: tollgate run exited with {status}");
            let _ = std::fs::remove_dir_all(&dir);
            Ok(t0)
        }),
        How::Children(client, rpm) => {
            let parts = c.processes.max(1);
            let specs: Vec<ChildSpec> = (0..parts)
                .map(|part| ChildSpec {
                    client,
                    llmock: llmock.url.clone(),
                    model: p.model.clone(),
                    part,
                    parts,
                    requests: jobs.len(),
                    words: c.words,
                    max_tokens: c.max_tokens,
                    seed: c.seed,
                    concurrency: (concurrency / parts).max(1),
                    rpm,
                    redis: context
                        .redis
                        .filter(|_| client == ChildClient::TollgateRedis)
                        .map(|url| (url.to_owned(), context.prefix.clone())),
                })
                .collect();
            Box::pin(async move {
                let t0 = tollgate::clock::now();
                let children = specs
                    .iter()
                    .map(spawn_child)
                    .collect::<std::io::Result<Vec<_>>>()
                    .map_err(|e| e.to_string())?;
                tokio::task::spawn_blocking(move || {
                    for child in children {
                        let out = child.wait_with_output().map_err(|e| e.to_string())?;
                        if !out.status.success() {
                            return Err(format!("a child process failed: {}", out.status));
                        }
                    }
                    Ok(t0)
                })
                .await
                .map_err(|e| e.to_string())?
            })
        }
    }
}
