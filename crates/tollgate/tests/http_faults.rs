//! The provider kit against servers that misbehave at the transport: refused, reset and
//! cut connections are typed by cause; bodies and stream events over the model's size
//! limit fail typed; an undecodable body keeps its first bytes without the key. Each
//! server is a raw `TcpListener` on 127.0.0.1 started by the test (or wiremock).
#![cfg(feature = "http")]

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tollgate::catalog::{Catalog, KnownProviders};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::http::{Endpoint, Framing, HttpClient};
use tollgate::pipeline::Signals;
use tollgate::provider::ProviderContext;
use tollgate::wire::{EventDecoder, WireError, malformed};
use tollgate::{ConnectionCause, Error, ModelEntry, ProviderError, Result, StreamEvent};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-sentinel-4242";

fn read_error(status: u16, body: &[u8]) -> WireError {
    WireError {
        status,
        message: String::from_utf8_lossy(body).into_owned(),
        ..WireError::default()
    }
}

fn endpoint(base_url: &str, max_response_bytes: Option<u64>) -> Endpoint {
    let mut model = ModelEntry::new("m", "toy", "toy-1")
        .with_output_tokens(100, 10)
        .with_credential("toy-key");
    if let Some(limit) = max_response_bytes {
        model = model.with_max_response_bytes(limit);
    }
    let store = MemoryCredentialStore::new();
    store.insert("toy-key", KEY);
    let catalog = Catalog::builder()
        .known_providers(KnownProviders::empty().with("toy", "toy-provider", false))
        .model(model.clone())
        .build()
        .unwrap();
    let context = ProviderContext::new("toy", Arc::new(catalog), Arc::new(store));
    HttpClient::new(&context)
        .unwrap()
        .endpoint(&model, base_url, read_error)
}

/// Serves one connection with `serve` (after reading the request's head), on a port of
/// 127.0.0.1; returns the base URL.
async fn one_connection<F, Fut>(serve: F) -> String
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            if n == 0 {
                return;
            }
            head.extend_from_slice(&buf[..n]);
        }
        serve(socket).await;
    });
    url
}

