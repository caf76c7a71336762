//! The gateway's overhead: the same small chat request from a persistent client at
//! concurrency 1, 16, 64 and 256, straight to a fast upstream (`tollgate-sim` over HTTP,
//! limits off, no latency), through `tollgate serve`, and through LiteLLM's proxy, in one
//! run. Added latency is a percentile through a gateway minus the same percentile
//! straight to the upstream at the same concurrency.

use std::path::Path;
use std::time::Duration;

use tollgate_sim::{SimConfig, SimLatency, SimLimits, SimProvider};

use super::load::{Cell, client, drive, small_chat};
use super::process::{Server, start_both};
use crate::report::{Section, Table, num, ratio};
use crate::stats::percentile;

/// The concurrencies measured.
pub const CONCURRENCY: [usize; 4] = [1, 16, 64, 256];
/// The model id every path serves.
pub const MODEL: &str = "fast";
/// Added p99 allowed at concurrency 64, milliseconds.
pub const TARGET_ADDED_P99_MS: f64 = 1.0;
/// Peak resident memory allowed, bytes.
pub const TARGET_RSS: u64 = 64 << 20;
/// Throughput over LiteLLM's wanted.
pub const TARGET_THROUGHPUT_RATIO: f64 = 10.0;

/// How long each cell runs and how many requests it may send.
#[derive(Debug, Clone, Copy)]
pub struct OverheadConfig {
    /// Measured time per cell, at most.
    pub seconds: f64,
    /// Requests per cell, at most.
    pub max_requests: usize,
    /// Unmeasured requests before each cell (connections opened, caches warm).
    pub warmup: usize,
    /// LiteLLM's worker processes (`--num_workers`).
    pub litellm_workers: usize,
}

impl OverheadConfig {
    /// The benchmark as `cargo xtask bench` runs it.
    pub const FULL: OverheadConfig = OverheadConfig {
        seconds: 4.0,
        max_requests: 40_000,
        warmup: 300,
        litellm_workers: 2,
    };
}

/// A fast upstream: the simulated provider with no limits and no latency.
pub fn fast_sim() -> SimProvider {
    let none = SimLimits {
        rpm: 0,
        input_tpm: 0,
        output_tpm: 0,
    };
    SimProvider::new(SimConfig::new(none).with_latency(SimLatency {
        base: Duration::ZERO,
        per_output_token: Duration::ZERO,
        refusal: Duration::ZERO,
    }))
}

/// One path's cell at one concurrency.
#[derive(Debug, Clone)]
pub struct OverheadRow {
    /// Concurrency.
    pub concurrency: usize,
    /// `direct`, `tollgate serve`, `LiteLLM`.
    pub path: String,
    /// What was measured.
    pub cell: Cell,
    /// CPU of the gateway process(es) per completed request, µs (`None`: direct).
    pub cpu_us: Option<f64>,
    /// Peak RSS of the gateway process(es) so far, bytes.
    pub peak_rss: Option<u64>,
}

async fn measure(
    http: &reqwest::Client,
    path: &str,
    base: &str,
    server: Option<&Server>,
    concurrency: usize,
    c: &OverheadConfig,
) -> OverheadRow {
    let url = format!("{base}/v1/chat/completions");
    let body = small_chat(MODEL, false);
    let warm = Duration::from_secs(30);
    drive(http, &url, "bench", &body, concurrency, c.warmup, warm).await;
    let cpu = server.map(Server::cpu);
    let cell = drive(
        http,
        &url,
        "bench",
        &body,
        concurrency,
        c.max_requests,
        Duration::from_secs_f64(c.seconds),
    )
    .await;
    let done = cell.latencies.len().max(1) as f64;
    let cpu_us = server
        .zip(cpu)
        .map(|(s, before)| (s.cpu() - before).as_secs_f64() * 1e6 / done);
    eprintln!(
        "gateway overhead: c={concurrency} {path}: {} ok, {} errors, {:.0}/s",
        cell.latencies.len(),
        cell.errors,
        cell.throughput()
    );
    OverheadRow {
        concurrency,
        path: path.to_owned(),
        cell,
        cpu_us,
        peak_rss: server.map(Server::peak_rss),
    }
}

/// Runs the three paths at every concurrency; problems (a path that could not start)
/// are returned beside the rows.
pub async fn run(
    c: &OverheadConfig,
    tollgate: &Path,
    dir: &Path,
) -> (Vec<OverheadRow>, Vec<String>) {
    let upstream = match tollgate_sim::http::serve(fast_sim(), 8).await {
        Ok(s) => s,
        Err(e) => return (Vec::new(), vec![format!("the upstream: {e}")]),
    };
    let base = upstream.base_url();
    let (servers, problems) =
        start_both(tollgate, dir, "overhead", MODEL, &base, c.litellm_workers);
    let http = client();
    let mut rows = Vec::new();
    for concurrency in CONCURRENCY {
        rows.push(measure(&http, "direct", &base, None, concurrency, c).await);
        for s in &servers {
            rows.push(measure(&http, &s.name, &s.url, Some(s), concurrency, c).await);
        }
    }
    drop(servers);
    (rows, problems)
}

fn ms(x: f64) -> String {
    num(x, 3)
}

