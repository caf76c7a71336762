//! `POST /v1/messages/count_tokens`: an `anthropic-direct` model's count is Anthropic's
//! own (a local stand-in of its API, wiremock on 127.0.0.1), any other model's tollgate's
//! estimate, `x-tollgate-token-count` saying which; keyed and counted like
//! `/v1/messages`, a bad body refused naming its field, and no slot taken on the model's
//! limiter.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{call, json_of, post};
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::{DefaultEstimator, TokenEstimator};
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tollgate_anthropic as _;
use tollgate_gateway::{Gateway, GatewayMetrics, Keys, TOKEN_COUNT_HEADER, hash_secret};
use tollgate_sim as _;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "tg-count-secret";

/// A gateway with metrics over `claude` (`anthropic-direct`, on `upstream`) and `demo`
/// (`sim`), each at one request a minute; key `counter` may use `claude` only.
fn gateway(upstream: &str) -> (Gateway, Arc<GatewayMetrics>) {
    let limits = Limits {
        rpm: 1,
        tpm: 1_000_000,
        ..Limits::default()
    };
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("claude", "anthropic-direct", "claude-test")
                .with_credential("anthropic-key")
                .with_output_tokens(1000, 100)
                .with_limits(limits)
                .with_option("base_url", upstream),
        )
        .model(
            ModelEntry::new("demo", "sim", "sim-chat-1")
                .with_output_tokens(512, 64)
                .with_limits(limits),
        )
        .build()
        .unwrap();
    let store = MemoryCredentialStore::new().with("anthropic-key", "sk-ant-upstream");
    let models = Models::builder()
        .catalog(catalog)
        .credentials_arc(Arc::new(store))
        .build()
        .unwrap();
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"counter\"\nsecret_sha256 = \"{}\"\nmodels = [\"claude\"]\n",
        hash_secret(SECRET)
    ))
    .unwrap();
    let metrics = Arc::new(GatewayMetrics::new());
    let gateway = Gateway::new(models)
        .with_keys(keys)
        .unwrap()
        .with_metrics(metrics.clone());
    (gateway, metrics)
}

/// A count body (no `max_tokens`, as the counter takes none) for `model`.
fn body(model: &str) -> Value {
    json!({
        "model": model,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "How long is this?"}],
        "tools": [{"name": "lookup", "description": "Looks up",
            "input_schema": {"type": "object"}}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    })
}

async fn upstream() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 77})))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn an_anthropic_direct_model_is_counted_by_anthropic_with_header_provider() {
    let server = upstream().await;
    let (gateway, metrics) = gateway(&server.uri());
    let r = call(
        &gateway,
        post(
            "/v1/messages/count_tokens?beta=true",
            &body("claude"),
            &[("x-api-key", SECRET), ("anthropic-version", "2023-06-01")],
        ),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[TOKEN_COUNT_HEADER], "provider");
    assert_eq!(json_of(r).await, json!({"input_tokens": 77}));
    let sent = &server.received_requests().await.unwrap()[0];
    assert_eq!(sent.headers["x-api-key"], "sk-ant-upstream");
    let sent: Value = sent.body_json().unwrap();
    assert_eq!(sent["model"], "claude-test");
    assert_eq!(sent["system"][0]["text"], "Be brief.", "{sent}");
    assert_eq!(sent["tools"][0]["name"], "lookup");
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert!(
        metrics.encode().contains(
            "tollgate_gateway_requests_total{route=\"count_tokens\",model=\"claude\",key=\"counter\",status=\"200\"} 1"
        ),
        "{}",
        metrics.encode()
    );
}

#[tokio::test]
async fn a_count_is_key_checked_like_messages() {
    let server = upstream().await;
    let (gateway, metrics) = gateway(&server.uri());
    let none = call(
        &gateway,
        post("/v1/messages/count_tokens", &body("claude"), &[]),
    )
    .await;
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    let v = json_of(none).await;
    assert_eq!(v["error"]["type"], "authentication_error", "{v}");
    // `counter` may not use `demo`.
    let other = call(
        &gateway,
        post(
            "/v1/messages/count_tokens",
            &body("demo"),
            &[("authorization", &format!("Bearer {SECRET}"))],
        ),
    )
    .await;
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    assert!(server.received_requests().await.unwrap().is_empty());
    let text = metrics.encode();
    assert!(
        text.contains("route=\"count_tokens\",model=\"\",key=\"\",status=\"401\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("route=\"count_tokens\",model=\"demo\",key=\"counter\",status=\"403\"} 1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn another_providers_model_is_counted_by_tollgates_estimate_with_header_estimate() {
    let (gateway, _) = gateway("http://127.0.0.1:9");
    let open = Gateway::new(gateway.models().clone());
    let expected = Conversation::new()
        .with_system("Be brief.")
        .user("How long is this?")
        .with_tool(tollgate::ToolDefinition::new(
            "lookup",
            "Looks up",
            tollgate::Json::new(json!({"type": "object"})),
        ))
        .request("demo", SamplingParams::new())
        .unwrap();
    // Three at a model of one request a minute, none waiting: a count takes no slot.
    for _ in 0..3 {
        let r = call(&open, post("/v1/messages/count_tokens", &body("demo"), &[])).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[TOKEN_COUNT_HEADER], "estimate");
        let v = json_of(r).await;
        assert_eq!(
            v["input_tokens"],
            DefaultEstimator.estimate_request(&expected),
            "{v}"
        );
    }
    let snapshot = common::snapshot(&open, "demo").await;
    assert_eq!(snapshot.grants, 0);
}

#[tokio::test(start_paused = true)]
async fn a_bad_count_body_is_a_400_in_anthropics_shape_naming_the_field() {
    let (gateway, _) = gateway("http://127.0.0.1:9");
    let open = Gateway::new(gateway.models().clone());
    let cases = [
        (
            json!({"model": "demo", "messages": [{"role": "robot", "content": "Hi"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "demo", "messages": [{"role": "user", "content": "Hi"}],
                "thinking": {"type": "sometimes"}}),
            "thinking.type",
        ),
        (json!({"model": "demo"}), "messages"),
    ];
    for (bad, field) in cases {
        let r = call(&open, post("/v1/messages/count_tokens", &bad, &[])).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        let v = json_of(r).await;
        assert_eq!(v["type"], "error", "{v}");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{field}: {message}");
    }
}
