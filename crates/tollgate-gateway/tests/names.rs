//! Names clients send: a request by an alias or a pattern is served by the model it
//! resolves to (its limiter, its metrics label), answered under the name sent; the model
//! list in OpenAI's and Anthropic's shapes lists aliases; `GET /v1/models/{id}` resolves
//! the id or answers 404 in the dialect's shape. In process, on tokio's paused clock.

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{call, json_of, post};
use serde_json::{Value, json};
use tollgate::{Catalog, Models};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::{Gateway, GatewayMetrics, Keys, hash_secret};

/// `opus` under Claude Code's default name and every `claude-*`; `luna` under every
/// `gpt-*`; `plain` with no other name.
const NAMED: &str = r#"
[models.opus]
provider = "fake"
name = "fake-opus"
rpm = 6000
max_output_tokens = 128000
default_output_tokens = 64
context_window = 200000
arrival_allowance_ms = 0
aliases = ["claude-opus-5-5", "claude-sonnet-4-5"]
patterns = ["claude-*"]

[models.luna]
provider = "fake"
rpm = 6000
max_output_tokens = 256
arrival_allowance_ms = 0
patterns = ["gpt-*"]

[models.plain]
provider = "fake"
rpm = 6000
max_output_tokens = 256
arrival_allowance_ms = 0
"#;

fn gateway(fake: &FakeProvider, metrics: Option<Arc<GatewayMetrics>>) -> Gateway {
    let mut builder = Models::builder()
        .catalog(Catalog::from_toml_str(NAMED).unwrap())
        .provider(fake.clone());
    if let Some(metrics) = metrics {
        builder = builder.recorder(metrics);
    }
    Gateway::new(builder.build().unwrap())
}

