//! `GET /metrics`: requests by route, model, key and status; and, from the pipeline's
//! records, calls, queue waits, tokens, cost and the upstream 429s per model and key;
//! queue depth per limiter. In process, on tokio's paused clock.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, post, priced_models};
use serde_json::json;
use tollgate_fake::{FakeProvider, FakeReply, Fault};
use tollgate_gateway::{Gateway, METRICS_CONTENT_TYPE};

async fn scrape(gateway: &Gateway) -> String {
    let r = call(
        gateway,
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], METRICS_CONTENT_TYPE);
    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The value of the sample `series` (name and labels exactly as encoded).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn metrics_count_requests_calls_tokens_cost_waits_and_upstream_429s_per_model_and_key() {
    let fake = FakeProvider::new();
    // The first attempt meets a 429; the retry is answered with 10 in, 50 out.
    fake.inject(
        "priced",
        1,
        Fault::RateLimited {
            retry_after: Some(Duration::from_secs(1)),
        },
    );
    let gateway = common::priced_gateway(&fake);
    let body = json!({"model": "priced", "messages": [{"role": "user", "content": "Hi"}]});
    let ok = call(
        &gateway,
        post(
            "/v1/chat/completions",
            &body,
            &[("authorization", "Bearer nb-secret")],
        ),
    )
    .await;
    assert_eq!(ok.status(), StatusCode::OK);
    let wrong = call(
        &gateway,
        post("/v1/messages", &body, &[("x-api-key", "not-a-key")]),
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);

    let text = scrape(&gateway).await;
    let at = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series}\n{text}"));
    assert_eq!(
        at(
            r#"tollgate_gateway_requests_total{route="chat_completions",model="priced",key="nb",status="200"}"#
        ),
        1.0
    );
    assert_eq!(
        at(r#"tollgate_gateway_requests_total{route="messages",model="",key="",status="401"}"#),
        1.0
    );
    assert_eq!(at("tollgate_gateway_in_flight"), 0.0);
    assert_eq!(
        at(r#"tollgate_calls_total{model="priced",key="nb",outcome="success"}"#),
        1.0
    );
    assert_eq!(
        at(r#"tollgate_upstream_errors_total{model="priced",key="nb",status="429"}"#),
        1.0
    );
    assert_eq!(
        at(r#"tollgate_tokens_total{model="priced",key="nb",kind="output"}"#),
        50.0
    );
    assert_eq!(
        at(r#"tollgate_tokens_total{model="priced",key="nb",kind="input"}"#),
        10.0
    );
    // 50 output tokens at $1,000 per million.
    let cost = at(r#"tollgate_cost_usd_total{model="priced",key="nb"}"#);
    assert!((cost - 0.05).abs() < 1e-9, "{cost}");
    assert_eq!(
        at(r#"tollgate_queue_wait_seconds_count{model="priced",key="nb"}"#),
        1.0
    );
    assert_eq!(at(r#"tollgate_limiter_queued{limiter="priced"}"#), 0.0);
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn metrics_show_requests_queued_on_a_limiter_while_they_wait() {
    let fake = FakeProvider::new();
    for _ in 0..3 {
        fake.reply_any(FakeReply::text("ok"));
    }
    let gateway = Gateway::new(common::models(&fake));
    // `slow` serves one a minute: the second request queues.
    let body = json!({"model": "slow", "messages": [{"role": "user", "content": "Hi"}]});
    let first = call(&gateway, post("/v1/chat/completions", &body, &[])).await;
    assert_eq!(first.status(), StatusCode::OK);
    let waiting = tokio::spawn({
        let gateway = gateway.clone();
        let body = body.clone();
        async move { call(&gateway, post("/v1/chat/completions", &body, &[])).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let text = scrape(&gateway).await;
    assert_eq!(
        sample(&text, r#"tollgate_limiter_queued{limiter="slow"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "tollgate_gateway_in_flight"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(waiting.await.unwrap().status(), StatusCode::OK);
    let text = scrape(&gateway).await;
    assert_eq!(
        sample(&text, r#"tollgate_limiter_queued{limiter="slow"}"#),
        Some(0.0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_stored_response_request_is_counted_under_its_route() {
    let fake = FakeProvider::new();
    let gateway = Gateway::new(priced_models(&fake, None));
    for method in ["GET", "DELETE"] {
        let request = Request::builder()
            .method(method)
            .uri("/v1/responses/x")
            .body(Body::empty())
            .unwrap();
        assert_eq!(
            call(&gateway, request).await.status(),
            StatusCode::NOT_FOUND
        );
    }
    let text = scrape(&gateway).await;
    assert_eq!(
        sample(
            &text,
            r#"tollgate_gateway_requests_total{route="stored_response",model="",key="",status="404"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert!(!text.contains(r#"route="unmatched""#), "{text}");
}
