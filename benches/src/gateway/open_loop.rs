//! The open-loop driver of the pinned overhead benchmark: requests offered at a constant
//! rate whatever the answers do, each one's latency counted from the time it was due
//! (not from when it was sent), so a server that falls behind shows its queue.
//!
//! It runs as a child process of the gateway bench binary ([`OPEN_LOOP_ENV`] set to a
//! [`Spec`] line), pinned with the load generators, and prints one [`OpenLoop`] line. An
//! OS thread hands the due times to a current-thread tokio runtime over a channel; each
//! due time becomes a task that waits for one of a fixed pool of keep-alive connections
//! (a semaphore in front of reqwest's pool), sends, reads the whole answer and records
//! `answered_at - due`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::load::small_chat;
use super::pinned::{field, tagged_line};
use super::process::Launch;
use crate::stats::percentile;

/// Set (to a [`Spec`] line) in the bench binary's environment: run the open-loop driver.
pub const OPEN_LOOP_ENV: &str = "TOLLGATE_GATEWAY_OPEN_LOOP";

/// What one open-loop run offers, and to where.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The full URL (`…/v1/chat/completions`).
    pub url: String,
    /// The model in the body.
    pub model: String,
    /// Requests offered per second.
    pub rate: u64,
    /// How long requests are offered, seconds.
    pub seconds: f64,
    /// Keep-alive connections in the pool (requests in flight at most; the others wait,
    /// their clocks running from their due times).
    pub connections: usize,
    /// Portkey's `x-portkey-custom-host` (with the `x-portkey-provider: openai` header),
    /// if any.
    pub portkey_host: Option<String>,
}

impl Spec {
    /// The spec as one line of `key=value` pairs.
    pub fn line(&self) -> String {
        format!(
            "url={} model={} rate={} seconds={} connections={} portkey_host={}",
            self.url,
            self.model,
            self.rate,
            self.seconds,
            self.connections,
            self.portkey_host.as_deref().unwrap_or("-")
        )
    }

    /// A [`Spec::line`] back.
    pub fn parse(line: &str) -> Option<Spec> {
        let get = |k: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
        };
        Some(Spec {
            url: get("url")?.to_owned(),
            model: get("model")?.to_owned(),
            rate: get("rate")?.parse().ok()?,
            seconds: get("seconds")?.parse().ok()?,
            connections: get("connections")?.parse().ok()?,
            portkey_host: get("portkey_host").filter(|h| *h != "-").map(str::to_owned),
        })
    }

    /// Requests offered in all.
    pub fn requests(&self) -> usize {
        (self.rate as f64 * self.seconds).round() as usize
    }
}

/// What one open-loop run measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OpenLoop {
    /// Requests offered.
    pub offered: u64,
    /// Answered 2xx, read to the end.
    pub answered: u64,
    /// Not 2xx, or failed.
    pub errors: u64,
    /// Latency from the due time, µs (of the answered).
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
}

impl OpenLoop {
    /// The line the child prints.
    pub fn line(&self) -> String {
        format!(
            "OPENLOOP offered={} answered={} errors={} p50_us={} p99_us={} p999_us={}",
            self.offered, self.answered, self.errors, self.p50_us, self.p99_us, self.p999_us
        )
    }

    /// The `OPENLOOP …` line in a child's output, if there is one with every field.
    pub fn parse(output: &str) -> Option<OpenLoop> {
        let line = tagged_line(output, "OPENLOOP")?;
        let get = |k: &str| field(line, k);
        Some(OpenLoop {
            offered: get("offered")?,
            answered: get("answered")?,
            errors: get("errors")?,
            p50_us: get("p50_us")?,
            p99_us: get("p99_us")?,
            p999_us: get("p999_us")?,
        })
    }
}

/// The child side: parses the spec, drives, prints the [`OpenLoop`] line.
pub fn child_main(line: &str) {
    let Some(spec) = Spec::parse(line) else {
        eprintln!("open loop: a bad spec: {line}");
        std::process::exit(2);
    };
    println!("{}", drive(&spec).line());
}

/// Runs the driver as a child process of `exe` (the bench binary), launched as `launch`
/// says (pinned to the load core), and parses what it printed.
pub fn run_child(exe: &std::path::Path, spec: &Spec, launch: &Launch) -> Result<OpenLoop, String> {
    let out = launch
        .command(exe)
        .env(OPEN_LOOP_ENV, spec.line())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("open-loop child: {e}"))?;
    OpenLoop::parse(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| format!("the open-loop child printed nothing ({})", out.status))
}

