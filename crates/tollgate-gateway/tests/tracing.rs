//! Each request runs in a server span, `gateway.request` (OpenTelemetry's HTTP server
//! attributes), which is the parent of the pipeline's `gen_ai.call` span and its
//! attempts: a trace shows the queue wait and the upstream call inside the client's
//! request. In process, with a `tracing` layer that notes each span's parent.

mod common;

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use common::{call, models, post};
use serde_json::json;
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::Gateway;
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, field};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span's name, its parent's name, and the fields recorded on it.
type Seen = (String, Option<String>, Vec<(String, String)>);

/// Every span made while the layer is installed.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Seen>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl field::Visit for Fields<'_> {
    fn record_debug(&mut self, f: &field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((f.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, f: &field::Field, value: &str) {
        self.0.push((f.name().to_owned(), value.to_owned()));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let parent = span.parent().map(|p| p.name().to_owned());
        let mut fields = Vec::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .unwrap()
            .push((span.name().to_owned(), parent, fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let name = ctx.span(id).unwrap().name();
        let mut spans = self.0.lock().unwrap();
        if let Some(entry) = spans.iter_mut().rev().find(|s| s.0 == name) {
            values.record(&mut Fields(&mut entry.2));
        }
    }
}

#[tokio::test]
async fn a_request_runs_in_a_server_span_that_parents_the_pipelines_call_span() {
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let fake = FakeProvider::new();
    fake.reply_any(FakeReply::text("ok"));
    let gateway = Gateway::new(models(&fake));
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(&gateway, post("/v1/chat/completions", &body, &[])).await;
    assert_eq!(r.status(), StatusCode::OK);

    let spans = spans.0.lock().unwrap();
    let (_, parent, fields) = spans
        .iter()
        .find(|s| s.0 == "gateway.request")
        .expect("a gateway.request span");
    assert_eq!(parent, &None, "the request's span is the trace's root here");
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(field("otel.kind"), Some("server"));
    assert_eq!(field("http.route"), Some("/v1/chat/completions"));
    assert_eq!(field("otel.name"), Some("POST /v1/chat/completions"));
    assert_eq!(field("tollgate.model_id"), Some("chat"));
    assert_eq!(field("http.response.status_code"), Some("200"));
    let call = spans
        .iter()
        .find(|s| s.0 == "gen_ai.call")
        .expect("the pipeline's call span");
    assert_eq!(call.1.as_deref(), Some("gateway.request"));
    assert!(
        spans
            .iter()
            .any(|s| s.0 == "tollgate.attempt" && s.1.as_deref() == Some("gen_ai.call"))
    );
}

#[tokio::test]
async fn a_token_count_runs_in_a_server_span_that_parents_the_count_span() {
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let gateway = Gateway::new(models(&FakeProvider::new()));
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(&gateway, post("/v1/messages/count_tokens", &body, &[])).await;
    assert_eq!(r.status(), StatusCode::OK);

    let spans = spans.0.lock().unwrap();
    let (_, _, fields) = spans
        .iter()
        .find(|s| s.0 == "gateway.request")
        .expect("a gateway.request span");
    let has = |fields: &[(String, String)], name: &str, value: &str| {
        fields.iter().any(|(n, v)| n == name && v == value)
    };
    assert!(
        has(fields, "http.route", "/v1/messages/count_tokens"),
        "{fields:?}"
    );
    assert!(
        has(fields, "http.response.status_code", "200"),
        "{fields:?}"
    );
    let (_, parent, fields) = spans
        .iter()
        .find(|s| s.0 == "tollgate.count_tokens")
        .expect("the pipeline's count span");
    assert_eq!(parent.as_deref(), Some("gateway.request"));
    assert!(
        has(fields, "tollgate.token_counter", "estimate"),
        "{fields:?}"
    );
    assert!(has(fields, "tollgate.model_id", "chat"), "{fields:?}");
    // Nothing is generated, so no call span.
    assert!(spans.iter().all(|s| s.0 != "gen_ai.call"));
}

#[tokio::test]
async fn a_model_lookup_runs_in_a_get_server_span_naming_the_route_and_model() {
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let gateway = Gateway::new(models(&FakeProvider::new()));
    let request = axum::http::Request::get("/v1/models/chat")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(call(&gateway, request).await.status(), StatusCode::OK);

    let spans = spans.0.lock().unwrap();
    let (_, _, fields) = spans
        .iter()
        .find(|s| s.0 == "gateway.request")
        .expect("a gateway.request span");
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(field("http.request.method"), Some("GET"));
    assert_eq!(field("http.route"), Some("/v1/models/{id}"));
    assert_eq!(field("otel.name"), Some("GET /v1/models/{id}"));
    assert_eq!(field("tollgate.model_id"), Some("chat"));
    assert_eq!(field("http.response.status_code"), Some("200"));
}

/// The fields of the server span of `request`, answered `status`.
async fn server_span(
    request: axum::http::Request<axum::body::Body>,
    status: StatusCode,
) -> Vec<(String, String)> {
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let gateway = Gateway::new(models(&FakeProvider::new()));
    assert_eq!(call(&gateway, request).await.status(), status);
    let spans = spans.0.lock().unwrap();
    let server = spans.iter().find(|s| s.0 == "gateway.request");
    server.expect("a gateway.request span").2.clone()
}

#[tokio::test]
async fn a_stored_response_request_runs_in_a_server_span_named_by_its_method() {
    let request = axum::http::Request::delete("/v1/responses/resp_1")
        .body(axum::body::Body::empty())
        .unwrap();
    let fields = server_span(request, StatusCode::NOT_FOUND).await;
    for (name, value) in [
        ("http.request.method", "DELETE"),
        ("http.route", "/v1/responses/{*rest}"),
        ("otel.name", "DELETE /v1/responses/{*rest}"),
        ("http.response.status_code", "404"),
    ] {
        let seen = fields.iter().any(|(n, v)| n == name && v == value);
        assert!(seen, "{name} {fields:?}");
    }
}
