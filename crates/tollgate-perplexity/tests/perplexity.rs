//! Perplexity's differences from OpenAI, each from a fixture of Perplexity's documented
//! shapes, and the `perplexity` preset against llmock's `/perplexity/v1` (the conformance
//! tier: `TOLLGATE_LLMOCK_URL`, see `scripts/peers.sh`).

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tollgate::catalog::{EmbeddingCapabilities, ModelEntry, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::MemoryRecorder;
use tollgate::provider::ChunkDecoder;
use tollgate::{
    Block, Catalog, Conversation, Error, LlmRequest, LlmResponse, Message, Models, ProviderError,
    Reasoning, ReasoningEffort, Role, SamplingParams, StopReason, StreamEvent, ToolChoice,
    ToolDefinition, Verbosity,
};
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};
use tollgate_openai::testkit::OpenAiWire;
use tollgate_perplexity::PROVIDER;
use tollgate_testkit::provider as kit;

fn options() -> EncodeOptions {
    let preset = PROVIDER.preset();
    EncodeOptions {
        dialect: preset.dialect,
        ..EncodeOptions::new("sonar-pro", preset.quirks.output_limit_field)
    }
}

fn ask(params: SamplingParams) -> LlmRequest {
    Conversation::new()
        .user("Latest on fusion?")
        .request("sonar", params)
        .unwrap()
}

fn tool() -> ToolDefinition {
    ToolDefinition::new(
        "lookup",
        "Looks up an order",
        tollgate::Json::new(json!({"type": "object", "properties": {"id": {"type": "string"}}})),
    )
}

fn with_tool(params: SamplingParams) -> LlmRequest {
    Conversation::new()
        .user("Where is order 7?")
        .with_tool(tool())
        .request("sonar", params)
        .unwrap()
}

fn decode(answer: &Value) -> LlmResponse {
    decode_response_in(answer.to_string().as_bytes(), &PROVIDER.preset().dialect).unwrap()
}

/// A Sonar answer as the API reference shows it: `citations` and `search_results` beside
/// `choices`, usage with Perplexity's own counts.
fn sonar_answer(content: &str) -> Value {
    json!({"id": "b525515f", "model": "sonar-pro", "created": 1, "object": "chat.completion",
        "usage": {"prompt_tokens": 14, "completion_tokens": 23, "total_tokens": 37,
                  "search_context_size": "low", "citation_tokens": 120, "num_search_queries": 1},
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content},
                     "delta": {"role": "assistant", "content": ""}}],
        "citations": ["https://example.com/fusion"],
        "search_results": [{"title": "Fusion", "url": "https://example.com/fusion", "date": "2026-11-30"}]})
}

fn native(response: &LlmResponse) -> &Value {
    match response.blocks().last() {
        Some(Block::Native { provider, value }) if provider == "perplexity" => value.value(),
        other => panic!("no perplexity block: {other:?}"),
    }
}

#[test]
fn citations_and_search_results_are_a_native_block_of_a_whole_answer() {
    let response = decode(&sonar_answer("Fusion news [1]."));
    assert_eq!(response.text(), "Fusion news [1].");
    let kept = native(&response);
    assert_eq!(kept["citations"][0], "https://example.com/fusion");
    assert_eq!(kept["search_results"][0]["date"], "2026-11-30");
    assert_eq!(
        (
            response.usage().input_tokens,
            response.usage().output_tokens
        ),
        (14, 23)
    );
}

