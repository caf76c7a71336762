//! Any provider behind either dialect: an OpenAI-dialect client calls a model of the
//! `anthropic-direct` provider, an Anthropic-dialect client one of the `openai`
//! provider; each provider talks to a local stand-in of its API (wiremock on 127.0.0.1).

mod common;

use std::sync::Arc;

use common::{client, start};
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
// Linked so that their providers (`anthropic-direct`, `openai`) are registered.
use tollgate_anthropic as _;
use tollgate_gateway::Gateway;
use tollgate_openai as _;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn limits() -> Limits {
    Limits {
        rpm: 1000,
        tpm: 1_000_000,
        ..Limits::default()
    }
}

async fn upstreams() -> (MockServer, MockServer, Models) {
    let anthropic = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "from claude"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 9, "output_tokens": 3}})))
        .mount(&anthropic)
        .await;
    let openai = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "from gpt"}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}})))
        .mount(&openai)
        .await;
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("claude", "anthropic-direct", "claude-test")
                .with_credential("anthropic-key")
                .with_output_tokens(1000, 100)
                .with_limits(limits())
                .with_option("base_url", anthropic.uri()),
        )
        .model(
            ModelEntry::new("gpt", "openai", "gpt-test")
                .with_credential("openai-key")
                .with_output_tokens(1000, 100)
                .with_limits(limits())
                .with_option("base_url", openai.uri()),
        )
        .build()
        .unwrap();
    let store = MemoryCredentialStore::new()
        .with("anthropic-key", "sk-ant-upstream")
        .with("openai-key", "sk-upstream");
    let models = Models::builder()
        .catalog(catalog)
        .credentials_arc(Arc::new(store))
        .build()
        .unwrap();
    (anthropic, openai, models)
}

#[tokio::test]
async fn an_openai_client_calls_an_anthropic_model_and_an_anthropic_client_an_openai_model() {
    let (anthropic, openai, models) = upstreams().await;
    let gw = start(Gateway::new(models)).await;

    let v: Value = client()
        .post(gw.at("/v1/chat/completions"))
        .json(&json!({"model": "claude", "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "from claude", "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], 9);
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let sent = &anthropic.received_requests().await.unwrap()[0];
    assert_eq!(sent.headers["x-api-key"], "sk-ant-upstream");

    let v: Value = client()
        .post(gw.at("/v1/messages"))
        .json(&json!({"model": "gpt", "max_tokens": 50,
            "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["content"][0]["text"], "from gpt", "{v}");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["input_tokens"], 7);
    let sent: Value = openai.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["model"], "gpt-test");
    gw.stop().await.unwrap();
}
