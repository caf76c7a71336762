//! What a client reads when the gateway cannot answer with a model's answer: only what
//! is its own (an upstream or internal failure is a stable message and the request id),
//! always in its dialect's error shape (unknown routes and methods too), invalid values
//! refused before anything is sent, and `/metrics` labels bounded whatever the bodies
//! say. In process, on tokio's paused clock.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{SECRET, call, json_of, keys, models, post};
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Models};
use tollgate_fake::{FakeProvider, Fault};
use tollgate_gateway::Gateway;
// Linked so that its provider (`openai-compatible`) is registered.
use tollgate_openai as _;

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test(start_paused = true)]
async fn an_upstream_401_is_answered_with_a_stable_message_and_the_request_id_not_the_providers_text()
 {
    let fake = FakeProvider::new();
    let quoted = "Incorrect API key provided: sk-proj-****************************WXYZ";
    for _ in 0..2 {
        fake.fail(
            "chat",
            Fault::RequestError {
                status: 401,
                message: quoted.into(),
            },
        );
    }
    let gateway = Gateway::new(models(&fake));
    for (path, dialect_message) in [
        ("/v1/chat/completions", "/error/message"),
        ("/v1/messages", "/error/message"),
    ] {
        let request = post(path, &chat("chat"), &[("x-request-id", "client-req-7")]);
        let r = call(&gateway, request).await;
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(r.headers()["x-request-id"], "client-req-7");
        let v = json_of(r).await;
        let message = v.pointer(dialect_message).and_then(Value::as_str).unwrap();
        assert!(!v.to_string().contains("WXYZ"), "{v}");
        assert!(!v.to_string().contains("Incorrect API key"), "{v}");
        assert!(message.contains("client-req-7"), "{message}");
        assert!(
            message.contains("refused the gateway's own credentials"),
            "{message}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_provider_400_still_tells_the_client_what_to_fix() {
    let fake = FakeProvider::new();
    fake.fail(
        "chat",
        Fault::RequestError {
            status: 400,
            message: "messages[0].content: too long".into(),
        },
    );
    let gateway = Gateway::new(models(&fake));
    let r = call(&gateway, post("/v1/chat/completions", &chat("chat"), &[])).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v = json_of(r).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too long")),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_missing_credential_is_a_500_that_names_neither_the_credential_nor_a_path() {
    // `openai-compatible` at an address nothing is sent to: the credential is looked up
    // first, and the store has none.
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("local", "openai-compatible", "llama")
                .with_credential("vault-prod-openai-7")
                .with_output_tokens(100, 10)
                .with_limits(Limits {
                    rpm: 100,
                    ..Limits::default()
                })
                .with_option("base_url", "http://127.0.0.1:9/v1"),
        )
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new())
        .build()
        .unwrap();
    let gateway = Gateway::new(models);
    for path in ["/v1/chat/completions", "/v1/messages"] {
        let r = call(&gateway, post(path, &chat("local"), &[])).await;
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR, "{path}");
        let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let text = json_of(r).await.to_string();
        assert!(!text.contains("vault-prod-openai-7"), "{text}");
        assert!(text.contains(&id), "{text}");
    }
}

async fn status_and_body(gateway: &Gateway, request: Request<Body>) -> (StatusCode, Value) {
    let r = call(gateway, request).await;
    let status = r.status();
    (status, json_of(r).await)
}

#[tokio::test(start_paused = true)]
async fn unknown_routes_and_methods_are_answered_in_the_dialects_error_shape() {
    let gateway = Gateway::new(models(&FakeProvider::new()));
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    let (status, v) = status_and_body(&gateway, get("/v1/assistants/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "unknown_route", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/chat/completions")
    );
    let (status, v) = status_and_body(&gateway, get("/v1/chat/completions")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(v["error"]["code"], "method_not_allowed", "{v}");
    // Under /v1/messages, Anthropic's shape.
    let (status, v) = status_and_body(&gateway, get("/v1/messages")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        (v["type"].as_str(), v["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error")),
        "{v}"
    );
    let (status, v) = status_and_body(&gateway, get("/v1/messages/count_tokens_nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["type"], "error", "{v}");
}

#[tokio::test(start_paused = true)]
async fn n_zero_and_a_tool_whose_parameters_are_not_an_object_are_refused_before_anything_is_sent()
{
    let fake = FakeProvider::new();
    let gateway = Gateway::new(models(&fake));
    let mut zero = chat("chat");
    zero["n"] = 0.into();
    let (status, v) = status_and_body(&gateway, post("/v1/chat/completions", &zero, &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`n`"),
        "{v}"
    );
    let mut tool = chat("chat");
    tool["tools"] =
        json!([{"type": "function", "function": {"name": "f", "parameters": "string"}}]);
    let (status, v) = status_and_body(&gateway, post("/v1/chat/completions", &tool, &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("input_schema"),
        "{v}"
    );
    let mut anthropic = chat("chat");
    anthropic["max_tokens"] = 10.into();
    anthropic["tools"] = json!([{"name": "f", "input_schema": {"type": "array"}}]);
    let (status, v) = status_and_body(&gateway, post("/v1/messages", &anthropic, &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(fake.calls("chat"), 0);
}

#[tokio::test(start_paused = true)]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let fake = FakeProvider::new();
    for _ in 0..3 {
        fake.reply_any(tollgate_fake::FakeReply::text("hi"));
    }
    let gateway = Gateway::new(models(&fake)).with_keys(keys()).unwrap();
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} {SECRET}");
        let r = call(
            &gateway,
            post(
                "/v1/chat/completions",
                &chat("chat"),
                &[("authorization", &auth)],
            ),
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK, "{scheme}");
    }
}

/// The metrics page's series: every sample line.
async fn series(gateway: &Gateway) -> Vec<String> {
    let r = call(
        gateway,
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await;
    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// This process's resident set, in KiB (Linux).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_unknown_model_names_add_no_metric_series_and_no_memory() {
    let gateway = Gateway::new(models(&FakeProvider::new()));
    let flood = |i: usize| {
        // 4 KiB names: 40 MiB in all, had they been kept as labels.
        let name = format!("model-{i}-{}", "x".repeat(4096));
        post("/v1/chat/completions", &chat(&name), &[])
    };
    // Warm up: the unknown series exists once, and the allocator has its pools.
    for i in 0..200 {
        assert_eq!(
            call(&gateway, flood(i)).await.status(),
            StatusCode::NOT_FOUND
        );
    }
    let before = series(&gateway).await;
    let rss_before = rss_kib();
    for i in 200..10_200 {
        assert_eq!(
            call(&gateway, flood(i)).await.status(),
            StatusCode::NOT_FOUND
        );
    }
    let after = series(&gateway).await;
    assert_eq!(
        before.len(),
        after.len(),
        "new series: {:?}",
        after
            .iter()
            .filter(|s| !before.contains(s))
            .collect::<Vec<_>>()
    );
    assert!(
        after
            .iter()
            .any(|s| s.contains("model=\"unknown\"") && s.contains("status=\"404\""))
    );
    assert!(
        after.iter().all(|s| !s.contains("model-")),
        "a made-up name became a label"
    );
    // Flat within 8 MiB (the names alone would be 40 MiB).
    let grown = rss_kib().saturating_sub(rss_before);
    assert!(grown < 8 * 1024, "RSS grew {grown} KiB");
}