fn get(path: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::get(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

fn ids(list: &Value) -> Vec<&str> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_request_by_alias_is_served_by_its_model_and_echoes_the_name_sent() {
    let fake = FakeProvider::new();
    fake.reply("opus", FakeReply::text("hello"));
    let gw = gateway(&fake, None);
    let body = json!({
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "messages": [{"role": "user", "content": "Hi"}],
    });
    let r = call(&gw, post("/v1/messages", &body, &[])).await;
    assert_eq!(r.status(), StatusCode::OK);
    let v = json_of(r).await;
    assert_eq!(v["model"], "claude-opus-5-5", "{v}");
    assert_eq!(v["content"][0]["text"], "hello");
    assert_eq!(fake.calls("opus"), 1);
    // The catalog model's limiter took the call, whatever name was used.
    let models = gw.models();
    let (by_alias, by_id) = (models.limiter("claude-opus-5-5"), models.limiter("opus"));
    assert!(Arc::ptr_eq(by_alias.unwrap(), by_id.unwrap()));
}

#[tokio::test(start_paused = true)]
async fn a_request_by_pattern_is_served_by_its_model_and_counted_under_the_catalog_id() {
    let fake = FakeProvider::new();
    fake.reply("luna", FakeReply::text("hi"));
    let metrics = Arc::new(GatewayMetrics::new());
    let gw = gateway(&fake, Some(metrics.clone())).with_metrics(metrics);
    let body = json!({
        "model": "gpt-5.6-luna",
        "messages": [{"role": "user", "content": "Hi"}],
    });
    let r = call(&gw, post("/v1/chat/completions", &body, &[])).await;
    assert_eq!(r.status(), StatusCode::OK);
    let v = json_of(r).await;
    assert_eq!(v["model"], "gpt-5.6-luna", "{v}");
    assert_eq!(fake.calls("luna"), 1);
    let listed = call(&gw, get("/v1/models", &[])).await;
    assert_eq!(listed.status(), StatusCode::OK);
    let scraped = call(&gw, get("/metrics", &[])).await;
    let text = String::from_utf8(
        axum::body::to_bytes(scraped.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(
        text.contains(
            r#"tollgate_gateway_requests_total{route="chat_completions",model="luna",key="",status="200"}"#
        ),
        "{text}"
    );
    assert!(
        !text.contains("gpt-5.6-luna"),
        "no series for a client's name"
    );
    assert!(
        text.contains(
            r#"tollgate_gateway_requests_total{route="models",model="",key="",status="200"}"#
        ),
        "GET /v1/models is counted: {text}"
    );
}

#[tokio::test(start_paused = true)]
async fn models_in_openai_s_shape_list_aliases_as_their_own_items() {
    let gw = gateway(&FakeProvider::new(), None);
    let v = json_of(call(&gw, get("/v1/models", &[])).await).await;
    assert_eq!(v["object"], "list");
    assert_eq!(
        ids(&v),
        [
            "luna",
            "opus",
            "claude-opus-5-5",
            "claude-sonnet-4-5",
            "plain"
        ]
    );
    let data = v["data"].as_array().unwrap();
    let opus = &data[1];
    assert_eq!(opus["object"], "model");
    assert_eq!(
        opus["aliases"],
        json!(["claude-opus-5-5", "claude-sonnet-4-5"])
    );
    assert_eq!(opus["patterns"], json!(["claude-*"]));
    let alias = &data[2];
    assert_eq!(alias["catalog_id"], "opus");
    assert_eq!(alias["owned_by"], "fake");
    assert!(alias.get("patterns").is_none(), "{alias}");
}

#[tokio::test(start_paused = true)]
async fn models_in_anthropic_s_shape_when_the_request_carries_anthropic_version() {
    let gw = gateway(&FakeProvider::new(), None);
    let version = [("anthropic-version", "2023-06-01")];
    let v = json_of(call(&gw, get("/v1/models?limit=1000", &version)).await).await;
    assert!(v.get("object").is_none(), "{v}");
    assert_eq!(ids(&v).len(), 5);
    assert_eq!(v["has_more"], false);
    assert_eq!(v["first_id"], "luna");
    assert_eq!(v["last_id"], "plain");
    let item = &v["data"][2];
    assert_eq!(item["type"], "model");
    assert_eq!(item["id"], "claude-opus-5-5");
    assert_eq!(item["display_name"], "claude-opus-5-5");
    assert_eq!(item["created_at"], "1970-01-01T00:00:00Z");
    assert_eq!(item["max_tokens"], 128000);
    assert_eq!(item["max_input_tokens"], 200000);
}

#[tokio::test(start_paused = true)]
async fn models_in_anthropic_s_shape_page_by_limit_and_after_id() {
    let gw = gateway(&FakeProvider::new(), None);
    let version = [("anthropic-version", "2023-06-01")];
    let first = json_of(call(&gw, get("/v1/models?limit=2", &version)).await).await;
    assert_eq!(ids(&first), ["luna", "opus"]);
    assert_eq!(
        (first["has_more"].clone(), first["last_id"].clone()),
        (json!(true), json!("opus"))
    );
    let next = json_of(call(&gw, get("/v1/models?limit=2&after_id=opus", &version)).await).await;
    assert_eq!(ids(&next), ["claude-opus-5-5", "claude-sonnet-4-5"]);
    let before =
        json_of(call(&gw, get("/v1/models?before_id=plain&limit=1", &version)).await).await;
    assert_eq!(ids(&before), ["claude-sonnet-4-5"]);
    assert_eq!(before["has_more"], true);
    let bad = call(&gw, get("/v1/models?limit=0", &version)).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let v = json_of(bad).await;
    assert_eq!(v["type"], "error", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`limit`"),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_model_by_id_alias_or_pattern_is_found_in_either_shape() {
    let gw = gateway(&FakeProvider::new(), None);
    let v = json_of(call(&gw, get("/v1/models/claude-haiku-4-5", &[])).await).await;
    assert_eq!(v["id"], "claude-haiku-4-5", "answered under the name asked");
    assert_eq!(v["object"], "model");
    assert_eq!(v["catalog_id"], "opus");
    // A percent-encoded name is the name it encodes.
    let v = json_of(call(&gw, get("/v1/models/claude%2Dhaiku%2D4%2D5", &[])).await).await;
    assert_eq!(v["id"], "claude-haiku-4-5", "{v}");
    let v = json_of(call(&gw, get("/v1/models/plain", &[])).await).await;
    assert_eq!(
        (v["id"].clone(), v["catalog_id"].clone()),
        (json!("plain"), json!("plain"))
    );
    let version = [("anthropic-version", "2023-06-01")];
    let v = json_of(call(&gw, get("/v1/models/claude-opus-5-5", &version)).await).await;
    assert_eq!(v["type"], "model");
    assert_eq!(v["id"], "claude-opus-5-5");
    assert_eq!(v["created_at"], "1970-01-01T00:00:00Z");
}

#[tokio::test(start_paused = true)]
async fn an_unknown_model_id_is_a_404_naming_it_in_the_dialect_s_shape() {
    let gw = gateway(&FakeProvider::new(), None);
    let r = call(&gw, get("/v1/models/mistral-large", &[])).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let v = json_of(r).await;
    assert_eq!(v["error"]["code"], "model_not_found", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`mistral-large`")
    );
    let r = call(
        &gw,
        get(
            "/v1/models/mistral-large",
            &[("anthropic-version", "2023-06-01")],
        ),
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let v = json_of(r).await;
    assert_eq!(
        (v["type"].clone(), v["error"]["type"].clone()),
        (json!("error"), json!("not_found_error"))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`mistral-large`"),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_listing_an_alias_may_use_and_list_its_model() {
    let secret = "tg-alias-secret-0123456789";
    let keys = Keys::from_toml_str(&format!(
        "[[keys]]\nid = \"cc\"\nsecret_sha256 = \"{}\"\nmodels = [\"claude-opus-5-5\"]\n",
        hash_secret(secret)
    ))
    .unwrap();
    let fake = FakeProvider::new();
    fake.reply("opus", FakeReply::text("ok"));
    let gw = gateway(&fake, None).with_keys(keys).unwrap();
    let auth = format!("Bearer {secret}");
    let headers = [("authorization", auth.as_str())];
    let listed = json_of(call(&gw, get("/v1/models", &headers)).await).await;
    assert_eq!(
        ids(&listed),
        ["opus", "claude-opus-5-5", "claude-sonnet-4-5"]
    );
    let body = json!({"model": "claude-3-haiku", "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(&gw, post("/v1/chat/completions", &body, &headers)).await;
    assert_eq!(r.status(), StatusCode::OK, "a pattern of the allowed model");
    let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]});
    let r = call(&gw, post("/v1/chat/completions", &body, &headers)).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test(start_paused = true)]
async fn a_stream_by_pattern_is_answered_under_the_name_sent() {
    let fake = FakeProvider::new();
    fake.reply("opus", FakeReply::text("streamed"));
    let gw = gateway(&fake, None);
    let body = json!({
        "model": "claude-haiku-4-5",
        "max_tokens": 64000,
        "stream": true,
        "messages": [{"role": "user", "content": "Hi"}],
    });
    let r = call(&gw, post("/v1/messages", &body, &[])).await;
    assert_eq!(r.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    let events = common::sse_events(std::str::from_utf8(&bytes).unwrap());
    let (name, start) = &events[0];
    assert_eq!(name.as_deref(), Some("message_start"));
    let start: Value = serde_json::from_str(start).unwrap();
    assert_eq!(start["message"]["model"], "claude-haiku-4-5", "{start}");
    assert_eq!(fake.calls("opus"), 1);
}
