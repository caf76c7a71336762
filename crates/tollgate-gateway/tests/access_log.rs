//! The access log: one `tollgate::access` event per request, with its request id,
//! method, route, status, model, key and (from the pipeline's records) tokens, cost,
//! attempts and upstream status; fields that do not apply left out; a stream's line
//! written when it ends or its client hangs up; and the gateway's warnings beside it. In
//! process (the hang-up over a 127.0.0.1 socket), on tokio's paused clock, with a
//! `tracing` layer that keeps every event's fields.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use common::{call, post, priced_gateway};
use serde_json::json;
use tollgate_fake::{FakeProvider, Fault};
use tollgate_gateway::{ACCESS_TARGET, Gateway};
use tracing::{Event, Level, Subscriber, field};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// An event's target, level and fields (each as text).
#[derive(Debug, Clone)]
struct Seen {
    target: String,
    level: Level,
    fields: BTreeMap<String, String>,
}

impl Seen {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Every event while the layer is installed.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Seen>>>);

impl Events {
    fn access(&self) -> Vec<Seen> {
        let all = self.0.lock().unwrap();
        all.iter()
            .filter(|e| e.target == ACCESS_TARGET)
            .cloned()
            .collect()
    }

    fn warnings(&self) -> Vec<Seen> {
        let all = self.0.lock().unwrap();
        all.iter()
            .filter(|e| e.level == Level::WARN)
            .cloned()
            .collect()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl field::Visit for Fields<'_> {
    fn record_debug(&mut self, f: &field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(f.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, f: &field::Field, value: &str) {
        self.0.insert(f.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Seen {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
        });
    }
}

/// Installs the capturing layer on this thread (the paused-clock runtime's).
fn capture() -> (Events, tracing::subscriber::DefaultGuard) {
    let events = Events::default();
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    (events, guard)
}

/// One chat completion as key `nb` on `priced` (`stream` or not), with `headers`.
async fn chat_as_nb(gateway: &Gateway, stream: bool, headers: &[(&str, &str)]) -> Response<Body> {
    let mut all = vec![("authorization", "Bearer nb-secret")];
    all.extend_from_slice(headers);
    call(gateway, post("/v1/chat/completions", &chat(stream), &all)).await
}

fn chat(stream: bool) -> serde_json::Value {
    json!({"model": "priced", "stream": stream, "max_tokens": 60,
        "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test(start_paused = true)]
async fn a_served_request_writes_one_access_line_with_its_model_key_status_tokens_and_cost() {
    let (events, _guard) = capture();
    let gateway = priced_gateway(&FakeProvider::new());
    let r = chat_as_nb(&gateway, false, &[("x-request-id", "r-1")]).await;
    assert_eq!(r.status(), StatusCode::OK);

    let lines = events.access();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line.level, Level::INFO);
    for (name, value) in [
        ("request_id", "r-1"),
        ("method", "POST"),
        ("route", "/v1/chat/completions"),
        ("status", "200"),
        ("model", "priced"),
        ("key", "nb"),
        ("upstream_status", "200"),
        ("attempts", "1"),
        ("input_tokens", "10"),
        ("output_tokens", "50"),
        ("cost_usd", "0.05"),
    ] {
        assert_eq!(line.get(name), Some(value), "{name} in {line:?}");
    }
    for name in ["queue_wait_ms", "upstream_latency_ms", "duration_ms"] {
        assert!(line.get(name).is_some(), "{name} in {line:?}");
    }
    let text = format!("{line:?}");
    assert!(!text.contains("nb-secret"), "no secret in the line: {text}");
}

#[tokio::test(start_paused = true)]
async fn a_request_refused_401_writes_its_status_with_no_model_key_or_tokens() {
    let (events, _guard) = capture();
    let gateway = priced_gateway(&FakeProvider::new());
    let wrong = [("authorization", "Bearer not-the-secret")];
    let r = call(&gateway, post("/v1/chat/completions", &chat(false), &wrong)).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    let lines = events.access();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line.get("status"), Some("401"));
    assert_eq!(line.get("route"), Some("/v1/chat/completions"));
    for absent in [
        "model",
        "key",
        "upstream_status",
        "input_tokens",
        "output_tokens",
        "cost_usd",
    ] {
        assert_eq!(line.get(absent), None, "{absent} in {line:?}");
    }
    assert!(!format!("{line:?}").contains("not-the-secret"));
}

#[tokio::test(start_paused = true)]
async fn a_streamed_answer_writes_its_line_when_the_stream_ends_with_the_streams_tokens() {
    let (events, _guard) = capture();
    let gateway = priced_gateway(&FakeProvider::new());
    let r = chat_as_nb(&gateway, true, &[]).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        events.access().is_empty(),
        "not written while the stream is open"
    );
    let body = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("[DONE]"));

    let lines = events.access();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line.get("status"), Some("200"));
    assert_eq!(line.get("key"), Some("nb"));
    assert_eq!(line.get("output_tokens"), Some("50"));
    assert_eq!(line.get("cost_usd"), Some("0.05"));
}