/// The section: one table, every path at every concurrency, with the added latency
/// against `direct` and the throughput against LiteLLM's at the same concurrency.
pub fn section(rows: &[OverheadRow], c: &OverheadConfig, problems: &[String]) -> Section {
    let mut table = Table::new(&[
        "concurrency",
        "path",
        "answered",
        "errors",
        "p50 ms",
        "p99 ms",
        "added p50 ms",
        "added p99 ms",
        "req/s",
        "req/s over LiteLLM's",
        "gateway CPU µs/req",
        "gateway peak RSS MiB",
    ]);
    let pct = |r: &OverheadRow, q| percentile(&r.cell.latencies, q);
    let find = |concurrency, path: &str| {
        rows.iter()
            .find(|r| r.concurrency == concurrency && r.path == path)
    };
    let mut notes = Vec::new();
    for r in rows {
        let direct = find(r.concurrency, "direct");
        let added = |q| direct.map_or(f64::NAN, |d| pct(r, q) - pct(d, q));
        let litellm = find(r.concurrency, "LiteLLM").map_or(f64::NAN, |l| l.cell.throughput());
        let is_direct = r.path == "direct";
        table.row(vec![
            r.concurrency.to_string(),
            r.path.clone(),
            r.cell.latencies.len().to_string(),
            r.cell.errors.to_string(),
            ms(pct(r, 0.5)),
            ms(pct(r, 0.99)),
            if is_direct {
                "–".into()
            } else {
                ms(added(0.5))
            },
            if is_direct {
                "–".into()
            } else {
                ms(added(0.99))
            },
            num(r.cell.throughput(), 0),
            if is_direct {
                "–".into()
            } else {
                ratio(r.cell.throughput() / litellm)
            },
            r.cpu_us.map_or("–".into(), |x| num(x, 1)),
            r.peak_rss
                .map_or("–".into(), |b| num(b as f64 / f64::from(1 << 20), 1)),
        ]);
        if r.path == "tollgate serve" {
            if r.concurrency == 64 {
                let a = added(0.99);
                notes.push(format!(
                    "Target added p99 ≤ {TARGET_ADDED_P99_MS} ms at concurrency 64: {:.3} ms, **{}**.",
                    a,
                    if a <= TARGET_ADDED_P99_MS { "met" } else { "missed" }
                ));
            }
            let x = r.cell.throughput() / litellm;
            if x.is_finite() && x < TARGET_THROUGHPUT_RATIO {
                notes.push(format!(
                    "Target ≥ {TARGET_THROUGHPUT_RATIO}× LiteLLM's throughput at concurrency {}: {x:.2}×, **missed**.",
                    r.concurrency
                ));
            }
        }
    }
    let tollgate: Vec<&OverheadRow> = rows.iter().filter(|r| r.path == "tollgate serve").collect();
    let lowest = tollgate
        .iter()
        .map(|r| {
            r.cell.throughput()
                / find(r.concurrency, "LiteLLM").map_or(f64::NAN, |l| l.cell.throughput())
        })
        .fold(f64::INFINITY, f64::min);
    if lowest.is_finite() && lowest >= TARGET_THROUGHPUT_RATIO {
        notes.push(format!(
            "Target ≥ {TARGET_THROUGHPUT_RATIO}× LiteLLM's throughput: at least {lowest:.1}× at every concurrency, **met**."
        ));
    }
    if let Some(peak) = tollgate.iter().filter_map(|r| r.peak_rss).max() {
        notes.push(format!(
            "Target peak RSS ≤ 64 MiB: {:.1} MiB (`VmHWM` of `tollgate serve` after the whole run), **{}**.",
            peak as f64 / f64::from(1 << 20),
            if peak <= TARGET_RSS { "met" } else { "missed" }
        ));
    }
    notes.extend([
        "The driver is this benchmark's process: a reqwest client (HTTP/1.1 keep-alive, one connection per caller), each caller sending its next request when the last is answered; the upstream (`tollgate_sim::http`, no limits, no latency, 8 output tokens) runs in the same process. `tollgate serve` is the release binary with a catalog of one `openai-compatible` model and no limits; LiteLLM is its proxy (litellm 1.81.16) with one `openai/` deployment, callbacks, spend and error logs, telemetry and retries off.".to_owned(),
        "Added p50/p99: that percentile of the latencies through the gateway minus the same percentile straight to the upstream at the same concurrency, in the same run (so it includes the gateway's extra loopback hop).".to_owned(),
        "req/s: answered (200) requests over the cell's time. Gateway CPU: user + system time of the gateway's process tree (`/proc/PID/stat`) during the cell over its answered requests. Peak RSS: `VmHWM` summed over the process tree (LiteLLM: all its processes, uvicorn's supervisor and its workers, pages they share counted in each), so far in the run (it only grows).".to_owned(),
        format!(
            "Each cell: {} unmeasured requests, then up to {} requests or {} s. LiteLLM runs `--num_workers {}` (one per core); tollgate serve runs tokio's default, one worker thread per core.",
            c.warmup, c.max_requests, c.seconds, c.litellm_workers
        ),
    ]);
    for p in problems {
        notes.push(format!("Not measured: {p}."));
    }
    Section {
        title: "8. The gateway's overhead (`tollgate serve` beside LiteLLM's proxy)".into(),
        intro: vec![
            "The same small chat request (OpenAI `/v1/chat/completions`, not streamed) at concurrency 1, 16, 64 and 256: straight to a fast upstream, through `tollgate serve`, and through LiteLLM's proxy, in front of the same upstream, in one run.".into(),
        ],
        table,
        notes,
    }
}
