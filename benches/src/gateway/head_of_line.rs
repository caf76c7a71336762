//! Head-of-line blocking: small streamed turns timed to their first token, alone and
//! while 100k-token requests (a ~400 KB prompt, not streamed) go through the same path
//! back to back, straight to the upstream, through `tollgate serve` and through
//! LiteLLM's proxy. The upstream ([`serve_upstream`]) is a minimal OpenAI-compatible
//! server on its own thread that streams (the simulated provider does not): it answers
//! at once, without parsing the body, so the large request costs it only the read.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use tollgate::provider::{DefaultEstimator, TokenEstimator};

use super::load::{client, first_token, post, small_chat};
use super::process::{Server, start_both};
use crate::report::{Section, Table, num};
use crate::stats::percentile;

/// The model every path serves.
pub const MODEL: &str = "stream";
/// The first token's text, which the first-token clock looks for.
pub const FIRST_TOKEN: &str = "hello";
/// Added first-token p99 allowed, milliseconds.
pub const TARGET_ADDED_P99_MS: f64 = 1.0;

/// The turns and the large request.
#[derive(Debug, Clone, Copy)]
pub struct HolConfig {
    /// Streamed turns per phase.
    pub turns: usize,
    /// Callers sending them (each waits for its turn's end, then `gap`).
    pub callers: usize,
    /// Pause between one caller's turns.
    pub gap: Duration,
    /// The large request's input, in tokens (tollgate's estimate).
    pub large_tokens: u64,
    /// Pause after each large request's answer before the next is sent, so that the
    /// large requests do not keep a core busy on their own.
    pub large_gap: Duration,
    /// Each phase's longest run.
    pub max_time: Duration,
}

impl HolConfig {
    /// The benchmark as `cargo xtask bench` runs it.
    pub const FULL: HolConfig = HolConfig {
        turns: 1000,
        callers: 4,
        gap: Duration::from_millis(2),
        large_tokens: 100_000,
        large_gap: Duration::from_millis(20),
        max_time: Duration::from_secs(60),
    };
}

/// A prompt that tollgate's estimator counts as at least `tokens` tokens.
pub fn large_prompt(tokens: u64) -> String {
    const WORDS: [&str; 8] = [
        "the",
        "bucket",
        "refills",
        "steadily",
        "while",
        "requests",
        "wait",
        "patiently",
    ];
    let unit = WORDS.join(" ") + " ";
    let per_unit = DefaultEstimator.estimate_text(&unit).max(1);
    let mut prompt = unit.repeat(tokens.div_ceil(per_unit) as usize);
    while DefaultEstimator.estimate_text(&prompt) < tokens {
        prompt += &unit;
    }
    prompt
}

/// Serves a streaming OpenAI-compatible chat endpoint on 127.0.0.1 from a thread of its
/// own (a current-thread runtime), until the process ends; its base URL (no `/v1`).
pub fn serve_upstream() -> std::io::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(answer);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    Ok(format!("http://{addr}"))
}

fn chunk(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{MODEL}\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let compact: Vec<u8> = body.iter().copied().filter(|b| *b != b' ').collect();
    let stream = compact.windows(13).any(|w| w == b"\"stream\":true");
    let prompt_tokens = body.len() / 4;
    let usage = format!(
        "{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":1,\"total_tokens\":{}}}",
        prompt_tokens + 1
    );
    let (kind, text) = if stream {
        let mut sse = chunk(
            &format!("{{\"role\":\"assistant\",\"content\":\"{FIRST_TOKEN}\"}}"),
            "null",
        );
        sse += &chunk("{}", "\"stop\"");
        sse += &format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{MODEL}\",\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n"
        );
        ("text/event-stream", sse)
    } else {
        let json = format!(
            "{{\"id\":\"c\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"{MODEL}\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{FIRST_TOKEN}\"}},\"finish_reason\":\"stop\"}}],\"usage\":{usage}}}"
        );
        ("application/json", json)
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static(kind),
    );
    Ok(response)
}

/// One path in one phase.
#[derive(Debug, Clone)]
pub struct HolRow {
    /// `direct`, `tollgate serve`, `LiteLLM`.
    pub path: String,
    /// Whether the large requests ran beside.
    pub beside_large: bool,
    /// First-token times of the turns that streamed, ms.
    pub first_tokens: Vec<f64>,
    /// Of them, the turns sent while a large request was in flight.
    pub overlapped: Vec<f64>,
    /// Turns that failed.
    pub failed: usize,
    /// Large requests answered during the phase.
    pub large_done: usize,
    /// Large requests that failed.
    pub large_failed: usize,
    /// The large requests' mean latency, ms.
    pub large_ms: f64,
    /// The gateway's CPU time per large request sent alone, ms (`NaN`: direct).
    pub large_cpu_ms: f64,
}