#[tokio::test(start_paused = true)]
async fn a_masked_upstream_failure_logs_a_warning_and_an_access_line_with_the_upstream_status() {
    let (events, _guard) = capture();
    let fake = FakeProvider::new();
    let gateway = priced_gateway(&fake);
    fake.fail(
        "priced",
        Fault::RequestError {
            status: 401,
            message: "Incorrect API key provided: sk-WXYZ".into(),
        },
    );
    let r = chat_as_nb(&gateway, false, &[("x-request-id", "r-9")]).await;
    assert_eq!(r.status(), StatusCode::BAD_GATEWAY);

    let warnings = events.warnings();
    assert!(
        warnings.iter().any(|w| w.get("request_id") == Some("r-9")),
        "{warnings:?}"
    );
    let lines = events.access();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].get("status"), Some("502"));
    assert_eq!(lines[0].get("upstream_status"), Some("401"));
    assert!(lines[0].get("upstream_error").is_some(), "{lines:?}");
}

#[tokio::test(start_paused = true)]
async fn operations_and_unmatched_paths_write_a_line_each_named_by_route() {
    let (events, _guard) = capture();
    let gateway = priced_gateway(&FakeProvider::new());
    for path in ["/health", "/no/such/path"] {
        let request = Request::get(path).body(Body::empty()).unwrap();
        call(&gateway, request).await;
    }
    let lines = events.access();
    let seen: Vec<_> = lines
        .iter()
        .map(|l| (l.get("route"), l.get("status"), l.get("model")))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("/health"), Some("200"), None),
            (Some("unmatched"), Some("404"), None)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_the_client_hangs_up_on_writes_its_line_with_the_cancelled_attempt() {
    use futures::StreamExt;
    let (events, _guard) = capture();
    let dropped = common::stalling::Dropped::default();
    let metrics = Arc::new(tollgate_gateway::GatewayMetrics::new());
    let models = tollgate::Models::builder()
        .catalog(common::stalling::catalog())
        .provider(common::stalling::Stalling(dropped.clone()))
        .recorder(metrics.clone())
        .build()
        .unwrap();
    let running = common::start(Gateway::new(models).with_metrics(metrics)).await;
    let response = common::client()
        .post(running.at("/v1/chat/completions"))
        .json(&json!({"model": "talk", "stream": true,
            "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    body.next().await.unwrap().unwrap();
    assert!(events.access().is_empty(), "not written while it streams");
    drop(body);
    // Bounded: a gateway that never noticed fails here instead of hanging.
    for _ in 0..600 {
        if !events.access().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let lines = events.access();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].get("status"), Some("200"));
    assert_eq!(
        lines[0].get("upstream_error"),
        Some("cancelled"),
        "{lines:?}"
    );
    assert_eq!(lines[0].get("input_tokens"), Some("7"), "{lines:?}");
    running.stop().await.unwrap();
}
