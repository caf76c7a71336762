//! The conformance tier: the transports against llmock (PyPI llmock==0.2.2), whose
//! `/cohere/v2` endpoints follow the official Cohere SDK's types, started on 127.0.0.1
//! by `scripts/peers.sh` (which `cargo xtask test-all` runs before the tests).
//!
//! The server's URL comes from `TOLLGATE_LLMOCK_URL`. Without it the test says so and
//! passes, unless `TOLLGATE_PEERS_REQUIRED` is set (xtask sets it), where a missing
//! server fails it. One test runs the cases in order, because scripted faults are
//! consumed by whichever request comes next.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Block, Catalog, Conversation, EmbeddingPurpose, Error, JobContext, Json, LlmRequest,
    LlmResponse, Message, Models, ProviderError, Role, SamplingParams, StopReason, StreamEvent,
    ToolDefinition,
};
use tollgate_cohere::CohereProvider;
use tollgate_testkit::peers::url as peer;

const KEY_ID: &str = "peer-key";

fn models(base_url: &str) -> Models {
    let limits = Limits {
        rpm: 6000,
        tpm: 100_000_000,
        ..Limits::default()
    };
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("chat", "cohere", "command-a-03-2025")
                .with_credential(KEY_ID)
                .with_output_tokens(200, 50)
                .with_limits(limits)
                .with_option("base_url", base_url),
        )
        .model(
            ModelEntry::new("embed", "cohere", "embed-v4.0")
                .with_kind(ModelKind::Embeddings)
                .with_credential(KEY_ID)
                .with_limits(limits)
                .with_embedding(EmbeddingCapabilities {
                    native_width: Some(1536),
                    dimensions_param: true,
                    truncation_safe: true,
                })
                .with_option("base_url", base_url),
        )
        .embedding_width(4)
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(KEY_ID, "co-peer-test"))
        .provider(CohereProvider)
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                jitter_seed: Some(3),
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        })
        .build()
        .unwrap()
}

fn no_retries(models: &Models) -> Models {
    models.for_job(JobContext::new("no-retries", 0))
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

fn ask(text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request("chat", SamplingParams::new())
        .unwrap()
}

fn ask_with_tool(text: &str) -> LlmRequest {
    Conversation::new()
        .with_tool(weather_tool())
        .user(text)
        .request("chat", SamplingParams::new())
        .unwrap()
}

async fn single(models: &Models, request: &LlmRequest) -> tollgate::Result<LlmResponse> {
    models.chat("chat").await?.single_response(request).await
}

/// The stream's events up to its first error, and that error.
async fn stream(models: &Models, request: &LlmRequest) -> (Vec<StreamEvent>, Option<Error>) {
    let chat = models.chat("chat").await.unwrap();
    let items: Vec<tollgate::Result<StreamEvent>> = match chat.stream_response(request).await {
        Ok(s) => s.collect().await,
        Err(e) => vec![Err(e)],
    };
    let mut events = Vec::new();
    for item in items {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

/// POSTs a control request to llmock (plain HTTP on 127.0.0.1, no proxy).
async fn control(url: String, body: Value) {
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
}

fn completed(events: &[StreamEvent]) -> &LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(a)) => a,
        other => panic!("the stream did not complete: {other:?}"),
    }
}

/// The answer's one tool call: `get_weather` for Paris.
fn assert_weather_call(answer: &LlmResponse) -> (String, Json) {
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let call = answer.blocks().iter().find_map(|b| match b {
        Block::ToolUse {
            id, name, input, ..
        } if name == "get_weather" => Some((id.clone(), input.clone())),
        _ => None,
    });
    let (id, input) = call.unwrap_or_else(|| panic!("no tool call: {:?}", answer.blocks()));
    assert_eq!(input.value(), &json!({"city": "Paris"}));
    (id, input)
}

