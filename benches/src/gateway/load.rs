//! The head-of-line part's load: a persistent keep-alive HTTP client (reqwest, one
//! connection per caller), the small chat request, a POST read to its end, and a
//! streamed turn timed to its first token. (The overhead part drives wrk and its own
//! open-loop driver instead, which sends [`small_chat`] too.)

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