/// Perplexity's stream chunks carry `citations`, `search_results` and the usage so far
/// (cumulative) on every chunk, and `object: "chat.completion"`.
#[test]
fn a_stream_keeps_the_search_fields_and_reads_the_cumulative_usage() {
    let chunk = |delta: Value, finish: Value, output: u64| {
        json!({"id": "21899d42", "model": "sonar", "created": 1, "object": "chat.completion",
               "usage": {"prompt_tokens": 14, "completion_tokens": output, "total_tokens": 14 + output},
               "citations": ["https://example.com/fusion"],
               "search_results": [{"title": "Fusion", "url": "https://example.com/fusion"}],
               "choices": [{"index": 0, "finish_reason": finish,
                            "message": {"role": "assistant", "content": "Fusion"}, "delta": delta}]})
    };
    let preset = PROVIDER.preset();
    let mut chunks = Chunks::default()
        .in_dialect(preset.dialect)
        .requiring_done(preset.quirks.done_required);
    let mut events = Vec::new();
    for c in [
        chunk(
            json!({"role": "assistant", "content": "Fusion"}),
            Value::Null,
            1,
        ),
        chunk(json!({"content": " news."}), Value::Null, 2),
        chunk(json!({"content": ""}), json!("stop"), 3),
    ] {
        events.extend(chunks.chunk(&c.to_string()).unwrap());
    }
    // No `[DONE]` is required: a finish reason and the end of the body complete it.
    events.extend(chunks.ended().unwrap());
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("not completed: {events:?}");
    };
    assert_eq!(response.text(), "Fusion news.");
    assert_eq!(response.usage().output_tokens, 3);
    assert_eq!(
        native(response)["citations"][0],
        "https://example.com/fusion"
    );
}

#[test]
fn the_native_block_is_never_sent_back() {
    let response = decode(&sonar_answer("Fusion news [1]."));
    let messages = vec![
        Message::user("Latest on fusion?"),
        Message {
            role: Role::Assistant,
            content: response.blocks().to_vec(),
        },
        Message::user("And fission?"),
    ];
    let request = LlmRequest::new("sonar", messages, vec![], SamplingParams::new()).unwrap();
    let body = encode_request(&request, &options()).unwrap();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Fusion news [1]."})
    );
    assert!(!body.to_string().contains("search_results"), "{body}");
}

#[test]
fn a_think_section_is_a_thinking_block_of_a_whole_answer() {
    let response = decode(&sonar_answer(
        "<think>\nCheck the dates.\n</think>\n\n{\"ok\": true}",
    ));
    assert!(
        matches!(&response.blocks()[0], Block::Thinking { text, .. } if text == "Check the dates.")
    );
    assert_eq!(response.text(), "{\"ok\": true}");
}

#[test]
fn an_unclosed_think_section_stays_text() {
    let response = decode(&sonar_answer("<think>cut off"));
    assert_eq!(response.text(), "<think>cut off");
    assert!(!matches!(&response.blocks()[0], Block::Thinking { .. }));
}

/// A chunk rewrite sees one chunk, not where the section ends: streamed text keeps the
/// tags as Perplexity sends them.
#[test]
fn a_streamed_think_section_stays_in_the_text() {
    let mut chunks = Chunks::default().in_dialect(PROVIDER.preset().dialect);
    let mut events = Vec::new();
    for (delta, finish) in [
        ("<think>", Value::Null),
        ("Hm.</think>", Value::Null),
        ("Yes.", json!("stop")),
    ] {
        let c = json!({"model": "sonar-reasoning-pro", "choices": [{"index": 0,
            "delta": {"content": delta}, "finish_reason": finish}]});
        events.extend(chunks.chunk(&c.to_string()).unwrap());
    }
    events.extend(chunks.ended().unwrap());
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("not completed: {events:?}");
    };
    assert_eq!(response.text(), "<think>Hm.</think>Yes.");
}

fn refused(request: &LlmRequest, naming: &str) {
    let err = encode_request(request, &options()).unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains(naming), "{err}");
}

#[test]
fn seed_json_object_and_verbosity_are_refused_not_dropped() {
    refused(&ask(SamplingParams::new().with_seed(7)), "seed");
    refused(&ask(SamplingParams::new().with_json_object()), "json");
    refused(
        &ask(SamplingParams::new().with_verbosity(Verbosity::High)),
        "verbosity",
    );
}

