//! The provider kit against a local server (wiremock on 127.0.0.1): what every HTTP
//! provider gets from `tollgate::http` without writing it.
#![cfg(feature = "http")]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tollgate::catalog::{Catalog, CatalogError, KnownProviders};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::http::{Auth, Endpoint, Framing, HttpClient, SecretSource};
use tollgate::pipeline::Signals;
use tollgate::provider::ProviderContext;
use tollgate::wire::{EventDecoder, WireError};
use tollgate::{
    Error, ModelEntry, ProviderError, ProviderRequestError, Result, StopReason, StreamEvent,
};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-123";

fn read_error(status: u16, body: &[u8]) -> WireError {
    WireError {
        status,
        message: String::from_utf8_lossy(body).into_owned(),
        ..WireError::default()
    }
}

fn endpoint(server: &MockServer, key: Option<&str>) -> Endpoint {
    endpoint_of(
        server,
        ModelEntry::new("m", "toy", "toy-1").with_output_tokens(100, 10),
        key,
    )
}

/// The endpoint of `model` at `server`, its key `key` if any.
fn endpoint_of(server: &MockServer, mut model: ModelEntry, key: Option<&str>) -> Endpoint {
    // The core links no provider: the catalog is told about this one.
    let store = MemoryCredentialStore::new();
    if let Some(key) = key {
        model = model.with_credential("toy-key");
        store.insert("toy-key", key);
    }
    let known = KnownProviders::empty().with("toy", "toy-provider", false);
    let catalog = Catalog::builder()
        .known_providers(known)
        .model(model.clone())
        .build()
        .unwrap();
    let context = ProviderContext::new("toy", Arc::new(catalog), Arc::new(store));
    HttpClient::new(&context)
        .unwrap()
        .endpoint(&model, server.uri(), read_error)
}

#[tokio::test]
async fn a_body_is_sent_once_with_the_key_and_fixed_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat"))
        .and(header("x-api-key", KEY))
        .and(header("x-version", "7"))
        .and(header("accept", "application/json"))
        .and(body_json(json!({"q": 1})))
        .respond_with(ResponseTemplate::new(200).set_body_string("{\"a\":2}"))
        .expect(1)
        .mount(&server)
        .await;
    let endpoint = endpoint(&server, Some(KEY))
        .auth(Auth::Header("x-api-key"))
        .header("x-version", "7");
    let body = endpoint
        .post_json("/v1/chat", &json!({"q": 1}), &Signals::default())
        .await
        .unwrap();
    assert_eq!(body, b"{\"a\":2}");
}

#[tokio::test]
async fn the_key_goes_as_a_bearer_token_by_default() {
    let server = MockServer::start().await;
    Mock::given(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_string("{}"))
        .expect(1)
        .mount(&server)
        .await;
    endpoint(&server, Some(KEY))
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap();
}

/// Mints a numbered token per request, as an OAuth token source would.
#[derive(Debug, Default)]
struct Minted(std::sync::atomic::AtomicU32);

#[tollgate::async_trait]
impl SecretSource for Minted {
    async fn secret(&self) -> tollgate::Result<tollgate::credentials::Secret> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(tollgate::credentials::Secret::new(format!("minted-{n}")))
    }
    fn id(&self) -> &str {
        "minted"
    }
}

#[tokio::test]
async fn a_secret_source_replaces_the_stored_key_per_request_and_is_redacted() {
    let server = MockServer::start().await;
    Mock::given(header("authorization", "Bearer minted-0"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{}"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(header("authorization", "Bearer minted-1"))
        .respond_with(ResponseTemplate::new(403).set_body_string("token minted-1 denied"))
        .expect(1)
        .mount(&server)
        .await;
    let endpoint = endpoint(&server, Some(KEY)).secret_source(Arc::new(Minted::default()));
    endpoint
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap();
    let err = endpoint
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 403 && e.message == "token [redacted] denied"),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_error_answer_gets_the_verdict_with_retry_after_and_the_key_redacted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .insert_header("retry-after", "3")
                .set_body_string(format!("bad key {KEY}")),
        )
        .mount(&server)
        .await;
    let err = endpoint(&server, Some(KEY))
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400 && e.message == "bad key [redacted]"),
        "{err:?}"
    );

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).insert_header("retry-after", "3"))
        .mount(&server)
        .await;
    let err = endpoint(&server, None)
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Overloaded { status: 529, retry_after: Some(d) }) if d == Duration::from_secs(3)),
        "{err:?}"
    );
}

#[tokio::test]
async fn empty_stored_key_redacts_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string("no key"))
        .mount(&server)
        .await;
    let err = endpoint(&server, Some(""))
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert_eq!(
        format!("{err:?}"),
        format!(
            "{:?}",
            Error::from(ProviderRequestError::new(401, "no key"))
        )
    );
}

#[tokio::test]
async fn a_body_over_the_cap_fails_instead_of_filling_memory() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("x".repeat(100)))
        .mount(&server)
        .await;
    let endpoint = endpoint(&server, None).max_body_bytes(99);
    let err = endpoint
        .post_json("/", &json!({}), &Signals::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ResponseTooLarge { model_id, limit_bytes: 99 } if model_id == "m"),
        "{err:?}"
    );
    let endpoint = endpoint.max_body_bytes(100);
    assert_eq!(
        endpoint
            .post_json("/", &json!({}), &Signals::default())
            .await
            .unwrap()
            .len(),
        100
    );
}

