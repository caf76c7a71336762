//! The routes no dialect owns: `GET /` and `HEAD /` (the base-URL probe Claude Code
//! sends) answer an empty 200; a request no route takes is answered 404 or 405 in the
//! dialect of its path (Anthropic's for `/v1/messages` and every path under it, OpenAI's
//! elsewhere) naming the route, and counted under one `unmatched` label however many
//! paths a client makes up. In process on tokio's paused clock, and `HEAD /` also over
//! HTTP on 127.0.0.1.

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::{call, json_of, models};
use serde_json::Value;
use tollgate_fake::FakeProvider;
use tollgate_gateway::{Gateway, GatewayMetrics};

fn request(method: Method, path: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .unwrap()
}

fn gateway() -> (Gateway, Arc<GatewayMetrics>) {
    let metrics = Arc::new(GatewayMetrics::new());
    let gateway = Gateway::new(models(&FakeProvider::new())).with_metrics(metrics.clone());
    (gateway, metrics)
}

#[tokio::test(start_paused = true)]
async fn head_and_get_of_the_root_answer_an_empty_200() {
    let (gateway, _) = gateway();
    for method in [Method::HEAD, Method::GET] {
        let r = call(&gateway, request(method.clone(), "/")).await;
        assert_eq!(r.status(), StatusCode::OK, "{method}");
        assert!(r.headers().contains_key("x-request-id"));
        let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        assert!(bytes.is_empty(), "{method}: {bytes:?}");
    }
    // Any other method on `/` is a 405 that says what it takes.
    let r = call(&gateway, request(Method::POST, "/")).await;
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "GET");
}

#[tokio::test]
async fn head_of_the_root_over_http_is_an_empty_200() {
    let (gateway, _) = gateway();
    let running = common::start(gateway).await;
    let r = common::client().head(running.at("/")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.text().await.unwrap(), "");
    running.stop().await.unwrap();
}

/// The status and JSON body of `method path`.
async fn answer(gateway: &Gateway, method: Method, path: &str) -> (StatusCode, Value) {
    let r = call(gateway, request(method, path)).await;
    (r.status(), json_of(r).await)
}

/// Whether `v` is Anthropic's error shape, `{"type": "error", "error": {type, message}}`.
fn is_anthropic(v: &Value) -> bool {
    v["type"] == "error" && v["error"]["type"].is_string() && v["error"].get("code").is_none()
}

#[tokio::test(start_paused = true)]
async fn every_path_under_v1_messages_is_answered_in_anthropics_shape_naming_the_route() {
    let (gateway, _) = gateway();
    for (method, path, status) in [
        (Method::GET, "/v1/messages/batches", StatusCode::NOT_FOUND),
        (Method::POST, "/v1/messages/batches", StatusCode::NOT_FOUND),
        (
            Method::GET,
            "/v1/messages/batches/msgbatch_1/results",
            StatusCode::NOT_FOUND,
        ),
        (Method::GET, "/v1/messages", StatusCode::METHOD_NOT_ALLOWED),
        (
            Method::GET,
            "/v1/messages/count_tokens",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ] {
        let (got, v) = answer(&gateway, method.clone(), path).await;
        assert_eq!(got, status, "{method} {path}");
        assert!(is_anthropic(&v), "{method} {path}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(path), "{message}");
        assert!(message.contains(method.as_str()), "{message}");
    }
}

#[tokio::test(start_paused = true)]
async fn any_other_path_is_answered_in_openais_shape_naming_the_route() {
    let (gateway, _) = gateway();
    for (method, path) in [
        (Method::GET, "/v1/messagesx"),
        (Method::POST, "/v1/messages_batches"),
        (Method::GET, "/v1/files/file_1"),
        (Method::DELETE, "/nowhere"),
    ] {
        let (status, v) = answer(&gateway, method.clone(), path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(v["error"]["code"], "unknown_route", "{method} {path}: {v}");
        assert!(v.get("type").is_none(), "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("{method} {path}")), "{message}");
    }
}

/// The sample lines of `metrics`.
fn series(metrics: &GatewayMetrics) -> Vec<String> {
    metrics
        .encode()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The value of the sample `name` exactly, or 0 when it is not there yet.
fn value(metrics: &GatewayMetrics, name: &str) -> u64 {
    series(metrics)
        .iter()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

const UNMATCHED_404: &str =
    r#"tollgate_gateway_requests_total{route="unmatched",model="",key="",status="404"}"#;
const UNMATCHED_405: &str =
    r#"tollgate_gateway_requests_total{route="unmatched",model="",key="",status="405"}"#;

#[tokio::test(start_paused = true)]
async fn unmatched_requests_are_counted_under_one_label_and_a_flood_of_paths_adds_no_series() {
    let (gateway, metrics) = gateway();
    // One of each first, so both series exist before the flood.
    call(&gateway, request(Method::GET, "/warm-up")).await;
    call(&gateway, request(Method::GET, "/v1/chat/completions")).await;
    assert_eq!(value(&metrics, UNMATCHED_404), 1);
    assert_eq!(value(&metrics, UNMATCHED_405), 1);
    let before = series(&metrics);
    for i in 0..500 {
        let path = format!("/made-up-{i}/v1/messages/{i}");
        let method = if i % 2 == 0 { Method::GET } else { Method::PUT };
        let r = call(&gateway, request(method, &path)).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = call(&gateway, request(Method::PATCH, "/v1/messages")).await;
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
    assert_eq!(value(&metrics, UNMATCHED_404), 501);
    assert_eq!(value(&metrics, UNMATCHED_405), 501);
    let after = series(&metrics);
    assert_eq!(
        before.len(),
        after.len(),
        "new series: {:?}",
        after
            .iter()
            .filter(|s| !before
                .iter()
                .any(|b| b.split(' ').next() == s.split(' ').next()))
            .collect::<Vec<_>>()
    );
    assert!(
        after.iter().all(|s| !s.contains("made-up")),
        "a path became a label"
    );
}
