//! `tollgate serve` end to end: the binary on the embedded demo catalog (no keys, no
//! network), on a free 127.0.0.1 port it prints, answering a chat completion and
//! stopping gracefully on SIGTERM.

mod common;

use common::serving::spawn_serve;
use common::text;
use serde_json::{Value, json};

#[tokio::test]
async fn serve_on_the_demo_catalog_answers_a_chat_completion_and_stops_on_sigterm() {
    let mut serving = spawn_serve(&[]);
    let url = serving.url.clone();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({"model": "demo", "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    let v: Value = response.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(
        !v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    let ready = http.get(format!("{url}/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    serving.terminate();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut serving.stdout, &mut rest).unwrap();
    assert!(rest.contains("stopped"), "{rest}");
    let mut err = Vec::new();
    std::io::Read::read_to_end(serving.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        text(&err).contains("open"),
        "warns that it runs without keys: {}",
        text(&err)
    );
}

#[tokio::test]
async fn serve_with_keys_refuses_a_request_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "[[keys]]\nid = \"ci\"\nsecret_sha256 = \"{}\"\n",
            tollgate_gateway::hash_secret("ci-secret")
        ),
    )
    .unwrap();
    let mut serving = spawn_serve(&["--keys", keys.to_str().unwrap()]);
    let url = serving.url.clone();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let body =
        json!({"model": "demo", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]});
    let refused = http
        .post(format!("{url}/v1/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let answered = http
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "ci-secret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let v: Value = answered.json().await.unwrap();
    assert_eq!(v["type"], "message");
    serving.terminate();
}