/// Large requests sent one after another through `server` with nothing else in flight,
/// after two unmeasured: the CPU time (user + system) its processes spent per request, ms.
async fn large_cpu(http: &reqwest::Client, server: &Server, large: &Bytes) -> f64 {
    const MEASURED: usize = 20;
    let url = format!("{}/v1/chat/completions", server.url);
    for _ in 0..2 {
        post(http, &url, "bench", large.clone()).await;
    }
    let before = server.cpu();
    for _ in 0..MEASURED {
        post(http, &url, "bench", large.clone()).await;
    }
    (server.cpu() - before).as_secs_f64() * 1e3 / MEASURED as f64
}

async fn phase(
    http: &reqwest::Client,
    path: &str,
    base: &str,
    large: Option<Bytes>,
    c: &HolConfig,
) -> HolRow {
    let url = format!("{base}/v1/chat/completions");
    let small = Bytes::from(serde_json::to_vec(&small_chat(MODEL, true)).expect("JSON"));
    // Warm the connections (and the path) first.
    for _ in 0..c.callers * 4 {
        let _ = first_token(http, &url, "bench", &small, FIRST_TOKEN).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let large_task = large.map(|body| {
        let (http, url, stop, gap) = (http.clone(), url.clone(), stop.clone(), c.large_gap);
        tokio::spawn(async move {
            let (mut spans, mut failed) = (Vec::new(), 0usize);
            while !stop.load(Ordering::Relaxed) {
                let t = tollgate::clock::now();
                if post(&http, &url, "bench", body.clone()).await {
                    spans.push((t, tollgate::clock::now()));
                } else {
                    failed += 1;
                }
                tokio::time::sleep(gap).await;
            }
            (spans, failed)
        })
    });
    if large_task.is_some() {
        // Let the first large request get under way.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = tollgate::clock::now();
    let next = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..c.callers)
        .map(|_| {
            let (http, url, small, next, c) =
                (http.clone(), url.clone(), small.clone(), next.clone(), *c);
            tokio::spawn(async move {
                let (mut times, mut failed) = (Vec::new(), 0);
                while next.fetch_add(1, Ordering::Relaxed) < c.turns
                    && started.elapsed() < c.max_time
                {
                    let sent = tollgate::clock::now();
                    match first_token(&http, &url, "bench", &small, FIRST_TOKEN).await {
                        Some(ms) => times.push((sent, ms)),
                        None => failed += 1,
                    }
                    tokio::time::sleep(c.gap).await;
                }
                (times, failed)
            })
        })
        .collect();
    let mut row = HolRow {
        path: path.to_owned(),
        beside_large: large_task.is_some(),
        first_tokens: Vec::new(),
        overlapped: Vec::new(),
        failed: 0,
        large_done: 0,
        large_failed: 0,
        large_ms: f64::NAN,
        large_cpu_ms: f64::NAN,
    };
    let mut turns = Vec::new();
    for t in callers {
        if let Ok((times, failed)) = t.await {
            turns.extend(times);
            row.failed += failed;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut spans = Vec::new();
    if let Some(t) = large_task
        && let Ok((done, failed)) = t.await
    {
        row.large_done = done.len();
        row.large_failed = failed;
        let total: Duration = done.iter().map(|(a, b)| *b - *a).sum();
        row.large_ms = total.as_secs_f64() * 1e3 / done.len().max(1) as f64;
        spans = done;
    }
    row.first_tokens = turns.iter().map(|(_, ms)| *ms).collect();
    row.overlapped = turns
        .iter()
        .filter(|(sent, _)| spans.iter().any(|(a, b)| a <= sent && sent < b))
        .map(|(_, ms)| *ms)
        .collect();
    eprintln!(
        "gateway hol: {path} beside={}: {} turns, p99 {:.3} ms, {} overlapping p99 {:.3} ms, {} large ({:.1} ms), {} failed",
        row.beside_large,
        row.first_tokens.len(),
        percentile(&row.first_tokens, 0.99),
        row.overlapped.len(),
        percentile(&row.overlapped, 0.99),
        row.large_done,
        row.large_ms,
        row.failed + row.large_failed,
    );
    row
}

/// Runs every path alone and beside the large requests.
pub async fn run(c: &HolConfig, tollgate: &Path, dir: &Path) -> (Vec<HolRow>, Vec<String>) {
    let base = match serve_upstream() {
        Ok(b) => b,
        Err(e) => return (Vec::new(), vec![format!("the upstream: {e}")]),
    };
    let (servers, problems) = start_both(tollgate, dir, "hol", MODEL, &base, 2);
    let prompt = large_prompt(c.large_tokens);
    let large = Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "model": MODEL,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 16,
        }))
        .expect("JSON"),
    );
    let http = client();
    let mut rows = Vec::new();
    let paths: Vec<(String, String, Option<&Server>)> =
        std::iter::once(("direct".to_owned(), base.clone(), None))
            .chain(
                servers
                    .iter()
                    .map(|s| (s.name.clone(), s.url.clone(), Some(s))),
            )
            .collect();
    for (name, url, server) in &paths {
        let cpu = match server {
            Some(s) => large_cpu(&http, s, &large).await,
            None => f64::NAN,
        };
        rows.push(phase(&http, name, url, None, c).await);
        let mut beside = phase(&http, name, url, Some(large.clone()), c).await;
        beside.large_cpu_ms = cpu;
        rows.push(beside);
    }
    drop(servers);
    (rows, problems)
}

