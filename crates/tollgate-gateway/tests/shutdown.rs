//! Shutdown: once the gateway starts draining, requests still queued on a limiter (and
//! any that arrive) are answered 503 with `retry-after` at once, nothing sent, while a
//! request already sent finishes. In process, on tokio's paused clock.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{call, json_of, models, post};
use serde_json::{Value, json};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::Gateway;

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test(start_paused = true)]
async fn draining_answers_queued_requests_503_with_retry_after_and_lets_sent_ones_finish() {
    let fake = FakeProvider::new();
    for _ in 0..4 {
        fake.reply_any(FakeReply::text("ok"));
    }
    // Every answer takes 5 s: a request sent before the drain is still in flight at it.
    fake.with_latency(Duration::from_secs(5));
    let gateway = Gateway::new(models(&fake));
    // `slow` serves one a minute: after the first, the next queues for ~60 s.
    let first = call(&gateway, post("/v1/chat/completions", &chat("slow"), &[])).await;
    assert_eq!(first.status(), StatusCode::OK);
    let spawn = |model: &'static str, path: &'static str| {
        let gateway = gateway.clone();
        tokio::spawn(async move { call(&gateway, post(path, &chat(model), &[])).await })
    };
    let in_flight = spawn("chat", "/v1/chat/completions");
    let queued_openai = spawn("slow", "/v1/chat/completions");
    let queued_anthropic = spawn("slow", "/v1/messages");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let snapshot = common::snapshot(&gateway, "slow").await;
    assert_eq!(snapshot.queued, 2);

    let drained_at = tollgate::clock::now();
    gateway.start_draining();
    for (queued, error_type) in [
        (queued_openai, "server_error"),
        (queued_anthropic, "overloaded_error"),
    ] {
        let r = queued.await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()["retry-after"], "1");
        assert_eq!(drained_at.elapsed(), Duration::ZERO, "answered at once");
        let v = json_of(r).await;
        assert_eq!(v["error"]["type"], error_type, "{v}");
    }
    // Nothing queued was sent, and the queue is empty.
    assert_eq!(fake.calls("slow"), 1);
    let snapshot = common::snapshot(&gateway, "slow").await;
    assert_eq!((snapshot.queued, snapshot.held), (0, 0));
    // A request that arrives while draining is not queued either.
    let late = call(&gateway, post("/v1/chat/completions", &chat("chat"), &[])).await;
    assert_eq!(late.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json_of(late).await["error"]["code"], "queue_closed");
    // The request sent before the drain finishes with its answer.
    let sent = in_flight.await.unwrap();
    assert_eq!(sent.status(), StatusCode::OK);
    assert_eq!(fake.calls("chat"), 1);
}
