//! The wait bound (`x-tollgate-max-wait-ms`) covers the retries too: an upstream 429
//! whose `retry-after` would pass it is answered 429 at once with that `retry-after`,
//! after one send; one within it is still retried. On tokio's paused clock, in process.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{call, json_of, models, post};
use serde_json::json;
use tollgate_fake::{FakeProvider, FakeReply, Fault};
use tollgate_gateway::Gateway;

/// A fake whose first answer on `chat` is a 429 with `retry_after`, then "ok".
fn limited_once(retry_after: Duration) -> FakeProvider {
    let fake = FakeProvider::new();
    let retry_after = Some(retry_after);
    fake.fail("chat", Fault::RateLimited { retry_after });
    fake.reply_any(FakeReply::text("ok"));
    fake
}

fn chat() -> serde_json::Value {
    json!({"model": "chat", "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test(start_paused = true)]
async fn an_upstream_retry_after_past_the_bound_is_a_429_with_that_retry_after_at_once() {
    let fake = limited_once(Duration::from_secs(30));
    let gateway = Gateway::new(models(&fake));
    let bound = [("x-tollgate-max-wait-ms", "1000")];
    let started = tollgate::clock::now();
    let r = call(&gateway, post("/v1/chat/completions", &chat(), &bound)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "30");
    assert_eq!(r.headers()["retry-after-ms"], "30000");
    assert_eq!(started.elapsed(), Duration::ZERO, "answered at once");
    let v = json_of(r).await;
    assert_eq!(v["error"]["code"], "would_wait", "{v}");
    assert_eq!(fake.calls("chat"), 1, "one send only");
}

#[tokio::test(start_paused = true)]
async fn an_upstream_retry_after_within_the_bound_is_retried_and_answered() {
    let fake = limited_once(Duration::from_millis(400));
    let gateway = Gateway::new(models(&fake));
    let bound = [("x-tollgate-max-wait-ms", "1000")];
    let started = tollgate::clock::now();
    let r = call(&gateway, post("/v1/chat/completions", &chat(), &bound)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(started.elapsed(), Duration::from_millis(400));
    assert_eq!(fake.calls("chat"), 2);
}
