//! Slow, idle and keyless clients over real 127.0.0.1 sockets: the key is checked from
//! the headers before a byte of the body is read; a body that does not arrive is answered
//! 408; thousands of trickling keyless connections, and thousands of idle ones filling the
//! connection limit, leave a keyed client served. Real time, each wait bounded so that a
//! gateway that locks up fails the test instead of hanging it.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{SECRET, keys, models};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{BodyTiming, Gateway, ServeOptions};

/// A bound on each wait: only a locked-up gateway reaches it.
const HANG: Duration = Duration::from_secs(60);

const CHAT: &str = r#"{"model":"chat","messages":[{"role":"user","content":"Hi"}]}"#;

/// Serves a keyed gateway whose `chat` model answers "ok" (`answers` times).
async fn keyed(options: ServeOptions, timing: BodyTiming, answers: usize) -> SocketAddr {
    let fake = FakeProvider::new();
    for _ in 0..answers {
        fake.reply_any(FakeReply::text("ok"));
    }
    let gateway = Gateway::new(models(&fake))
        .with_keys(keys())
        .unwrap()
        .with_body_timing(timing);
    common::serve_until_the_end(gateway, options).await
}

/// A chat request's head with `auth` (an `authorization` line or nothing) announcing a
/// body of `length` bytes.
fn head(auth: &str, length: usize) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n{auth}content-length: {length}\r\n\r\n"
    )
}

/// Reads until the status line and headers are in, then `content-length` bytes.
async fn read_response(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|v| v.trim().parse::<usize>().ok());
            if length.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// One keyed chat on a fresh connection; its status line.
async fn probe(address: SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let auth = format!("authorization: Bearer {SECRET}\r\n");
    let request = format!("{}{CHAT}", head(&auth, CHAT.len()));
    stream.write_all(request.as_bytes()).await.unwrap();
    let answer = read_response(&mut stream).await;
    answer.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_wrong_key_is_refused_from_the_headers_before_the_body_is_read() {
    let address = keyed(ServeOptions::DEFAULT, BodyTiming::DEFAULT, 0).await;
    for auth in ["", "authorization: Bearer wrong\r\n"] {
        let mut stream = TcpStream::connect(address).await.unwrap();
        // A megabyte announced, none sent: the answer cannot have waited for it.
        stream
            .write_all(head(auth, 1 << 20).as_bytes())
            .await
            .unwrap();
        let answer = tokio::time::timeout(HANG, read_response(&mut stream))
            .await
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
        assert!(answer.contains("invalid_api_key"), "{answer}");
    }
}

#[tokio::test]
async fn a_body_that_never_arrives_is_answered_408_and_its_connection_closed() {
    let timing = BodyTiming {
        timeout: Duration::from_millis(300),
        min_bytes_per_sec: 1024,
    };
    let address = keyed(ServeOptions::DEFAULT, timing, 0).await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    let auth = format!("authorization: Bearer {SECRET}\r\n");
    // 9 MiB announced is over the 8 MiB cap: refused at once; 1 KiB announced, 10 sent.
    stream
        .write_all(head(&auth, 9 << 20).as_bytes())
        .await
        .unwrap();
    let answer = tokio::time::timeout(HANG, read_response(&mut stream))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(head(&auth, 1024).as_bytes())
        .await
        .unwrap();
    stream.write_all(b"{\"model\":").await.unwrap();
    let answer = tokio::time::timeout(HANG, read_response(&mut stream))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(HANG, stream.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "not closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_trickling_keyless_connections_leave_a_keyed_client_served() {
    let options = ServeOptions::DEFAULT.with_max_connections(4096);
    let address = keyed(options, BodyTiming::DEFAULT, 5).await;
    // 2,500 connections announce a 1 MiB body with no key and trickle a byte a second.
    let mut tricklers = Vec::new();
    for _ in 0..2500 {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream
            .write_all(head("", 1 << 20).as_bytes())
            .await
            .unwrap();
        stream.write_all(b"{").await.unwrap();
        tricklers.push(stream);
    }
    // Each was answered 401 at once, from its headers.
    let mut refused = 0;
    for stream in tricklers.iter_mut().take(50) {
        let answer = tokio::time::timeout(HANG, read_response(stream))
            .await
            .unwrap();
        refused += usize::from(answer.starts_with("HTTP/1.1 401 "));
    }
    assert_eq!(refused, 50);
    for _ in 0..5 {
        let status = tokio::time::timeout(HANG, probe(address))
            .await
            .expect("answered");
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    }
    drop(tricklers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_past_the_limit_leave_a_keyed_client_served() {
    // 1,000 connections allowed; 3,000 open and send nothing. The header read timeout is
    // longer than the test's bound, so only closing idle connections can make room.
    let options = ServeOptions::DEFAULT
        .with_max_connections(1000)
        .with_header_read_timeout(Duration::from_secs(600));
    let address = keyed(options, BodyTiming::DEFAULT, 5).await;
    let mut idle = Vec::new();
    for _ in 0..3000 {
        idle.push(TcpStream::connect(address).await.unwrap());
    }
    // The keyed clients are served (the longest idle connections closed for them), not
    // left in the backlog until the header read timeout frees a slot.
    for _ in 0..5 {
        let status = tokio::time::timeout(HANG, probe(address))
            .await
            .expect("answered");
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    }
    drop(idle);
}