/// The section: first-token p50/p99 per path, alone and beside the large requests, and
/// what the large requests added.
pub fn section(rows: &[HolRow], c: &HolConfig, problems: &[String]) -> Section {
    let mut table = Table::new(&[
        "path",
        "100k-token requests beside",
        "turns",
        "failed",
        "first token p50 ms",
        "first token p99 ms",
        "added p99 ms",
        "turns sent during a 100k request",
        "their p99 ms",
        "their added p99 ms",
        "100k-token requests answered",
        "their mean ms",
        "gateway CPU ms per 100k request",
    ]);
    let mut notes = Vec::new();
    for r in rows {
        let alone = rows.iter().find(|a| a.path == r.path && !a.beside_large);
        let p99 = |v: &[f64]| percentile(v, 0.99);
        let added = |v: &[f64]| alone.map_or(f64::NAN, |a| p99(v) - p99(&a.first_tokens));
        let beside = |cell: String| if r.beside_large { cell } else { "–".into() };
        table.row(vec![
            r.path.clone(),
            beside(format!("yes, {} ms apart", c.large_gap.as_millis())),
            r.first_tokens.len().to_string(),
            r.failed.to_string(),
            num(percentile(&r.first_tokens, 0.5), 3),
            num(p99(&r.first_tokens), 3),
            beside(num(added(&r.first_tokens), 3)),
            beside(r.overlapped.len().to_string()),
            beside(num(p99(&r.overlapped), 3)),
            beside(num(added(&r.overlapped), 3)),
            beside(r.large_done.to_string()),
            beside(num(r.large_ms, 1)),
            beside(num(r.large_cpu_ms, 1)),
        ]);
        if r.path == "tollgate serve" && r.beside_large {
            let (all, during) = (added(&r.first_tokens), added(&r.overlapped));
            let verdict = |x: f64| {
                if x <= TARGET_ADDED_P99_MS {
                    "met"
                } else {
                    "missed"
                }
            };
            notes.push(format!(
                "Target for `tollgate serve`: first-token p99 added by the 100k-token requests ≤ {TARGET_ADDED_P99_MS} ms: {during:.3} ms for the turns sent while one was in flight, **{}**; {all:.3} ms over all turns of the phase, **{}**.",
                verdict(during),
                verdict(all)
            ));
        }
    }
    notes.extend([
        format!(
            "Small turns: OpenAI `/v1/chat/completions` with `stream: true`, a dozen words, {} callers each sending its next turn {} ms after the last one's end, {} turns per phase; first token: from the send to the first streamed bytes carrying the first token's text. Beside: 100k-token requests (a {:.0} KB prompt, {} tokens by tollgate's estimator, not streamed) sent one at a time on one more connection through the same path for the whole phase, each {} ms after the last one's answer.",
            c.callers,
            c.gap.as_millis(),
            c.turns,
            large_prompt(c.large_tokens).len() as f64 / 1000.0,
            DefaultEstimator.estimate_text(&large_prompt(c.large_tokens)),
            c.large_gap.as_millis(),
        ),
        "Added p99: the p99 beside the large requests (of all the phase's turns, or of those sent while a large request was in flight, between its send and its answer) minus the p99 alone, on the same path, in the same run. Gateway CPU per 100k request: user + system time of the gateway's processes over 20 large requests sent one after another with nothing else in flight, before the phases. The driver and the upstream share this process (the upstream on a thread of its own), so `direct`'s added figure is what the large requests cost outside any gateway.".to_owned(),
    ]);
    for p in problems {
        notes.push(format!("Not measured: {p}."));
    }
    Section {
        title: "8c. Head-of-line blocking: streamed turns beside a 100k-token request".into(),
        intro: vec![
            "Small streamed turns' first token, alone and while 100k-token requests go through the same gateway, for `tollgate serve` and LiteLLM's proxy, in one run.".into(),
        ],
        table,
        notes,
    }
}
