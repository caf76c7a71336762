//! The conformance tier: the `mistral` provider against llmock's `/mistral/v1`
//! endpoints (PyPI llmock==0.2.2), started on 127.0.0.1 by `scripts/peers.sh`.
//!
//! The server's URL comes from `TOLLGATE_LLMOCK_URL`. Without it the test says so and
//! passes, unless `TOLLGATE_PEERS_REQUIRED` is set, where a missing server fails it. One
//! test runs the cases in order, because scripted behaviours are consumed by the next
//! request; each is matched to this test's own model name, since llmock is shared.
//! llmock serves no Mistral embeddings, so embeddings are checked by the contract kit.

use std::time::Duration;

use serde_json::{Value, json};
use tollgate::catalog::ModelEntry;
use tollgate::{
    Block, Error, JobContext, Json, LlmRequest, LlmResponse, Message, Models, ProviderError,
    SamplingParams, StopReason, StreamEvent, ToolChoice, ToolDefinition,
};
use tollgate_mistral::PROVIDER;
use tollgate_testkit::peers::url as peer;

/// The model name this test's requests carry, which its scripted behaviours match.
const MODEL: &str = "mistral-small-tollgate-conformance";

fn models(base: &str) -> Models {
    let entry = ModelEntry::new("chat", "mistral", MODEL)
        .with_option("base_url", format!("{base}/mistral"));
    tollgate_testkit::peers::llmock_models(PROVIDER, entry)
}

fn ask(text: &str, params: SamplingParams, tools: Vec<ToolDefinition>) -> LlmRequest {
    LlmRequest::new("chat", vec![Message::user(text)], tools, params).unwrap()
}

fn weather() -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

async fn stream(models: &Models, request: &LlmRequest) -> (Vec<StreamEvent>, Option<Error>) {
    tollgate_testkit::peers::stream_events(models, "chat", request).await
}

fn completed(events: &[StreamEvent]) -> &LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(a)) => a,
        other => panic!("the stream did not complete: {other:?}"),
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Queues behaviours matched to [`MODEL`].
async fn scenario(base: &str, behaviors: Value) {
    let mut behaviors = behaviors;
    for b in behaviors.as_array_mut().unwrap() {
        b["match"] = json!({"model": MODEL});
    }
    tollgate_testkit::peers::llmock_scenario(base, behaviors).await;
}

/// The bodies llmock received from this test, oldest first.
async fn sent_bodies(base: &str) -> Vec<Value> {
    let journal: Value = client()
        .get(format!("{base}/_llmock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    journal["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["model"] == MODEL)
        .map(|r| r["body"].clone())
        .collect()
}

fn is_weather_call(block: &Block) -> bool {
    matches!(block, Block::ToolUse { name, input, .. }
        if name == "get_weather" && input.value() == &json!({"city": "Paris"}))
}

#[tokio::test]
async fn llmock_mistral_chat_streams_tool_calls_and_scripted_faults() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let models = models(&base);
    let chat = models.chat("chat").await.unwrap();

    // Chat, whole and streamed (Mistral's streams end with `[DONE]`, which this preset
    // requires); the seed goes as `random_seed`.
    let answer = chat
        .single_response(&ask("hello", SamplingParams::new().with_seed(7), vec![]))
        .await
        .unwrap();
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let (events, error) = stream(&models, &ask("hello", SamplingParams::new(), vec![])).await;
    assert!(error.is_none(), "{error:?}");
    assert!(!completed(&events).text().is_empty());

    // A tool call asked for with `any`, whole and streamed.
    let required = || {
        ask(
            "weather in Paris?",
            SamplingParams::new().with_tool_choice(ToolChoice::Required),
            vec![weather()],
        )
    };
    let call = json!([{"type": "reply", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}}], "times": 2}]);
    scenario(&base, call).await;
    let answer = chat.single_response(&required()).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(answer.blocks().iter().any(is_weather_call), "{answer:?}");
    let (events, error) = stream(&models, &required()).await;
    assert!(error.is_none(), "{error:?}");
    let answer = completed(&events);
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(answer.blocks().iter().any(is_weather_call), "{answer:?}");

    // What arrived: `random_seed` (not `seed`), `tool_choice: "any"`, no `stream_options`.
    let bodies = sent_bodies(&base).await;
    assert!(
        bodies
            .iter()
            .any(|b| b["random_seed"] == json!(7) && b.get("seed").is_none()),
        "{bodies:?}"
    );
    assert!(
        bodies.iter().any(|b| b["tool_choice"] == json!("any")),
        "{bodies:?}"
    );
    assert!(
        bodies.iter().all(|b| b.get("stream_options").is_none()),
        "{bodies:?}"
    );

    // `model_length`, scripted: a full context window, typed, not re-run.
    scenario(
        &base,
        json!([{"type": "reply", "text": "cut", "finish_reason": "model_length", "times": 1}]),
    )
    .await;
    let err = chat
        .single_response(&ask("long", SamplingParams::new(), vec![]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ContextWindowExceeded { .. }), "{err}");

    // A 429 (in Mistral's top-level error body), then an answer: retried.
    scenario(
        &base,
        json!([{"type": "fail", "status": 429, "retry_after": 0.01, "times": 1}]),
    )
    .await;
    assert!(
        chat.single_response(&ask("after a 429", SamplingParams::new(), vec![]))
            .await
            .is_ok()
    );
    // The same 429 without retries: rate limited, with the server's wait.
    scenario(
        &base,
        json!([{"type": "fail", "status": 429, "retry_after": 0.01, "times": 1}]),
    )
    .await;
    let once = models.for_job(JobContext::new("no-retries", 0));
    let err = once
        .chat("chat")
        .await
        .unwrap()
        .single_response(&ask("429", SamplingParams::new(), vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_millis(10)),
        "{err}"
    );

    // A 400 in Mistral's body: rejected with its status, not retried.
    scenario(&base, json!([{"type": "fail", "status": 400, "times": 1}])).await;
    let err = chat
        .single_response(&ask("bad", SamplingParams::new(), vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400),
        "{err}"
    );
}