/// Offers `spec.requests()` requests at `spec.rate` per second on a current-thread
/// runtime (built here; call it from a thread without one) and returns what was measured.
pub fn drive(spec: &Spec) -> OpenLoop {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(drive_async(spec))
}

async fn drive_async(spec: &Spec) -> OpenLoop {
    let connections = spec.connections.max(1);
    let http = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(connections)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client");
    // Not streamed: the open loop measures the plain route.
    let body = Bytes::from(serde_json::to_vec(&small_chat(&spec.model, false)).expect("JSON"));
    let send = Arc::new(Sender {
        http,
        url: spec.url.clone(),
        body,
        portkey_host: spec.portkey_host.clone(),
        permits: tokio::sync::Semaphore::new(connections),
    });
    // Unmeasured: open the pool's connections (each in flight at once) and warm them.
    let warm: Vec<_> = (0..connections * 4)
        .map(|_| {
            let send = send.clone();
            tokio::spawn(async move { send.one().await })
        })
        .collect();
    for w in warm {
        let _ = w.await;
    }
    let n = spec.requests();
    let rate = spec.rate.max(1) as f64;
    let start = tollgate::clock::now() + Duration::from_millis(20);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // The pacer: an OS thread sleeping to each due time (std's sleep, finer than tokio's
    // millisecond timer), handing the due time over; a late one is handed over at once.
    let pacer = std::thread::spawn(move || {
        for i in 0..n {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let wait = due.saturating_duration_since(tollgate::clock::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            if tx.send(due).is_err() {
                break;
            }
        }
    });
    let mut tasks = Vec::with_capacity(n);
    while let Some(due) = rx.recv().await {
        let send = send.clone();
        tasks.push(tokio::spawn(async move {
            let ok = send.one().await;
            ok.then(|| due.elapsed().as_secs_f64() * 1e6)
        }));
    }
    let _ = pacer.join();
    let mut latencies = Vec::with_capacity(n);
    let mut errors = 0;
    for t in tasks {
        match t.await {
            Ok(Some(us)) => latencies.push(us),
            _ => errors += 1,
        }
    }
    let pct = |q| {
        let p = percentile(&latencies, q);
        if p.is_finite() { p.round() as u64 } else { 0 }
    };
    OpenLoop {
        offered: n as u64,
        answered: latencies.len() as u64,
        errors,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
    }
}

/// What each request needs: the client, the request, the connection permits.
#[derive(Debug)]
struct Sender {
    http: reqwest::Client,
    url: String,
    body: Bytes,
    portkey_host: Option<String>,
    permits: tokio::sync::Semaphore,
}

impl Sender {
    /// Waits for a connection, sends, reads the whole answer: whether it was a 2xx.
    async fn one(&self) -> bool {
        let Ok(_permit) = self.permits.acquire().await else {
            return false;
        };
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("authorization", "Bearer bench")
            .body(self.body.clone());
        if let Some(host) = &self.portkey_host {
            request = request
                .header("x-portkey-provider", "openai")
                .header("x-portkey-custom-host", host);
        }
        match request.send().await {
            Ok(response) => response.status().is_success() && response.bytes().await.is_ok(),
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_round_trips_through_its_line() {
        let spec = Spec {
            url: "http://127.0.0.1:9/v1/chat/completions".into(),
            model: "fast".into(),
            rate: 5000,
            seconds: 2.5,
            connections: 64,
            portkey_host: None,
        };
        assert_eq!(Spec::parse(&spec.line()), Some(spec.clone()));
        assert_eq!(spec.requests(), 12_500);
        let portkey = Spec {
            portkey_host: Some("http://127.0.0.1:8/plain/v1".into()),
            ..spec
        };
        assert_eq!(Spec::parse(&portkey.line()), Some(portkey));
        assert_eq!(Spec::parse("url=x model=y"), None);
    }

    #[test]
    fn the_result_line_parses_back_and_a_partial_one_does_not() {
        let r = OpenLoop {
            offered: 15_000,
            answered: 14_990,
            errors: 10,
            p50_us: 180,
            p99_us: 950,
            p999_us: 3100,
        };
        let out = format!("noise\n{}\n", r.line());
        assert_eq!(OpenLoop::parse(&out), Some(r));
        assert_eq!(OpenLoop::parse("OPENLOOP offered=1 answered=1"), None);
        assert_eq!(OpenLoop::parse(""), None);
    }
}
