//! Serving over a real 127.0.0.1 socket (tokio's paused clock, which advances when the
//! runtime idles): a client that never finishes its headers is closed after the header
//! read timeout; past the connection limit a further connection is not served until
//! one closes.

mod common;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tollgate_fake::FakeProvider;
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
async fn past_the_connection_limit_a_further_connection_is_served_only_once_one_closes() {
    let (address, _stop) = start(ServeOptions::DEFAULT.with_max_connections(1)).await;
    let mut first = TcpStream::connect(address).await.unwrap();
    first.write_all(HEALTH).await.unwrap();
    assert!(read_answer(&mut first).await.starts_with("HTTP/1.1 200"));
    // `first` stays open (keep-alive): the one connection the gateway serves.
    let mut second = TcpStream::connect(address).await.unwrap();
    second.write_all(HEALTH).await.unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(5), read_answer(&mut second)).await;
    assert!(waited.is_err(), "served past the limit: {waited:?}");
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(60), read_answer(&mut second))
        .await
        .expect("served once the first closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
