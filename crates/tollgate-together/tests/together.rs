//! Together's differences from OpenAI, each from a fixture of Together's documented
//! shapes, and the `together` preset against llmock's `/together/v1` (the conformance
//! tier: `TOLLGATE_LLMOCK_URL`, see `scripts/peers.sh`).

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate::catalog::{ModelEntry, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::MemoryRecorder;
use tollgate::provider::ChunkDecoder;
use tollgate::{
    Block, Catalog, Conversation, Error, LlmRequest, Models, ProviderError, Reasoning,
    ReasoningEffort, SamplingParams, StopReason, StreamEvent, ToolDefinition, Verbosity,
};
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};
use tollgate_openai::testkit::OpenAiWire;
use tollgate_testkit::provider as kit;
use tollgate_together::PROVIDER;

fn options() -> EncodeOptions {
    let preset = PROVIDER.preset();
    EncodeOptions {
        dialect: preset.dialect,
        max_tokens: Some(256),
        ..EncodeOptions::new(
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            preset.quirks.output_limit_field,
        )
    }
}

fn tool() -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city",
        tollgate::Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

fn request(params: SamplingParams) -> LlmRequest {
    Conversation::new()
        .user("Weather in Paris?")
        .with_tool(tool())
        .request("llama", params)
        .unwrap()
}

#[test]
fn the_output_limit_is_sent_as_max_tokens() {
    let body = encode_request(&request(SamplingParams::new()), &options()).unwrap();
    assert_eq!(body["max_tokens"], 256);
    assert!(body.get("max_completion_tokens").is_none(), "{body}");
}

#[test]
fn parallel_tool_calls_is_refused_not_dropped() {
    let err = encode_request(
        &request(SamplingParams::new().with_parallel_tool_calls(false)),
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("parallel_tool_calls"), "{err}");
}

#[test]
fn verbosity_is_refused_not_dropped() {
    let err = encode_request(
        &request(SamplingParams::new().with_verbosity(Verbosity::Low)),
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
}

#[test]
fn a_tool_strict_flag_is_refused_not_dropped() {
    let request = Conversation::new()
        .user("Weather in Paris?")
        .with_tool(tool().with_strict(Some(true)))
        .request("llama", SamplingParams::new())
        .unwrap();
    let err = encode_request(&request, &options()).unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
}

#[test]
fn a_reasoning_effort_together_does_not_take_is_refused_naming_it() {
    for effort in [ReasoningEffort::Minimal, ReasoningEffort::XHigh] {
        let params = SamplingParams::new()
            .with_reasoning(Reasoning::effort(effort))
            .unwrap();
        let err = encode_request(&request(params), &options()).unwrap_err();
        assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
        assert!(err.to_string().contains(effort.as_str()), "{err}");
    }
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::High))
        .unwrap();
    let body = encode_request(&request(params), &options()).unwrap();
    assert_eq!(body["reasoning_effort"], "high");
}

#[test]
fn seed_a_forced_tool_and_required_are_sent_as_openai_writes_them() {
    let params = SamplingParams::new()
        .with_seed(42)
        .with_tool_choice(tollgate::ToolChoice::Tool("get_weather".into()));
    let body = encode_request(&request(params), &options()).unwrap();
    assert_eq!(body["seed"], 42);
    assert_eq!(body["tool_choice"]["function"]["name"], "get_weather");
    let required = encode_request(
        &request(SamplingParams::new().with_tool_choice(tollgate::ToolChoice::Required)),
        &options(),
    )
    .unwrap();
    assert_eq!(required["tool_choice"], "required");
}

/// Together's answer (together-py `ChatCompletion`): `finish_reason: "eos"`, reasoning in
/// `message.reasoning`.
#[test]
fn eos_is_an_end_turn_stop_and_reasoning_is_thinking() {
    let answer = json!({"id": "oBUth9w", "object": "chat.completion", "created": 1,
        "model": "deepseek-ai/DeepSeek-R1",
        "choices": [{"index": 0, "finish_reason": "eos", "logprobs": null, "seed": 1,
            "message": {"role": "assistant", "reasoning": "Paris is the capital.",
                        "content": "Paris.", "tool_calls": []}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}});
    let response =
        decode_response_in(answer.to_string().as_bytes(), &PROVIDER.preset().dialect).unwrap();
    assert_eq!(response.stop_reason(), StopReason::EndTurn);
    assert_eq!(response.text(), "Paris.");
    assert!(
        matches!(&response.blocks()[0], Block::Thinking { text, .. } if text == "Paris is the capital.")
    );
    assert_eq!(
        (
            response.usage().input_tokens,
            response.usage().output_tokens
        ),
        (12, 9)
    );

    let mut chunks = Chunks::default()
        .in_dialect(PROVIDER.preset().dialect)
        .requiring_done(PROVIDER.preset().quirks.done_required);
    let mut events = Vec::new();
    for chunk in [
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Paris."}}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": "eos"}],
               "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}}),
    ] {
        events.extend(chunks.chunk(&chunk.to_string()).unwrap());
    }
    events.extend(chunks.chunk("[DONE]").unwrap());
    assert!(events.contains(&StreamEvent::Stop(StopReason::EndTurn)));
    assert!(
        matches!(events.last(), Some(StreamEvent::Completed(a)) if a.usage().output_tokens == 2)
    );
}

