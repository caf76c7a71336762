//! TLS and HTTP/2 on a real 127.0.0.1 socket, with a certificate the test makes: HTTP/1.1
//! over TLS, HTTP/2 over TLS (ALPN) and h2c with prior knowledge on a plain port each get
//! a model answer; unusable certificate or key files are typed errors naming the file;
//! a client that completes TCP and then sends nothing (no handshake, no preface) is
//! closed after the header read timeout, and an HTTP/2 connection is sent GOAWAY when
//! idle that long and at shutdown (those on tokio's paused clock).

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, ServeOptions, TlsConfig, TlsError};

/// A self-signed certificate for `localhost` and 127.0.0.1: its PEM and its key's.
fn certificate() -> (String, String) {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    (made.cert.pem(), made.signing_key.serialize_pem())
}

/// `cert` and `key` written to `dir`: the two paths.
fn files(dir: &Path, cert: &str, key: &str) -> (PathBuf, PathBuf) {
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    (cert_path, key_path)
}

/// The TLS settings of a fresh certificate, and that certificate (for the client).
fn tls() -> (TlsConfig, reqwest::Certificate) {
    let (cert, key) = certificate();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = files(dir.path(), &cert, &key);
    let config = TlsConfig::from_pem_files(&cert_path, &key_path).unwrap();
    (
        config,
        reqwest::Certificate::from_pem(cert.as_bytes()).unwrap(),
    )
}

/// Serves a gateway whose `chat` answers "hello" `answers` times, with `options`, until
/// the test ends.
async fn start(options: ServeOptions, answers: usize) -> SocketAddr {
    let fake = FakeProvider::new();
    for _ in 0..answers {
        fake.reply_any(FakeReply::text("hello"));
    }
    common::serve_until_the_end(Gateway::new(common::models(&fake)), options).await
}

/// A client that trusts `cert` alone; HTTP/1.1 only, or offering h2 too.
fn trusting(cert: reqwest::Certificate, http1_only: bool) -> reqwest::Client {
    let builder = reqwest::Client::builder().no_proxy().tls_certs_only([cert]);
    let builder = if http1_only {
        builder.http1_only()
    } else {
        builder
    };
    builder.build().unwrap()
}

/// A chat completion on `chat` through `http` at `base`: the HTTP version and the answer.
async fn chat(http: &reqwest::Client, base: &str) -> (reqwest::Version, Value) {
    let response = http
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let version = response.version();
    (version, response.json().await.unwrap())
}

fn says_hello(answer: &Value) {
    assert_eq!(
        answer["choices"][0]["message"]["content"], "hello",
        "{answer}"
    );
}

#[tokio::test]
async fn a_client_speaking_http1_over_tls_gets_a_model_answer() {
    let (config, cert) = tls();
    let address = start(ServeOptions::DEFAULT.with_tls(config), 1).await;
    let http = trusting(cert, true);
    let (version, answer) = chat(&http, &format!("https://{address}")).await;
    assert_eq!(version, reqwest::Version::HTTP_11);
    says_hello(&answer);
}

#[tokio::test]
async fn a_client_offering_h2_by_alpn_is_answered_over_http2() {
    let (config, cert) = tls();
    let address = start(ServeOptions::DEFAULT.with_tls(config), 2).await;
    let http = trusting(cert, false);
    let base = format!("https://{address}");
    for _ in 0..2 {
        let (version, answer) = chat(&http, &base).await;
        assert_eq!(version, reqwest::Version::HTTP_2);
        says_hello(&answer);
    }
}

#[tokio::test]
async fn an_h2c_prior_knowledge_client_on_the_plain_port_is_answered_over_http2() {
    let address = start(ServeOptions::DEFAULT, 2).await;
    let base = format!("http://{address}");
    let h2c = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let (version, answer) = chat(&h2c, &base).await;
    assert_eq!(version, reqwest::Version::HTTP_2);
    says_hello(&answer);
    // HTTP/1.1 on the same port, as before.
    let http1 = reqwest::Client::builder().no_proxy().build().unwrap();
    let (version, answer) = chat(&http1, &base).await;
    assert_eq!(version, reqwest::Version::HTTP_11);
    says_hello(&answer);
}

