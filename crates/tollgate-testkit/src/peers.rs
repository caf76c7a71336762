//! The third-party mock servers (llmock, aimock) and Redis that `scripts/peers.sh`
//! starts on 127.0.0.1 for `cargo xtask test-all`: where a test finds them, and what every
//! provider crate's conformance test against llmock does the same way (a model with room
//! to spare and fast retries, llmock's scripted behaviours, a stream's events).

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::Limits;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::provider::Provider;
use tollgate::{
    Block, Catalog, Error, JobContext, Json, LlmRequest, Message, ModelEntry, Models,
    ProviderError, SamplingParams, StopReason, StreamEvent, ToolDefinition,
};

/// The credential id [`llmock_models`] gives its model (llmock checks no key).
pub const PEER_CREDENTIAL: &str = "peer-key";

/// The URL in `var` (e.g. `TOLLGATE_LLMOCK_URL`). Without it the test should skip, and
/// this says so on stderr; but when `TOLLGATE_PEERS_REQUIRED` is set (xtask sets it), a
/// missing server fails the test instead of passing it silently.
pub fn url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("TOLLGATE_PEERS_REQUIRED").is_none(),
                "{var} is not set, but TOLLGATE_PEERS_REQUIRED is: start the peers with scripts/peers.sh start"
            );
            eprintln!(
                "{var} is not set: skipped (run `cargo xtask test-all`, or scripts/peers.sh start)"
            );
            None
        }
    }
}

/// A `Models` of one chat model, `entry` (its id, provider key, name and options as the
/// test writes them), served by `provider`: with the credential [`PEER_CREDENTIAL`],
/// 200 output tokens at most (50 by default), room to spare (6,000 requests and 100
/// million tokens a minute, so llmock's own limits are what a test meets) and retries a
/// millisecond apart.
pub fn llmock_models(provider: impl Provider, entry: ModelEntry) -> Models {
    let entry = entry
        .with_credential(PEER_CREDENTIAL)
        .with_output_tokens(200, 50)
        .with_limits(Limits {
            rpm: 6000,
            tpm: 100_000_000,
            ..Limits::default()
        });
    let catalog = Catalog::builder()
        .model(entry)
        .build()
        .expect("a peer test's catalog");
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(PEER_CREDENTIAL, "sk-peer-test"))
        .provider(provider)
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
        .expect("a peer test's models")
}

/// Scripts llmock at `base` (`POST /_llmock/scenario`): each behaviour is consumed by the
/// next request it matches (give each a `match` on the test's own model name, so that
/// other tests sharing the server do not consume it).
pub async fn llmock_scenario(base: &str, behaviors: Value) {
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
        .post(format!("{base}/_llmock/scenario"))
        .json(&json!({ "behaviors": behaviors }))
        .send()
        .await
        .expect("llmock answers");
    assert!(
        response.status().is_success(),
        "llmock refused the scenario: {}",
        response.status()
    );
}

/// Streams `request` to model `model_id`: the events that arrived, and the error that
/// ended the stream (or failed it before its first event), if any.
pub async fn stream_events(
    models: &Models,
    model_id: &str,
    request: &LlmRequest,
) -> (Vec<StreamEvent>, Option<Error>) {
    let client = match models.chat(model_id).await {
        Ok(client) => client,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut stream = match client.stream_response(request).await {
        Ok(stream) => stream,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

/// The cases every OpenAI-like provider's llmock conformance test runs, in order, on the
/// chat model `chat` of `models` whose requests carry the model name `model` (scripted
/// behaviours match it): an answer whole and streamed (with its usage), a scripted tool
/// call whole and streamed, a 429 with `retry-after` that is retried to an answer, and the
/// same 429 without retries, which ends `RateLimited` with the server's wait.
pub async fn llmock_chat_tools_and_a_429(models: &Models, base: &str, model: &str) {
    let only_ours = json!({ "model": model });
    let ask = |text: &str, tools: Vec<ToolDefinition>| {
        LlmRequest::new(
            "chat",
            vec![Message::user(text)],
            tools,
            SamplingParams::new(),
        )
        .expect("a request")
    };
    let completed = |events: &[StreamEvent]| match events.last() {
        Some(StreamEvent::Completed(answer)) => answer.clone(),
        other => panic!("the stream did not complete: {other:?}"),
    };
    let streamed = |request: LlmRequest| async move {
        let (events, error) = stream_events(models, "chat", &request).await;
        assert!(error.is_none(), "{error:?}");
        completed(&events)
    };
    let chat = models.chat("chat").await.expect("the chat model");

    let answer = chat
        .single_response(&ask("hello", vec![]))
        .await
        .expect("an answer");
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let answer = streamed(ask("hello", vec![])).await;
    assert!(!answer.text().is_empty());
    assert!(answer.usage().output_tokens > 0, "{answer:?}");

    let tool = ToolDefinition::new(
        "get_weather",
        "The weather in a city",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    );
    let call = json!({"type": "reply", "tool_calls": [{"name": "get_weather",
        "arguments": {"city": "Paris"}}], "times": 2, "match": only_ours});
    llmock_scenario(base, json!([call])).await;
    let answer = chat
        .single_response(&ask("weather?", vec![tool.clone()]))
        .await
        .expect("a tool call");
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(
        answer
            .blocks()
            .iter()
            .any(|b| matches!(b, Block::ToolUse { name, input, .. }
            if name == "get_weather" && input.value()["city"] == "Paris")),
        "{:?}",
        answer.blocks()
    );
    let answer = streamed(ask("weather?", vec![tool])).await;
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);

    let limited = json!({"type": "fail", "status": 429, "retry_after": 1, "times": 1,
                         "match": only_ours});
    llmock_scenario(base, json!([limited])).await;
    assert!(
        chat.single_response(&ask("after a 429", vec![]))
            .await
            .is_ok()
    );
    llmock_scenario(base, json!([limited])).await;
    let err = models
        .for_job(JobContext::new("no-retries", 0))
        .chat("chat")
        .await
        .expect("the chat model")
        .single_response(&ask("429", vec![]))
        .await
        .expect_err("a 429 without retries");
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) })
            if d == Duration::from_secs(1)),
        "{err}"
    );
}
