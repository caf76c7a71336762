//! Shutdown over real 127.0.0.1 sockets: a request sent on an idle keep-alive connection
//! after the signal is answered 503 with `retry-after` (not reset); requests still in
//! flight when the grace ends are answered 503 in their dialect (a stream ends with an
//! error event) before their connections close. Real time, every wait bounded.

mod common;

use std::time::Duration;

use common::stalling::{self, Dropped, Stalling};
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tollgate::Models;
use tollgate_gateway::{Gateway, ServeOptions, serve_with};

const HANG: Duration = Duration::from_secs(60);

/// Serves `stalling`'s `talk` with `options`; the sender starts the shutdown.
async fn start(
    options: ServeOptions,
) -> (
    std::net::SocketAddr,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let models = Models::builder()
        .catalog(stalling::catalog())
        .provider(Stalling(Dropped::default()))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let task = tokio::spawn(serve_with(
        listener,
        Gateway::new(models),
        shutdown,
        options,
    ));
    (address, stop, task)
}

/// Waits until the gateway stops accepting (its listener is closed once shutdown starts,
/// right before it drains).
async fn draining(address: std::net::SocketAddr) {
    tokio::time::timeout(HANG, async {
        while TcpStream::connect(address).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the gateway stopped accepting");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// Waits until `/metrics` counts `n` requests in flight.
async fn in_flight(client: &reqwest::Client, metrics: &str, n: u64) {
    let series = format!("tollgate_gateway_in_flight {n}");
    tokio::time::timeout(HANG, async {
        loop {
            let text = client
                .get(metrics)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if text.lines().any(|l| l == series) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the requests reached the gateway");
}

#[tokio::test]
async fn a_request_on_an_idle_keep_alive_connection_after_the_signal_is_answered_503_not_reset() {
    let options = ServeOptions::DEFAULT.with_drain_linger(Duration::from_secs(20));
    let (address, stop, _task) = start(options).await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nhost: g\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(HANG, stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    stop.send(()).unwrap();
    draining(address).await;
    let body = r#"{"model":"talk","messages":[{"role":"user","content":"Hi"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(HANG, stream.read_to_end(&mut seen))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&seen).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1\r\n"), "{answer}");
    assert!(answer.contains("connection: close\r\n"), "{answer}");
    assert!(answer.contains("queue_closed"), "{answer}");
}

#[tokio::test]
async fn requests_in_flight_when_the_grace_ends_are_answered_503_in_their_dialect() {
    let options = ServeOptions::DEFAULT.with_grace(Duration::from_millis(500));
    let (address, stop, task) = start(options).await;
    let url = |path: &str| format!("http://{address}{path}");
    let client = common::client();
    let chat =
        json!({"model": "talk", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]});
    let whole_openai = client.post(url("/v1/chat/completions")).json(&chat).send();
    let whole_anthropic = client.post(url("/v1/messages")).json(&chat).send();
    let mut streamed = chat.clone();
    streamed["stream"] = true.into();
    let stream = client
        .post(url("/v1/messages"))
        .json(&streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let mut events = stream.bytes_stream();
    let first = events.next().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("message_start"),
        "{first:?}"
    );
    let openai = tokio::spawn(whole_openai);
    let anthropic = tokio::spawn(whole_anthropic);
    // All three are in flight (the stream and both whole requests) before the signal.
    in_flight(&client, &url("/metrics"), 3).await;
    stop.send(()).unwrap();
    let openai = tokio::time::timeout(HANG, openai).await.unwrap().unwrap();
    let anthropic = tokio::time::timeout(HANG, anthropic)
        .await
        .unwrap()
        .unwrap();
    for (response, error_type) in [
        (openai.unwrap(), "server_error"),
        (anthropic.unwrap(), "overloaded_error"),
    ] {
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "1");
        let v: serde_json::Value = response.json().await.unwrap();
        assert_eq!(v["error"]["type"], error_type, "{v}");
    }
    let mut rest = String::new();
    while let Some(chunk) = tokio::time::timeout(HANG, events.next()).await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("event: error"), "{rest}");
    assert!(
        rest.contains("shutting_down") || rest.contains("shutting down"),
        "{rest}"
    );
    tokio::time::timeout(HANG, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