fn connection_cause(error: &Error) -> Option<ConnectionCause> {
    match error {
        Error::Provider(ProviderError::Connection { cause, .. }) => Some(*cause),
        _ => None,
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error_refused() {
    // Bound but not listening: refuses, and no concurrent test can take the port.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}", socket.local_addr().unwrap());
    let error = endpoint(&url, None)
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert_eq!(
        connection_cause(&error),
        Some(ConnectionCause::Refused),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(!format!("{error} {error:?}").contains(KEY));
}

#[tokio::test]
async fn a_connection_closed_before_the_headers_is_closed_early() {
    let url = one_connection(|socket| async move { drop(socket) }).await;
    let error = endpoint(&url, None)
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert_eq!(
        connection_cause(&error),
        Some(ConnectionCause::ClosedEarly),
        "{error:?}"
    );
    assert!(!format!("{error} {error:?}").contains(KEY));
}

#[tokio::test]
async fn a_connection_reset_before_the_headers_is_reset() {
    let url = one_connection(|socket| async move { reset(socket) }).await;
    let error = endpoint(&url, None)
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert_eq!(
        connection_cause(&error),
        Some(ConnectionCause::Reset),
        "{error:?}"
    );
}

/// Closes `socket` with a reset: with a linger of zero, closing sends a RST, not a FIN.
#[allow(deprecated)] // set_linger blocks on close only for a non-zero linger
fn reset(socket: TcpStream) {
    socket.set_linger(Some(std::time::Duration::ZERO)).unwrap();
    drop(socket);
}

#[tokio::test]
async fn a_body_cut_mid_way_is_closed_early() {
    let url = one_connection(|mut socket| async move {
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(b"{\"choices\":").await.unwrap();
        socket.flush().await.unwrap();
        drop(socket);
    })
    .await;
    let error = endpoint(&url, None)
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert_eq!(
        connection_cause(&error),
        Some(ConnectionCause::ClosedEarly),
        "{error:?}"
    );
}

/// One SSE event's data a text delta; `end` finishes the answer.
#[derive(Default)]
struct Deltas {
    finished: bool,
}

impl EventDecoder for Deltas {
    fn event(&mut self, data: String) -> Result<Vec<StreamEvent>> {
        if data == "end" {
            self.finished = true;
            return Ok(Vec::new());
        }
        if !data.starts_with("text:") {
            return Err(malformed("not a text event", data.as_bytes()));
        }
        Ok(vec![StreamEvent::TextDelta {
            index: 0,
            text: data,
        }])
    }

    fn is_finished(&self) -> bool {
        self.finished
    }
}

#[tokio::test]
async fn a_stream_cut_mid_event_is_closed_early() {
    let url = one_connection(|mut socket| async move {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        let event = "data: text:Hel\n\n";
        socket
            .write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
            .await
            .unwrap();
        // Half a chunk, then the connection goes.
        socket.write_all(b"20\r\ndata: tex").await.unwrap();
        socket.flush().await.unwrap();
        drop(socket);
    })
    .await;
    let stream = endpoint(&url, None)
        .stream(
            "/",
            &json!({}),
            &Signals::default(),
            Framing::Sse,
            Deltas::default(),
        )
        .await
        .unwrap();
    let items: Vec<Result<StreamEvent>> = stream.collect().await;
    assert!(items[0].is_ok(), "{items:?}");
    let error = items[1].as_ref().unwrap_err();
    assert_eq!(
        connection_cause(error),
        Some(ConnectionCause::ClosedEarly),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_body_larger_than_the_models_limit_fails_typed_without_reading_it_all() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("x".repeat(5_000_000)))
        .mount(&server)
        .await;
    let error = endpoint(&server.uri(), Some(1000))
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::ResponseTooLarge { model_id, limit_bytes: 1000 } if model_id == "m"),
        "{error:?}"
    );
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn a_stream_event_larger_than_the_models_limit_fails_typed() {
    let server = MockServer::start().await;
    let body = format!(
        "data: text:a\n\ndata: text:{}\n\ndata: end\n\n",
        "y".repeat(5000)
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(body))
        .mount(&server)
        .await;
    let stream = endpoint(&server.uri(), Some(1000))
        .stream(
            "/",
            &json!({}),
            &Signals::default(),
            Framing::Sse,
            Deltas::default(),
        )
        .await
        .unwrap();
    let items: Vec<Result<StreamEvent>> = stream.collect().await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(
        matches!(&items[1], Err(Error::ResponseTooLarge { model_id, limit_bytes: 1000 }) if model_id == "m"),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_malformed_body_keeps_its_first_bytes_with_the_key_redacted() {
    let server = MockServer::start().await;
    let body = format!("<html>proxy error for key {KEY}</html>{}", "z".repeat(2000));
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(body.clone()))
        .mount(&server)
        .await;
    let error = endpoint(&server.uri(), None)
        .post_decoded("/", &json!({}), &Signals::default(), |bytes| {
            serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| malformed(e, bytes))
        })
        .await
        .unwrap_err();
    let Error::Provider(ProviderError::Malformed { raw, raw_len, .. }) = &error else {
        panic!("{error:?}")
    };
    // The codec reads the body with the key already cut out (the endpoint redacts every
    // body it reads), so the length is that of the redacted body.
    assert_eq!(*raw_len, body.replace(KEY, "[redacted]").len());
    assert!(
        raw.starts_with("<html>proxy error for key [redacted]"),
        "{raw}"
    );
    assert!(raw.len() <= tollgate::wire::MALFORMED_RAW_BYTES);
    assert!(!format!("{error} {error:?}").contains(KEY));
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_malformed_stream_event_keeps_its_bytes_with_the_key_redacted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string(format!("data: oops {KEY}\n\n")))
        .mount(&server)
        .await;
    let stream = endpoint(&server.uri(), None)
        .stream(
            "/",
            &json!({}),
            &Signals::default(),
            Framing::Sse,
            Deltas::default(),
        )
        .await
        .unwrap();
    let items: Vec<Result<StreamEvent>> = stream.collect().await;
    let error = items[0].as_ref().unwrap_err();
    assert!(
        matches!(error, Error::Provider(ProviderError::Malformed { raw, .. }) if raw == "oops [redacted]"),
        "{error:?}"
    );
}
