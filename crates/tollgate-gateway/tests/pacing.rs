//! Pacing, not rejection: a request queues on its model's limiter; past its bound it is
//! answered at once with 429 and the limiter's own `retry-after`; a client that goes
//! away while queued gives its place back. Timing runs on tokio's paused clock in
//! process; the disconnect runs over a real 127.0.0.1 socket.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::{SECRET, call, client, json_of, keys, models, post, start};
use serde_json::{Value, json};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, Keys, hash_secret};

fn slow_openai() -> Value {
    json!({"model": "slow", "messages": [{"role": "user", "content": "Hi"}]})
}

fn slow_anthropic() -> Value {
    json!({"model": "slow", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]})
}

/// Queues `n` answers of "ok" for any model.
fn answers(fake: &FakeProvider, n: usize) {
    for _ in 0..n {
        fake.reply_any(FakeReply::text("ok"));
    }
}

/// A gateway whose `slow` model has just served its one request of the minute.
async fn slow_gateway_after_one_call(gateway: Gateway) -> Gateway {
    let first = call(&gateway, post("/v1/chat/completions", &slow_openai(), &[])).await;
    assert_eq!(first.status(), StatusCode::OK);
    gateway
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_the_header_bound_is_a_429_with_the_limiters_exact_retry_after() {
    let fake = FakeProvider::new();
    answers(&fake, 3);
    let gateway = slow_gateway_after_one_call(Gateway::new(models(&fake))).await;
    let bound = [("x-tollgate-max-wait-ms", "1000")];
    for (path, body) in [
        ("/v1/chat/completions", slow_openai()),
        ("/v1/messages", slow_anthropic()),
    ] {
        let started = tollgate::clock::now();
        let r = call(&gateway, post(path, &body, &bound)).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        // The refill is exactly 60 s away on the paused clock: no time passed.
        assert_eq!(r.headers()["retry-after"], "60");
        assert_eq!(r.headers()["retry-after-ms"], "60000");
        assert_eq!(started.elapsed(), Duration::ZERO, "answered at once");
        let v = json_of(r).await;
        assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
        if path == "/v1/chat/completions" {
            assert_eq!(v["error"]["code"], "would_wait");
        }
    }
    assert_eq!(fake.calls("slow"), 1, "nothing past the bound was sent");
    let snapshot = common::snapshot(&gateway, "slow").await;
    assert_eq!((snapshot.queued, snapshot.held), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_keys_max_wait_bounds_its_requests_when_no_header_is_sent() {
    let fake = FakeProvider::new();
    answers(&fake, 3);
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"batch\"\nsecret_sha256 = \"{}\"\nmax_wait_ms = 500\n",
        hash_secret("batch-secret")
    ))
    .unwrap();
    let gateway = Gateway::new(models(&fake)).with_keys(keys).unwrap();
    let auth = [("authorization", "Bearer batch-secret")];
    let first = call(
        &gateway,
        post("/v1/chat/completions", &slow_openai(), &auth),
    )
    .await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = call(
        &gateway,
        post("/v1/chat/completions", &slow_openai(), &auth),
    )
    .await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(second.headers()["retry-after"], "60");
    // The header overrides the key's bound: this one waits for the refill.
    let mut patient = auth.to_vec();
    patient.push(("x-tollgate-max-wait-ms", "120000"));
    let started = tollgate::clock::now();
    let third = call(
        &gateway,
        post("/v1/chat/completions", &slow_openai(), &patient),
    )
    .await;
    assert_eq!(third.status(), StatusCode::OK);
    assert!(
        started.elapsed() >= Duration::from_secs(59),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fake.calls("slow"), 2);
}

#[tokio::test(start_paused = true)]
async fn without_a_bound_a_request_queues_until_the_refill_and_is_answered() {
    let fake = FakeProvider::new();
    answers(&fake, 3);
    let gateway = slow_gateway_after_one_call(Gateway::new(models(&fake))).await;
    let started = tollgate::clock::now();
    let r = call(&gateway, post("/v1/messages", &slow_anthropic(), &[])).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        started.elapsed() >= Duration::from_secs(59),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(json_of(r).await["content"][0]["text"], "ok");
}

#[tokio::test(start_paused = true)]
async fn a_malformed_max_wait_header_is_a_400() {
    let fake = FakeProvider::new();
    let gateway = Gateway::new(models(&fake));
    let bad = [("x-tollgate-max-wait-ms", "soon")];
    let r = call(&gateway, post("/v1/chat/completions", &slow_openai(), &bad)).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(fake.calls("slow"), 0);
}

/// Polls `check` every few ms until it holds (a condition, not a time threshold; the
/// outer timeout only turns a hang into a failure).
async fn until(mut check: impl AsyncFnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("condition never held");
}

#[tokio::test]
async fn a_client_that_disconnects_while_queued_gives_its_reservation_back() {
    let fake = FakeProvider::new();
    answers(&fake, 3);
    let gateway = Gateway::new(models(&fake)).with_keys(keys()).unwrap();
    let gw = start(gateway.clone()).await;
    let auth = format!("Bearer {SECRET}");
    let first = client()
        .post(gw.at("/v1/chat/completions"))
        .header("authorization", &auth)
        .json(&slow_openai())
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let limiter = gateway.models().limiter("slow").unwrap().clone();
    let url = gw.at("/v1/chat/completions");
    let queued = tokio::spawn(async move {
        client()
            .post(url)
            .header("authorization", auth)
            .json(&slow_openai())
            .send()
            .await
    });
    until(async || limiter.snapshot().await.unwrap().queued == 1).await;
    queued.abort(); // the client goes away: its connection closes
    until(async || limiter.snapshot().await.unwrap().queued == 0).await;
    let snapshot = limiter.snapshot().await.unwrap();
    assert_eq!((snapshot.held, snapshot.grants), (0, 1));
    assert_eq!(
        fake.calls("slow"),
        1,
        "the abandoned request was never sent"
    );
    gw.stop().await.unwrap();
}
