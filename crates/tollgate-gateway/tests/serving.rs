//! Serving over a real 127.0.0.1 socket (tokio's paused clock, which advances when the
//! runtime idles): a client that never finishes its headers is closed after the header
//! read timeout; past the connection limit the longest idle connection makes room, and a
//! new one waits only while every connection is busy; a request hyper cannot parse is
//! still answered with an error body.

mod common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, ServeOptions, serve_with};

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nhost: gateway\r\n\r\n";

/// Serves the test gateway with `options`; dropping the sender stops it.
async fn start(options: ServeOptions) -> (std::net::SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let gateway = Gateway::new(common::models(&FakeProvider::new()));
    let shutdown = async move {
        let _ = stopped.await;
    };
    tokio::spawn(serve_with(listener, gateway, shutdown, options));
    (address, stop)
}

/// Reads one answer's head and body (`/health` answers "ok"), or what came before EOF.
async fn read_answer(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if seen.ends_with(b"\r\n\r\nok") {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_finishes_its_headers_is_closed_after_the_header_read_timeout() {
    let options = ServeOptions::DEFAULT.with_header_read_timeout(Duration::from_secs(2));
    let (address, _stop) = start(options).await;
    let mut slow = TcpStream::connect(address).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nhost: gat")
        .await
        .unwrap();
    let started = tollgate::clock::now();
    // Bounded so that a gateway that never closes fails the test instead of hanging it.
    let closed = tokio::time::timeout(Duration::from_secs(60), async {
        let mut buf = [0u8; 256];
        loop {
            match slow.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {} // a 408 before closing is fine too
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the connection was not closed");
    // Closed at the timeout (virtual time), not before.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // A client that sends its headers is answered as usual.
    let mut prompt = TcpStream::connect(address).await.unwrap();
    prompt.write_all(HEALTH).await.unwrap();
    assert!(read_answer(&mut prompt).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test(start_paused = true)]
async fn past_the_connection_limit_the_longest_idle_connection_is_closed_to_make_room() {
    let (address, _stop) = start(ServeOptions::DEFAULT.with_max_connections(2)).await;
    let mut older = TcpStream::connect(address).await.unwrap();
    older.write_all(HEALTH).await.unwrap();
    assert!(read_answer(&mut older).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut newer = TcpStream::connect(address).await.unwrap();
    newer.write_all(HEALTH).await.unwrap();
    assert!(read_answer(&mut newer).await.starts_with("HTTP/1.1 200"));
    // Both stay open (keep-alive), idle: the limit is reached. A third client is served
    // at once (no virtual time passes), the longest idle one closed for it.
    let asked = tollgate::clock::now();
    let mut third = TcpStream::connect(address).await.unwrap();
    third.write_all(HEALTH).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(60), read_answer(&mut third))
        .await
        .expect("served");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(asked.elapsed(), Duration::ZERO, "waited for room");
    let mut buf = [0u8; 16];
    assert_eq!(
        older.read(&mut buf).await.unwrap_or(0),
        0,
        "the older one is closed"
    );
    // The newer idle one is still served.
    newer.write_all(HEALTH).await.unwrap();
    assert!(read_answer(&mut newer).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test(start_paused = true)]
async fn past_the_connection_limit_with_every_connection_busy_a_new_one_waits_for_one_to_idle() {
    let fake = FakeProvider::new();
    fake.reply_any(FakeReply::text("done"));
    fake.with_latency(Duration::from_secs(5));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let gateway = Gateway::new(common::models(&fake));
    let options = ServeOptions::DEFAULT.with_max_connections(1);
    tokio::spawn(serve_with(
        listener,
        gateway,
        std::future::pending(),
        options,
    ));
    let mut busy = TcpStream::connect(address).await.unwrap();
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"Hi"}]}"#;
    let chat = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    busy.write_all(chat.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = tollgate::clock::now();
    let mut second = TcpStream::connect(address).await.unwrap();
    second.write_all(HEALTH).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(60), read_answer(&mut second))
        .await
        .expect("served once the busy one fell idle");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Not before the busy connection's answer (4 s more of the 5 s upstream).
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let mut seen = Vec::new();
    let _ = busy.read_to_end(&mut seen).await;
    let seen = String::from_utf8_lossy(&seen);
    assert!(
        seen.starts_with("HTTP/1.1 200") && seen.contains("done"),
        "{seen}"
    );
}

/// Sends `raw` on a fresh connection and reads until the gateway closes it.
async fn exchange(address: std::net::SocketAddr, raw: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(raw).await.unwrap();
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut seen)).await;
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test(start_paused = true)]
async fn a_request_hyper_cannot_parse_is_answered_with_a_json_error_body() {
    let (address, _stop) = start(ServeOptions::DEFAULT).await;
    let many_headers: String = (0..150).map(|i| format!("x-h{i}: v\r\n")).collect();
    let cases = [
        (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-length: abc\r\n\r\n"
                .to_owned(),
            "400",
            "malformed_http",
        ),
        (
            format!("GET /health HTTP/1.1\r\nhost: g\r\n{many_headers}\r\n"),
            "431",
            "headers_too_large",
        ),
    ];
    for (raw, status, code) in cases {
        let answer = exchange(address, raw.as_bytes()).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{answer}"
        );
        let (_, body) = answer.split_once("\r\n\r\n").unwrap();
        let v: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
        assert_eq!(v["error"]["code"], code, "{v}");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
}