#[test]
fn a_forced_tool_is_refused_and_required_is_sent() {
    refused(
        &with_tool(SamplingParams::new().with_tool_choice(ToolChoice::Tool("lookup".into()))),
        "lookup",
    );
    let params = SamplingParams::new()
        .with_tool_choice(ToolChoice::Required)
        .with_parallel_tool_calls(false);
    let body = encode_request(&with_tool(params), &options()).unwrap();
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["tools"][0]["function"]["name"], "lookup");
}

#[test]
fn a_reasoning_effort_perplexity_does_not_take_is_refused_naming_it() {
    for effort in [ReasoningEffort::None, ReasoningEffort::XHigh] {
        let params = SamplingParams::new()
            .with_reasoning(Reasoning::effort(effort))
            .unwrap();
        refused(&ask(params), effort.as_str());
    }
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::Minimal))
        .unwrap();
    let body = encode_request(&ask(params), &options()).unwrap();
    assert_eq!(body["reasoning_effort"], "minimal");
}

#[test]
fn streams_ask_for_no_stream_options_and_the_limit_is_max_tokens() {
    let preset = PROVIDER.preset();
    let body = encode_request(
        &ask(SamplingParams::new().with_max_output_tokens(500).unwrap()),
        &EncodeOptions {
            stream: true,
            stream_usage: preset.quirks.stream_usage,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(body["max_tokens"], 500);
    assert_eq!(body["stream"], true);
    assert!(body.get("stream_options").is_none(), "{body}");
}

#[test]
fn search_options_reach_the_body_through_extra_body() {
    let extra: Map<String, Value> = serde_json::from_value(json!({
        "search_domain_filter": ["arxiv.org"],
        "search_recency_filter": "week",
        "web_search_options": {"search_context_size": "high"}
    }))
    .unwrap();
    let body = encode_request(
        &ask(SamplingParams::new()),
        &EncodeOptions {
            extra_body: extra,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(body["search_domain_filter"][0], "arxiv.org");
    assert_eq!(body["web_search_options"]["search_context_size"], "high");
}

fn verdict(status: u16, body: Value) -> Error {
    (PROVIDER.preset().dialect.error)(status, body.to_string().as_bytes()).verdict()
}

#[test]
fn errors_classify_by_status_and_type() {
    let quota = verdict(
        401,
        json!({"error": {"message": "out of credits", "type": "insufficient_quota", "code": 401}}),
    );
    assert!(matches!(quota, Error::QuotaExhausted { .. }), "{quota:?}");
    let limited = verdict(429, json!({"error": {"message": "Too many requests"}}));
    assert!(
        matches!(limited, Error::Provider(ProviderError::RateLimited { .. })),
        "{limited:?}"
    );
    let bad = verdict(
        400,
        json!({"error": {"message": "bad", "type": "invalid_message", "code": 400}}),
    );
    assert!(
        matches!(&bad, Error::ProviderRequest(e) if e.status == 400),
        "{bad:?}"
    );
}

fn catalog_models(catalog: Catalog) -> Models {
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("perplexity-main", "k"))
        .provider(PROVIDER)
        .build()
        .unwrap()
}

#[tokio::test]
async fn embeddings_and_decision_models_are_refused() {
    let entry = |id: &str, kind| {
        ModelEntry::new(id, "perplexity", "sonar")
            .with_kind(kind)
            .with_credential("perplexity-main")
    };
    let catalog = Catalog::builder()
        .model(
            entry("embed", ModelKind::Embeddings).with_embedding(EmbeddingCapabilities {
                native_width: Some(4),
                dimensions_param: false,
                truncation_safe: true,
            }),
        )
        .model(entry("judge", ModelKind::Decision))
        .embedding_width(4)
        .build()
        .unwrap();
    let models = catalog_models(catalog);
    let Err(err) = models.embeddings("embed").await else {
        panic!("an embeddings model of perplexity was built");
    };
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    let Err(err) = models.decision("judge").await else {
        panic!("a decision model of perplexity was built");
    };
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
}

/// The catalog example of `docs/providers/perplexity.md` loads and builds.
#[test]
fn the_docs_catalog_example_loads() {
    let page = include_str!("../../../docs/providers/perplexity.md");
    let toml = page
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a toml block");
    catalog_models(Catalog::from_toml_str(toml).unwrap());
}

async fn stream(models: &Models, request: &LlmRequest) -> Vec<StreamEvent> {
    let (events, error) = tollgate_testkit::peers::stream_events(models, kit::MODEL, request).await;
    assert!(error.is_none(), "{error:?}");
    events
}

/// One test for the server, its cases in order: scripted behaviours match this test's
/// own model name, so that other tests sharing llmock do not consume them.
#[tokio::test]
async fn llmock_perplexity_chat_citations_streams_tool_calls_and_a_retried_429() {
    let Some(base) = tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    const NAME: &str = "tollgate-perplexity-conformance";
    let scenario = |mut behavior: Value| {
        behavior["match"] = json!({"model": NAME});
        tollgate_testkit::peers::llmock_scenario(&base, json!([behavior]))
    };
    // llmock serves `/perplexity/v1/chat/completions`, Perplexity `/chat/completions`: a
    // `base_url` ending in `/v1` loses it (tollgate-openai strips it), so the address
    // ends in `/v1/.`, a dot segment that URL parsing removes.
    let script = OpenAiWire {
        model: NAME,
        ..OpenAiWire::new(PROVIDER)
    };
    let store = MemoryCredentialStore::new().with(kit::CREDENTIAL, kit::SECRET);
    let recorder = Arc::new(MemoryRecorder::new());
    let address = format!("{base}/perplexity/v1/.");
    let models = kit::models(&script, &address, Arc::new(store), recorder);
    let catalog = Catalog::from_toml_str(&format!(
        r#"
        [models.{model}]
        provider = "perplexity"
        name = "{NAME}"
        credential = "perplexity-main"
        max_output_tokens = 200
        [models.{model}.options]
        base_url = "{address}"
        extra_body = {{ return_citations = true }}
        "#,
        model = kit::MODEL,
    ))
    .unwrap();
    let citing = catalog_models(catalog);

    // Whole, asking for citations through `extra_body`: kept as the native block.
    let chat = citing.chat(kit::MODEL).await.unwrap();
    let answer = chat.single_response(&kit::request()).await.unwrap();
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let kept = native(&answer);
    assert!(kept["citations"][0].is_string(), "{kept}");
    assert!(kept["search_results"][0]["url"].is_string(), "{kept}");

    // Streamed.
    let events = stream(&models, &kit::request()).await;
    assert!(matches!(events.last(), Some(StreamEvent::Completed(a)) if !a.text().is_empty()));

    // A tool call, whole and streamed.
    let call =
        json!({"type": "reply", "tool_calls": [{"name": "lookup", "arguments": {"id": "7"}}]});
    let request = Conversation::new()
        .user("Where is order 7?")
        .with_tool(tool())
        .request(kit::MODEL, SamplingParams::new())
        .unwrap();
    let chat = models.chat(kit::MODEL).await.unwrap();
    scenario(call.clone()).await;
    let answer = chat.single_response(&request).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(answer.blocks().iter().any(
        |b| matches!(b, Block::ToolUse { name, input, .. } if name == "lookup" && input.value()["id"] == "7")
    ));
    scenario(call).await;
    let events = stream(&models, &request).await;
    assert!(
        matches!(events.last(), Some(StreamEvent::Completed(a)) if a.stop_reason() == StopReason::ToolUse)
    );

    // A 429, then an answer: retried.
    scenario(json!({"type": "fail", "status": 429, "retry_after": 0, "times": 1})).await;
    assert!(chat.single_response(&kit::request()).await.is_ok());
}