#[test]
fn a_stream_cut_before_done_is_cut() {
    let mut chunks = Chunks::default()
        .in_dialect(PROVIDER.preset().dialect)
        .requiring_done(PROVIDER.preset().quirks.done_required);
    let chunk = json!({"model": "m", "choices": [{"index": 0, "delta": {"content": "Pa"},
                       "finish_reason": "eos"}]});
    chunks.chunk(&chunk.to_string()).unwrap();
    assert!(chunks.ended().is_err());
}

fn verdict(status: u16, body: Value) -> Error {
    (PROVIDER.preset().dialect.error)(status, body.to_string().as_bytes()).verdict()
}

#[test]
fn a_402_spending_limit_is_quota_exhausted() {
    let err = verdict(
        402,
        json!({"error": {"message": "Credit limit exceeded", "type": "credit_limit", "param": null, "code": null}}),
    );
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err:?}");
}

#[test]
fn a_dynamic_rate_limit_is_rate_limited_and_a_503_a_server_error() {
    for kind in ["dynamic_request_limited", "dynamic_token_limited"] {
        let err = verdict(
            429,
            json!({"error": {"message": "slow down", "type": kind}}),
        );
        assert!(
            matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
            "{err:?}"
        );
    }
    let err = verdict(
        503,
        json!({"error": {"message": "overloaded", "type": "server_error"}}),
    );
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Server { status: 503, .. })
        ),
        "{err:?}"
    );
}

/// Together's `x-ratelimit-*` / `x-tokenlimit-*` count per second; no per-minute
/// dimension may read them.
#[test]
fn per_second_rate_limit_headers_are_left_unread() {
    let per_second = [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "x-tokenlimit-limit",
        "x-tokenlimit-remaining",
    ];
    for headers in PROVIDER.preset().rate_limits {
        for name in [headers.limit, headers.remaining, headers.reset] {
            assert!(!per_second.contains(&name), "{name} is read");
        }
    }
    assert!(PROVIDER.preset().rate_limits.is_empty());
}

fn llmock_models(base_url: &str, model: &'static str) -> Models {
    let script = OpenAiWire {
        model,
        ..OpenAiWire::new(PROVIDER)
    };
    let store = MemoryCredentialStore::new().with(kit::CREDENTIAL, kit::SECRET);
    kit::models(
        &script,
        base_url,
        Arc::new(store),
        Arc::new(MemoryRecorder::new()),
    )
}

#[tokio::test]
async fn decision_models_are_refused_since_together_logprobs_are_a_count() {
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new(
                "judge",
                "together",
                "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            )
            .with_kind(ModelKind::Decision)
            .with_credential("together-main"),
        )
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("together-main", "k"))
        .provider(PROVIDER)
        .build()
        .unwrap();
    let Err(err) = models.decision("judge").await else {
        panic!("a decision model of together was built");
    };
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
}

async fn stream(models: &Models, request: &LlmRequest) -> Vec<StreamEvent> {
    let (events, error) = tollgate_testkit::peers::stream_events(models, kit::MODEL, request).await;
    assert!(error.is_none(), "{error:?}");
    events
}

/// One test for the server, its cases in order: scripted behaviours match this test's
/// own model name, so that other tests sharing llmock do not consume them.
#[tokio::test]
async fn llmock_together_chat_streams_tool_calls_and_a_retried_429() {
    let Some(base) = tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    const NAME: &str = "tollgate-together-conformance";
    let scenario = |mut behavior: Value| {
        behavior["match"] = json!({"model": NAME});
        tollgate_testkit::peers::llmock_scenario(&base, json!([behavior]))
    };
    let models = llmock_models(&format!("{base}/together"), NAME);
    let chat = models.chat(kit::MODEL).await.unwrap();

    // Whole: llmock's Together answers `finish_reason: "eos"`.
    let answer = chat.single_response(&kit::request()).await.unwrap();
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);

    // Streamed, with the usage chunk `stream_options.include_usage` asks for.
    let events = stream(&models, &kit::request()).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Usage(u) if u.output_tokens > 0)),
        "{events:?}"
    );
    assert!(matches!(events.last(), Some(StreamEvent::Completed(a)) if !a.text().is_empty()));

    // A tool call, whole and streamed.
    let with_tool = Conversation::new()
        .user("Weather in Paris?")
        .with_tool(tool())
        .request(kit::MODEL, SamplingParams::new())
        .unwrap();
    let call = json!({"type": "reply", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]});
    scenario(call.clone()).await;
    let answer = chat.single_response(&with_tool).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(answer.blocks().iter().any(|b| matches!(b,
        Block::ToolUse { name, input, .. } if name == "get_weather" && input.value()["city"] == "Paris")));
    scenario(call).await;
    let events = stream(&models, &with_tool).await;
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("not completed: {events:?}");
    };
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);

    // A 429, then an answer: retried.
    scenario(json!({"type": "fail", "status": 429, "retry_after": 0, "times": 1})).await;
    assert!(chat.single_response(&kit::request()).await.is_ok());
}

/// The catalog example of `docs/providers/together.md` loads and builds.
#[test]
fn the_docs_catalog_example_loads() {
    let page = include_str!("../../../docs/providers/together.md");
    let toml = page
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a toml block");
    let catalog = Catalog::from_toml_str(toml).unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("together-main", "k"))
        .provider(PROVIDER)
        .build()
        .unwrap();
}
