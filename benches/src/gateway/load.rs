//! The load: a persistent keep-alive HTTP client (reqwest, one connection per caller)
//! sending the same small chat request from a fixed number of callers, bounded in count
//! and in time; and a streamed turn timed to its first token.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

/// A client for loopback: no proxy, no Nagle, a connection kept per caller.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(1024)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("an HTTP client")
}

/// A small chat request for `model`: a dozen words, `max_tokens` 16, streamed or not.
pub fn small_chat(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": "Say hello to the benchmark, briefly, in one short line."}],
        "max_tokens": 16,
        "stream": stream,
    })
}

/// What one cell of load measured.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    /// Latencies of the requests answered 200, milliseconds.
    pub latencies: Vec<f64>,
    /// Requests not answered 200.
    pub errors: usize,
    /// From the first send to the last answer.
    pub elapsed: Duration,
}

impl Cell {
    /// Completed (200) requests per second.
    pub fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// POSTs `body` to `url` from `callers` callers, each sending its next request when the
/// last is answered, until `max_requests` were sent or `max_time` passed.
pub async fn drive(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    body: &Value,
    callers: usize,
    max_requests: usize,
    max_time: Duration,
) -> Cell {
    let body = Bytes::from(serde_json::to_vec(body).expect("JSON"));
    let sent = Arc::new(AtomicUsize::new(0));
    let started = tollgate::clock::now();
    let tasks: Vec<_> = (0..callers.max(1))
        .map(|_| {
            let (http, url, key, body, sent) = (
                http.clone(),
                url.to_owned(),
                key.to_owned(),
                body.clone(),
                sent.clone(),
            );
            tokio::spawn(async move {
                let (mut latencies, mut errors) = (Vec::new(), 0);
                while sent.fetch_add(1, Ordering::Relaxed) < max_requests
                    && started.elapsed() < max_time
                {
                    let t = tollgate::clock::now();
                    let ok = post(&http, &url, &key, body.clone()).await;
                    if ok {
                        latencies.push(t.elapsed().as_secs_f64() * 1e3);
                    } else {
                        errors += 1;
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut cell = Cell::default();
    for t in tasks {
        if let Ok((l, e)) = t.await {
            cell.latencies.extend(l);
            cell.errors += e;
        }
    }
    cell.elapsed = started.elapsed();
    cell
}

/// POSTs `body` (JSON) to `url` with `key` as the Bearer token and reads the answer to
/// its end; whether it was a 2xx.
pub async fn post(http: &reqwest::Client, url: &str, key: &str, body: Bytes) -> bool {
    let sent = http
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {key}"))
        .body(body)
        .send()
        .await;
    match sent {
        Ok(response) => {
            let ok = response.status().is_success();
            // Read the whole body, so the connection is reused.
            ok && response.bytes().await.is_ok()
        }
        Err(_) => false,
    }
}

/// Sends a streamed chat request and returns the time until the first streamed bytes
/// carrying `marker` (the first token's text) arrived, milliseconds; reads the stream
/// to its end. `None` if it failed.
pub async fn first_token(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    body: &Bytes,
    marker: &str,
) -> Option<f64> {
    use futures::StreamExt;
    let t = tollgate::clock::now();
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {key}"))
        .body(body.clone())
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut stream = response.bytes_stream();
    let mut seen = Vec::new();
    let mut first = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.ok()?;
        if first.is_none() {
            seen.extend_from_slice(&chunk);
            if seen.windows(marker.len()).any(|w| w == marker.as_bytes()) {
                first = Some(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    first
}