#[test]
fn unusable_certificate_or_key_files_are_refused_with_a_typed_error_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate();
    let (cert_path, _) = files(dir.path(), &cert, &key);
    let refused = |key_text: &str| {
        let key_path = dir.path().join("bad-key.pem");
        std::fs::write(&key_path, key_text).unwrap();
        let e = TlsConfig::from_pem_files(&cert_path, &key_path).unwrap_err();
        assert!(e.to_string().contains("bad-key.pem"), "{e}");
        e
    };
    // Not a key at all.
    let e = refused("not a key\n");
    assert!(matches!(e, TlsError::NoKey { .. }), "{e:?}");
    // The certificate where the key should be.
    assert!(matches!(refused(&cert), TlsError::NoKey { .. }));
    // A key section that is not base64.
    let e = refused("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n");
    assert!(matches!(e, TlsError::Pem { .. }), "{e:?}");
    assert!(!e.to_string().contains("!!!!"), "quotes the file: {e}");
    // Another certificate's key.
    let (_, other) = certificate();
    let e = refused(&other);
    assert!(matches!(e, TlsError::Rejected { .. }), "{e:?}");
    assert!(e.to_string().contains("cert.pem"), "{e}");
    // A missing key file, and a certificate file without a certificate.
    let missing = dir.path().join("missing-key.pem");
    let e = TlsConfig::from_pem_files(&cert_path, &missing).unwrap_err();
    assert!(matches!(e, TlsError::Read { .. }), "{e:?}");
    assert!(e.to_string().contains("missing-key.pem"), "{e}");
    let (_, key_path) = files(dir.path(), "", &key);
    let e = TlsConfig::from_pem_files(&dir.path().join("cert.pem"), &key_path).unwrap_err();
    assert!(matches!(e, TlsError::NoCertificate { .. }), "{e:?}");
}

/// Completes when the peer closes `stream` (what it sent before, if anything, is
/// returned); bounded so that a server that never closes fails the test.
async fn closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(600), async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was not closed");
    seen
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_starts_the_tls_handshake_is_closed_after_the_header_read_timeout() {
    let (config, _) = tls();
    let options = ServeOptions::DEFAULT
        .with_tls(config)
        .with_header_read_timeout(Duration::from_secs(3));
    let address = start(options, 0).await;
    let mut silent = TcpStream::connect(address).await.unwrap();
    let started = tollgate::clock::now();
    assert!(closed(&mut silent).await.is_empty());
    // At the timeout (virtual time), not before.
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_sends_nothing_on_the_plain_port_is_closed_after_the_header_read_timeout() {
    let options = ServeOptions::DEFAULT.with_header_read_timeout(Duration::from_secs(3));
    let address = start(options, 0).await;
    let mut silent = TcpStream::connect(address).await.unwrap();
    let started = tollgate::clock::now();
    closed(&mut silent).await;
    assert!(started.elapsed() >= Duration::from_secs(3));
}

/// The frame types in `bytes`, HTTP/2 frames back to back (a partial one at the end is
/// ignored).
fn frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let length =
            usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        types.push(bytes[3]);
        bytes = &bytes[(9 + length).min(bytes.len())..];
    }
    types
}

const GOAWAY: u8 = 0x7;

#[tokio::test(start_paused = true)]
async fn an_idle_h2c_connection_is_sent_goaway_after_the_header_read_timeout() {
    let options = ServeOptions::DEFAULT.with_header_read_timeout(Duration::from_secs(3));
    let address = start(options, 0).await;
    let mut client = TcpStream::connect(address).await.unwrap();
    // The preface and an empty SETTINGS frame, then nothing: no request, no ping reply.
    client
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let started = tollgate::clock::now();
    let seen = closed(&mut client).await;
    assert!(started.elapsed() >= Duration::from_secs(3));
    let types = frame_types(&seen);
    assert!(
        types.contains(&GOAWAY),
        "no GOAWAY before the close: {types:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn at_shutdown_an_h2c_connection_is_sent_a_graceful_goaway() {
    let fake = FakeProvider::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // An idle timeout far away: only the shutdown can close the connection.
    let options = ServeOptions::DEFAULT.with_header_read_timeout(Duration::from_secs(3600));
    tokio::spawn(tollgate_gateway::serve_with(
        listener,
        Gateway::new(common::models(&fake)),
        async move {
            let _ = stopped.await;
        },
        options,
    ));
    let mut client = TcpStream::connect(address).await.unwrap();
    client
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    // The server's SETTINGS (and its ack of ours), and nothing else for a minute.
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        !frame_types(&seen).contains(&GOAWAY),
        "GOAWAY before the shutdown"
    );
    stop.send(()).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if frame_types(&seen).contains(&GOAWAY) {
                return true;
            }
        }
    })
    .await;
    assert_eq!(
        got,
        Ok(true),
        "no GOAWAY at shutdown: {:?}",
        frame_types(&seen)
    );
}
