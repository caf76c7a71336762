//! Virtual keys, body cap, request ids, health and readiness, graceful shutdown: over
//! HTTP on 127.0.0.1 against the scripted `fake` provider.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{CATALOG, SECRET, client, keys, models, send_json, start};
use serde_json::{Value, json};
use tollgate::pipeline::MemoryRecorder;
use tollgate::{Catalog, Models};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::Gateway;

fn chat_body() -> Value {
    json!({"model": "chat", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]})
}

async fn send(
    url: String,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let (status, headers, text) = send_json(url, body, headers).await;
    (status, headers, serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn wrong_or_missing_key_is_401_in_each_dialect_before_any_upstream_work() {
    let fake = FakeProvider::new();
    let gw = start(Gateway::new(models(&fake)).with_keys(keys()).unwrap()).await;
    let cases: [&[(&str, &str)]; 3] = [
        &[],
        &[("authorization", "Bearer not-the-secret")],
        &[("x-api-key", "tg-test-secret-012345678")],
    ];
    for headers in cases {
        let (status, _, v) = send(gw.at("/v1/chat/completions"), &chat_body(), headers).await;
        assert_eq!(status, 401, "{v}");
        assert_eq!(v["error"]["type"], "authentication_error");
        assert_eq!(v["error"]["code"], "invalid_api_key");
        let (status, _, v) = send(gw.at("/v1/messages"), &chat_body(), headers).await;
        assert_eq!(status, 401, "{v}");
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "authentication_error");
        // The secret presented is never echoed back.
        assert!(!v.to_string().contains("not-the-secret"));
    }
    let models_list = client().get(gw.at("/v1/models")).send().await.unwrap();
    assert_eq!(models_list.status(), 401);
    assert_eq!(fake.requests().len(), 0);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn a_valid_key_answers_by_bearer_or_x_api_key_and_its_calls_are_recorded_as_its_job() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("ok"));
    fake.reply("chat", FakeReply::text("ok"));
    let recorder = Arc::new(MemoryRecorder::new());
    let models = Models::builder()
        .catalog(Catalog::from_toml_str(CATALOG).unwrap())
        .provider(fake.clone())
        .recorder(recorder.clone())
        .build()
        .unwrap();
    let gw = start(Gateway::new(models).with_keys(keys()).unwrap()).await;
    let bearer = format!("Bearer {SECRET}");
    let (status, _, v) = send(
        gw.at("/v1/chat/completions"),
        &chat_body(),
        &[("authorization", &bearer)],
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, _, v) = send(
        gw.at("/v1/messages"),
        &chat_body(),
        &[("x-api-key", SECRET)],
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let calls = recorder.calls();
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|c| c.job_id.as_deref() == Some("key:notebook"))
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn a_key_may_use_only_its_models_and_lists_only_them() {
    let fake = FakeProvider::new();
    let gw = start(Gateway::new(models(&fake)).with_keys(keys()).unwrap()).await;
    let bearer = format!("Bearer {SECRET}");
    let body = json!({"model": "embed", "input": "x"});
    let (status, _, v) = send(
        gw.at("/v1/embeddings"),
        &body,
        &[("authorization", &bearer)],
    )
    .await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(v["error"]["code"], "model_not_allowed");
    let listed: Value = client()
        .get(gw.at("/v1/models"))
        .header("authorization", &bearer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["chat", "slow"]);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn a_body_over_the_cap_is_413_in_each_dialect() {
    let fake = FakeProvider::new();
    let gw = start(Gateway::new(models(&fake)).with_body_limit(1024)).await;
    let big = json!({"model": "chat", "max_tokens": 5,
        "messages": [{"role": "user", "content": "x".repeat(4096)}]});
    let (status, _, v) = send(gw.at("/v1/chat/completions"), &big, &[]).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"]["code"], "request_too_large");
    let (status, _, v) = send(gw.at("/v1/messages"), &big, &[]).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["error"]["type"], "request_too_large");
    assert_eq!(fake.requests().len(), 0);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn every_answer_carries_the_clients_request_id_or_a_generated_one() {
    let fake = FakeProvider::new();
    let gw = start(Gateway::new(models(&fake)).with_keys(keys()).unwrap()).await;
    let echoed = client()
        .get(gw.at("/health"))
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-42");
    let (status, headers, _) = send(gw.at("/v1/chat/completions"), &chat_body(), &[]).await;
    assert_eq!(status, 401);
    let first = headers["x-request-id"].to_str().unwrap().to_owned();
    assert!(first.starts_with("req_"), "{first}");
    let (_, headers, _) = send(gw.at("/v1/chat/completions"), &chat_body(), &[]).await;
    assert_ne!(headers["x-request-id"].to_str().unwrap(), first);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn health_and_ready_answer_200_and_ready_turns_503_while_draining() {
    let fake = FakeProvider::new();
    let gateway = Gateway::new(models(&fake)).with_keys(keys()).unwrap();
    let gw = start(gateway.clone()).await;
    // Probes need no key.
    for path in ["/health", "/ready"] {
        let r = client().get(gw.at(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    gateway.start_draining();
    let r = client().get(gw.at("/ready")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(
        client()
            .get(gw.at("/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish_then_stops_accepting() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("finished"));
    fake.with_latency(Duration::from_millis(300));
    let gw = start(Gateway::new(models(&fake))).await;
    let url = gw.at("/v1/chat/completions");
    let in_flight = tokio::spawn(async move { send(url, &chat_body(), &[]).await });
    // Shut down once the request has reached the provider.
    while fake.calls("chat") == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let health = gw.at("/health");
    gw.stop().await.unwrap();
    let (status, _, v) = in_flight.await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "finished");
    assert!(
        client().get(health).send().await.is_err(),
        "still accepting"
    );
}