#[tokio::test]
async fn a_model_without_a_credential_can_be_refused() {
    let server = MockServer::start().await;
    let err = endpoint(&server, None).require_credential().unwrap_err();
    assert!(
        matches!(err, Error::Catalog(CatalogError::MissingCredential { ref provider, .. }) if provider == "toy"),
        "{err:?}"
    );
}

/// One NDJSON line a text delta; `{"done":true}` ends the answer.
#[derive(Default)]
struct Lines {
    finished: bool,
}

impl EventDecoder for Lines {
    fn event(&mut self, line: String) -> Result<Vec<StreamEvent>> {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        if value["done"] == true {
            self.finished = true;
            return Ok(vec![StreamEvent::Stop(StopReason::EndTurn)]);
        }
        Ok(vec![StreamEvent::TextDelta {
            index: 0,
            text: value["text"].as_str().unwrap().to_owned(),
        }])
    }

    fn is_finished(&self) -> bool {
        self.finished
    }
}

#[tokio::test]
async fn an_ndjson_stream_is_pumped_through_the_decoder() {
    let server = MockServer::start().await;
    Mock::given(header("accept", "application/x-ndjson"))
        .respond_with(ResponseTemplate::new(200).set_body_string(
            "{\"text\":\"Hel\"}\n{\"text\":\"lo\"}\n{\"done\":true}\n{\"text\":\"never read\"}\n",
        ))
        .mount(&server)
        .await;
    let stream = endpoint(&server, None)
        .stream(
            "/",
            &json!({}),
            &Signals::default(),
            Framing::Ndjson,
            Lines::default(),
        )
        .await
        .unwrap();
    let events: Vec<StreamEvent> = stream.map(|e| e.unwrap()).collect().await;
    assert_eq!(
        events,
        [
            StreamEvent::TextDelta {
                index: 0,
                text: "Hel".into()
            },
            StreamEvent::TextDelta {
                index: 0,
                text: "lo".into()
            },
            StreamEvent::Stop(StopReason::EndTurn),
        ]
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_end_is_a_connection_closed_early() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("data: {\"text\":\"Hel\"}\n\n"))
        .mount(&server)
        .await;
    let stream = endpoint(&server, None)
        .stream(
            "/",
            &json!({}),
            &Signals::default(),
            Framing::Sse,
            Lines::default(),
        )
        .await
        .unwrap();
    let events: Vec<Result<StreamEvent>> = stream.collect().await;
    assert!(events[0].is_ok());
    assert!(matches!(
        events[1],
        Err(Error::Provider(ProviderError::Connection {
            cause: tollgate::ConnectionCause::ClosedEarly,
            ..
        }))
    ));
}

#[tokio::test]
async fn request_gets_deletes_and_uploads_with_the_key_and_reads_the_answer_capped() {
    use tollgate::http::Payload;
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/batches/b1"))
        .and(header("x-api-key", KEY))
        .and(header("accept", "application/json"))
        .respond_with(ResponseTemplate::new(200).set_body_string(format!("{{\"echo\":\"{KEY}\"}}")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/files"))
        .and(header("content-type", "application/jsonl"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{\"id\":\"file-1\"}"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/v1/files/file-1"))
        .respond_with(
            ResponseTemplate::new(404).set_body_string(format!("no such file; key {KEY}")),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/big"))
        .respond_with(ResponseTemplate::new(200).set_body_string("x".repeat(100)))
        .mount(&server)
        .await;
    let endpoint = endpoint(&server, Some(KEY)).auth(Auth::Header("x-api-key"));
    let read = endpoint
        .request(
            tollgate::http::Method::GET,
            "/v1/batches/b1",
            Payload::Empty,
            "application/json",
            1 << 20,
        )
        .await
        .unwrap();
    let text = String::from_utf8(read).unwrap();
    assert!(
        !text.contains(KEY),
        "the key is cut out of what is read: {text}"
    );
    let uploaded = endpoint
        .request(
            tollgate::http::Method::POST,
            "/v1/files",
            Payload::Bytes {
                content_type: "application/jsonl".into(),
                body: b"{}\n".to_vec(),
            },
            "application/json",
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(uploaded, b"{\"id\":\"file-1\"}");
    let gone = endpoint
        .request(
            tollgate::http::Method::DELETE,
            "/v1/files/file-1",
            Payload::Empty,
            "*/*",
            1 << 20,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(gone, Error::ProviderRequest(ref r) if r.status == 404),
        "{gone:?}"
    );
    assert!(!gone.to_string().contains(KEY), "{gone}");
    let big = endpoint
        .request(
            tollgate::http::Method::GET,
            "/v1/big",
            Payload::Empty,
            "*/*",
            10,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            big,
            Error::ResponseTooLarge {
                limit_bytes: 10,
                ..
            }
        ),
        "{big:?}"
    );
}

#[tokio::test]
async fn request_whose_answer_stalls_past_the_idle_timeout_fails_as_a_timeout() {
    use tollgate::http::{Method, Payload};
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/slow"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string("{}")
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let model = ModelEntry::new("m", "toy", "toy-1")
        .with_output_tokens(100, 10)
        .with_stream_idle_timeout_secs(1);
    let endpoint = endpoint_of(&server, model, None);
    let stalled = endpoint
        .request(Method::GET, "/v1/slow", Payload::Empty, "*/*", 1 << 20)
        .await
        .unwrap_err();
    assert!(
        matches!(stalled, Error::Provider(ProviderError::Timeout { .. })),
        "{stalled:?}"
    );
}
