//! Anthropic's token counter (`POST /v1/messages/count_tokens`) against a local HTTP
//! server (wiremock on 127.0.0.1), through the pipeline: the body the counter takes, the
//! key and headers of the model's messages, the count as the provider's, its failures by
//! type, sent once, and nothing reserved on the model's limiter.

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{
    Catalog, Conversation, Error, Json, LlmRequest, Models, ProviderError, Reasoning,
    SamplingParams, Thinking, TokenCounter, ToolDefinition,
};
use tollgate_anthropic::AnthropicProvider;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY_ID: &str = "anthropic-main";
const API_KEY: &str = "sk-ant-TEST-0123456789-SECRET";

/// A server and `Models` with model `claude` on it, at one request a minute and an
/// output limit of 500 by default.
async fn setup() -> (MockServer, Models) {
    let server = MockServer::start().await;
    let entry = ModelEntry::new("claude", "anthropic-direct", "claude-test")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1,
            tpm: 10_000_000,
            ..Limits::default()
        })
        .with_option("base_url", server.uri())
        .with_option("beta", vec!["beta-one"]);
    let catalog = Catalog::builder().model(entry).build().unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials_arc(Arc::new(MemoryCredentialStore::new().with(KEY_ID, API_KEY)))
        .provider(AnthropicProvider)
        .build()
        .unwrap();
    (server, models)
}

/// A request with a system prompt, a tool, a temperature, a stop sequence and a thinking
/// budget above the model's default output limit.
fn ask() -> LlmRequest {
    let tool = ToolDefinition::new(
        "get_weather",
        "The weather in a city",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    );
    let params = SamplingParams::new()
        .with_temperature(0.5)
        .unwrap()
        .with_stop("END")
        .with_reasoning(Reasoning {
            thinking: Some(Thinking::Budget { tokens: 4000 }),
            ..Reasoning::default()
        })
        .unwrap();
    Conversation::new()
        .with_system("Be brief.")
        .with_tool(tool)
        .user("Weather in Oslo?")
        .request("claude", params)
        .unwrap()
}

#[tokio::test]
async fn the_count_is_anthropics_own_sent_with_the_models_key_and_headers() {
    let (server, models) = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .and(header("x-api-key", API_KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("anthropic-beta", "beta-one"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 1234})))
        .expect(1)
        .mount(&server)
        .await;
    let chat = models.chat("claude").await.unwrap();
    let counted = chat.count_input_tokens(&ask()).await.unwrap();
    assert_eq!(counted.input_tokens, 1234);
    assert_eq!(counted.counted_by, TokenCounter::Provider);

    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["model"], "claude-test");
    assert_eq!(sent["system"][0]["text"], "Be brief.", "{sent}");
    assert_eq!(
        sent["messages"][0]["content"][0]["text"],
        "Weather in Oslo?"
    );
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 4000})
    );
    // The counter refuses a Messages body's other fields as extra inputs.
    for field in [
        "max_tokens",
        "stream",
        "temperature",
        "stop_sequences",
        "top_k",
    ] {
        assert!(sent.get(field).is_none(), "`{field}` was sent: {sent}");
    }
}

#[tokio::test]
async fn counting_reserves_nothing_on_the_models_limiter() {
    let (server, models) = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"input_tokens": 9}))
                // The counter's own limits: not the model's.
                .insert_header("anthropic-ratelimit-requests-limit", "2")
                .insert_header("anthropic-ratelimit-requests-remaining", "0"),
        )
        .mount(&server)
        .await;
    let chat = models.chat("claude").await.unwrap();
    // Five counts on a model of one request a minute, at once.
    for _ in 0..5 {
        assert_eq!(
            chat.count_input_tokens(&ask()).await.unwrap().input_tokens,
            9
        );
    }
    let snapshot = models.limiter("claude").unwrap().snapshot().await.unwrap();
    assert_eq!(snapshot.grants, 0);
    // Full: the counter's `remaining: 0` did not reach the model's buckets.
    for (dimension, level, capacity) in &snapshot.levels {
        assert_eq!(*level, *capacity as f64, "{dimension:?}");
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 5);
}

#[tokio::test]
async fn a_counter_that_answers_an_error_fails_by_type_once_without_the_key() {
    let (server, models) = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .set_body_json(json!({"type": "error", "error": {
                    "type": "rate_limit_error",
                    "message": format!("slow down, {API_KEY}")}})),
        )
        .mount(&server)
        .await;
    let chat = models.chat("claude").await.unwrap();
    let err = chat.count_input_tokens(&ask()).await.unwrap_err();
    let Error::Provider(provider) = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(provider, ProviderError::RateLimited { .. }),
        "{err:?}"
    );
    assert_eq!(provider.retry_after_ms(), Some(7000));
    assert!(!format!("{err:?}").contains(API_KEY));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_counter_answer_without_input_tokens_is_malformed() {
    let (server, models) = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"tokens": 3})))
        .mount(&server)
        .await;
    let chat = models.chat("claude").await.unwrap();
    let err = chat.count_input_tokens(&ask()).await.unwrap_err();
    assert!(
        matches!(&err, Error::Provider(ProviderError::Malformed { .. })),
        "{err:?}"
    );
}