#[tokio::test]
async fn llmock_cohere_chat_streams_tool_calls_and_scripted_faults() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let scenario = |behaviors: Value| {
        control(
            format!("{base}/_llmock/scenario"),
            json!({ "behaviors": behaviors }),
        )
    };
    control(format!("{base}/_llmock/reset"), json!({})).await;
    let models = models(&format!("{base}/cohere"));

    // Chat, whole and streamed.
    let answer = single(&models, &ask("hello")).await.unwrap();
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert!(answer.usage().output_tokens > 0, "{:?}", answer.usage());
    let (events, error) = stream(&models, &ask("hello")).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(completed(&events).text(), answer.text());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Usage(u) if u.output_tokens > 0)),
        "the usage arrived: {events:?}"
    );

    // A tool call (llmock's `reply{tool_calls}`), whole and streamed, then its result
    // sent back as a `tool` message and answered.
    let call = json!([{"type": "reply", "times": 2,
                       "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}]);
    scenario(call).await;
    let answer = single(&models, &ask_with_tool("weather?")).await.unwrap();
    let (id, input) = assert_weather_call(&answer);
    let (events, error) = stream(&models, &ask_with_tool("weather?")).await;
    assert!(error.is_none(), "{error:?}");
    assert_weather_call(completed(&events));
    assert!(
        events.iter().any(
            |e| matches!(e, StreamEvent::ToolUseDelta { name: Some(n), .. } if n == "get_weather")
        ),
        "{events:?}"
    );
    let follow_up = ask_with_tool("weather?").with_appended([
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: id.clone(),
                name: "get_weather".into(),
                input,
                cache: None,
            }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: id,
                content: vec![Block::text("Sunny, 21 C")],
                is_error: false,
                cache: None,
            }],
        },
    ]);
    let answer = single(&models, &follow_up.unwrap()).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);

    // A 429 with retry-after, then an answer: retried.
    scenario(json!([{"type": "fail", "status": 429, "retry_after": 1, "times": 1}])).await;
    assert!(single(&models, &ask("after a 429")).await.is_ok());
    // The same 429, without retries: RateLimited with the server's wait.
    scenario(json!([{"type": "fail", "status": 429, "retry_after": 1, "times": 1}])).await;
    let err = single(&no_retries(&models), &ask("429")).await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(1)),
        "{err}"
    );

    // Out of credit (402): final.
    scenario(json!([{"type": "fail", "status": 402, "times": 1}])).await;
    let err = single(&models, &ask("quota")).await.unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");

    // A 500 and a 503: retried to an answer. A 400: rejected, not retried.
    scenario(json!([
        {"type": "fail", "status": 500, "times": 1},
        {"type": "fail", "status": 503, "times": 1}
    ]))
    .await;
    assert!(single(&models, &ask("after two 5xx")).await.is_ok());
    scenario(json!([{"type": "fail", "status": 400, "times": 1}])).await;
    let err = single(&models, &ask("bad")).await.unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400),
        "{err}"
    );

    // MAX_TOKENS: re-run at the ceiling, still cut: OutputTruncated.
    scenario(json!([{"type": "reply", "text": "cut", "finish_reason": "length", "times": 2}]))
        .await;
    let err = single(&models, &ask("truncate")).await.unwrap_err();
    assert!(matches!(err, Error::OutputTruncated { .. }), "{err}");

    // A stream dropped after its first delta: interrupted, not retried.
    scenario(
        json!([{"type": "stream_fault", "kind": "disconnect", "after_chunks": 3, "times": 1}]),
    )
    .await;
    let (events, error) = stream(&models, &ask("drop")).await;
    assert!(!events.is_empty());
    assert!(
        matches!(error, Some(Error::StreamInterrupted { .. })),
        "{error:?}"
    );

    // Embeddings: llmock 0.2.2 serves no `/cohere/v2/embed` (its Cohere router has chat,
    // models, datasets and batches only), so the request reaches it and its 404, in
    // Cohere's error shape, comes back typed. The contract kit checks embeddings.
    let err = models
        .embeddings("embed")
        .await
        .unwrap()
        .embed_batch(&["one".to_owned()], EmbeddingPurpose::Document)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 404),
        "{err}"
    );
}
