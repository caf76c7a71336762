//! The reuse API: a [`Preset`] and its [`Dialect`] change what the OpenAI codec writes and
//! reads, each difference where the preset says so and nowhere else.

use serde_json::{Map, Value, json};
use tollgate::catalog::ModelEntry;
use tollgate::provider::{ChunkDecoder, Provider, Setting};
use tollgate::{
    Block, Conversation, Error, LlmRequest, Message, Role, SamplingParams, StopReason, StreamEvent,
    ToolChoice, ToolDefinition,
};
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};
use tollgate_openai::preset::{Dialect, Preset};
use tollgate_openai::{OpenAiOptions, OpenAiProvider, OutputLimitField};

/// A dialect with every hook set, as a preset crate would write it.
const DIALECT: Dialect = Dialect {
    provider: "example",
    required_tool_choice: "any",
    forced_tool: false,
    refuses: &[Setting::Seed],
    finish_reasons: &[("model_length", StopReason::MaxTokens)],
    kept_fields: &["citations"],
    rewrite: Some(move_usage),
    request: Some(safe_prompt),
    ..Dialect::OPENAI
};

/// Moves `x_usage` to `usage`.
fn move_usage(answer: &mut Value) {
    if let Some(usage) = answer.get_mut("x_usage").map(Value::take) {
        answer["usage"] = usage;
    }
}

/// Adds `safe_prompt: true`.
fn safe_prompt(_: &LlmRequest, body: &mut Map<String, Value>) -> tollgate::Result<()> {
    body.insert("safe_prompt".into(), json!(true));
    Ok(())
}

fn options(dialect: Dialect) -> EncodeOptions {
    EncodeOptions {
        dialect,
        ..EncodeOptions::new("m", OutputLimitField::MaxTokens)
    }
}

fn with_tools(params: SamplingParams) -> LlmRequest {
    let tool = ToolDefinition::new(
        "lookup",
        "Looks up",
        tollgate::Json::new(json!({"type": "object"})),
    );
    Conversation::new()
        .user("hi")
        .with_tool(tool)
        .request("m", params)
        .unwrap()
}

fn answer(body: Value) -> Vec<u8> {
    body.to_string().into_bytes()
}

#[test]
fn a_required_tool_choice_is_written_in_the_dialects_word() {
    let request = with_tools(SamplingParams::new().with_tool_choice(ToolChoice::Required));
    let body = encode_request(&request, &options(DIALECT)).unwrap();
    assert_eq!(body["tool_choice"], "any");
    let body = encode_request(&request, &options(Dialect::OPENAI)).unwrap();
    assert_eq!(body["tool_choice"], "required");
}

#[test]
fn a_forced_tool_is_refused_where_the_dialect_cannot_force_one() {
    let request =
        with_tools(SamplingParams::new().with_tool_choice(ToolChoice::Tool("lookup".into())));
    let err = encode_request(&request, &options(DIALECT)).unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("lookup"), "{err}");
    assert!(encode_request(&request, &options(Dialect::OPENAI)).is_ok());
}

#[test]
fn a_setting_the_dialect_refuses_is_refused_not_dropped() {
    let request = Conversation::new()
        .user("hi")
        .request("m", SamplingParams::new().with_seed(7))
        .unwrap();
    let err = encode_request(&request, &options(DIALECT)).unwrap_err();
    assert!(err.to_string().contains("seed"), "{err}");
    let body = encode_request(&request, &options(Dialect::OPENAI)).unwrap();
    assert_eq!(body["seed"], 7);
}

#[test]
fn the_request_hook_has_the_last_word_and_extra_body_adds_fields() {
    let request = Conversation::new()
        .user("hi")
        .request("m", SamplingParams::new())
        .unwrap();
    let mut extra = Map::new();
    extra.insert("top_k".into(), json!(5));
    let body = encode_request(
        &request,
        &EncodeOptions {
            extra_body: extra.clone(),
            ..options(DIALECT)
        },
    )
    .unwrap();
    assert_eq!(
        (&body["safe_prompt"], &body["top_k"]),
        (&json!(true), &json!(5))
    );

    extra.insert("model".into(), json!("other"));
    let err = encode_request(
        &request,
        &EncodeOptions {
            extra_body: extra,
            ..options(DIALECT)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("extra_body.model"), "{err}");
}

fn completion(finish: &str) -> Value {
    json!({"model": "m", "choices": [{"index": 0, "finish_reason": finish,
        "message": {"role": "assistant", "content": "Paris [1]"}}],
        "x_usage": {"prompt_tokens": 11, "completion_tokens": 3},
        "citations": ["https://example.com/paris"]})
}

#[test]
fn a_dialects_own_finish_reason_is_its_stop_reason() {
    let response = decode_response_in(&answer(completion("model_length")), &DIALECT).unwrap();
    assert_eq!(response.stop_reason(), StopReason::MaxTokens);
    assert!(decode_response_in(&answer(completion("model_length")), &Dialect::OPENAI).is_err());
}

#[test]
fn the_rewrite_hook_reads_usage_where_the_dialect_puts_it() {
    let response = decode_response_in(&answer(completion("stop")), &DIALECT).unwrap();
    assert_eq!(
        (
            response.usage().input_tokens,
            response.usage().output_tokens
        ),
        (11, 3)
    );
    let plain = decode_response_in(&answer(completion("stop")), &Dialect::OPENAI).unwrap();
    assert_eq!(plain.usage().input_tokens, 0);
}

#[test]
fn kept_fields_are_a_native_block_that_is_never_sent_back() {
    let response = decode_response_in(&answer(completion("stop")), &DIALECT).unwrap();
    let content = response.blocks();
    let Some(Block::Native { provider, value }) = content.last() else {
        panic!("no native block: {content:?}");
    };
    assert_eq!(provider, "example");
    assert_eq!(value.value()["citations"][0], "https://example.com/paris");

    let messages = vec![
        Message::user("Capital of France?"),
        Message {
            role: Role::Assistant,
            content: content.to_vec(),
        },
        Message::user("And of Spain?"),
    ];
    let request = LlmRequest::new("m", messages, vec![], SamplingParams::new()).unwrap();
    let body = encode_request(&request, &options(DIALECT)).unwrap();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "Paris [1]"})
    );
}

#[test]
fn reasoning_content_is_a_thinking_block_whole_and_streamed() {
    let whole = json!({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "reasoning_content": "Think.", "content": "Done."}}]});
    let response = decode_response_in(&answer(whole), &Dialect::OPENAI).unwrap();
    assert!(matches!(&response.blocks()[0], Block::Thinking { text, .. } if text == "Think."));

    let mut chunks = Chunks::default().in_dialect(DIALECT);
    let mut events = Vec::new();
    for chunk in [
        json!({"model": "m", "choices": [{"index": 0, "delta": {"reasoning": "Th"}}]}),
        json!({"model": "m", "choices": [{"index": 0, "delta": {"reasoning": "ink."}}]}),
        json!({"model": "m", "choices": [{"index": 0, "delta": {"content": "Done."}}],
               "citations": ["https://example.com"]}),
        json!({"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "model_length"}],
               "x_usage": {"prompt_tokens": 4, "completion_tokens": 2}}),
    ] {
        events.extend(chunks.chunk(&chunk.to_string()).unwrap());
    }
    events.extend(chunks.ended().unwrap());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::ThinkingDelta { text, .. } if text == "Th"))
    );
    let Some(StreamEvent::Completed(response)) = events.last() else {
        panic!("not completed: {events:?}");
    };
    assert_eq!(response.stop_reason(), StopReason::MaxTokens);
    assert_eq!(response.usage().output_tokens, 2);
    assert!(matches!(&response.blocks()[0], Block::Thinking { text, .. } if text == "Think."));
    assert!(
        matches!(response.blocks().last(), Some(Block::Native { provider, .. }) if provider == "example")
    );
}

#[test]
fn a_preset_provider_takes_its_key_and_its_options() {
    const EXAMPLE: OpenAiProvider = OpenAiProvider::new(Preset {
        key: "example",
        base_url: Some("https://api.example.com"),
        dialect: DIALECT,
        ..Preset::COMPATIBLE
    });
    assert_eq!(EXAMPLE.key(), "example");
    assert_eq!(EXAMPLE.preset().dialect.provider, "example");
    assert!(!EXAMPLE.requires_credential());
    let model = ModelEntry::new("x", "example", "m");
    assert_eq!(
        EXAMPLE.base_url(&model).as_deref(),
        Some("https://api.example.com")
    );
    let read = OpenAiOptions::for_preset(&model, EXAMPLE.preset(), &[]).unwrap();
    assert_eq!(read.tool_choice, tollgate::provider::ToolChoice::Auto);

    let required = ModelEntry::new("x", "example", "m").with_option("tool_choice", "any");
    let read = OpenAiOptions::for_preset(&required, EXAMPLE.preset(), &[]).unwrap();
    assert_eq!(read.tool_choice, tollgate::provider::ToolChoice::Required);
}

#[test]
fn a_preset_without_an_address_or_a_responses_api_says_which_option() {
    let no_address = Preset {
        key: "example",
        paths: tollgate_openai::preset::Paths {
            responses: None,
            ..Preset::COMPATIBLE.paths
        },
        ..Preset::COMPATIBLE
    };
    let model = ModelEntry::new("x", "example", "m");
    let err = OpenAiOptions::for_preset(&model, &no_address, &[]).unwrap_err();
    assert!(err.to_string().contains("base_url"), "{err}");
    let model = model
        .with_option("base_url", "http://127.0.0.1:9")
        .with_option("api", "responses");
    let err = OpenAiOptions::for_preset(&model, &no_address, &[]).unwrap_err();
    assert!(err.to_string().contains("no Responses API"), "{err}");
}

#[test]
fn extra_body_must_be_a_table() {
    let model = ModelEntry::new("x", "openai-compatible", "m")
        .with_option("base_url", "http://127.0.0.1:9")
        .with_option("extra_body", "safe_prompt");
    let err = OpenAiOptions::from_model(&model).unwrap_err();
    assert!(err.to_string().contains("extra_body"), "{err}");
}

#[test]
fn a_reasoning_effort_the_dialect_does_not_take_is_refused_naming_those_it_takes() {
    use tollgate::{Reasoning, ReasoningEffort};
    const TAKES: Dialect = Dialect {
        reasoning_efforts: Some(&[ReasoningEffort::Low, ReasoningEffort::High]),
        ..DIALECT
    };
    let asking = |effort| {
        Conversation::new()
            .user("hi")
            .request(
                "m",
                SamplingParams::new()
                    .with_reasoning(Reasoning {
                        effort: Some(effort),
                        ..Reasoning::default()
                    })
                    .unwrap(),
            )
            .unwrap()
    };
    let body = encode_request(&asking(ReasoningEffort::High), &options(TAKES)).unwrap();
    assert_eq!(body["reasoning_effort"], "high");
    let err = encode_request(&asking(ReasoningEffort::Medium), &options(TAKES)).unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("low, high"), "{err}");
    assert!(encode_request(&asking(ReasoningEffort::Medium), &options(DIALECT)).is_ok());
}

#[test]
fn a_stream_error_is_read_as_the_rewrite_leaves_it() {
    /// Writes a provider's own `throttled` error chunk in OpenAI's words.
    fn top_level_error(chunk: &mut Value) {
        if chunk["object"] == "error" && chunk["type"] == "throttled" {
            *chunk = json!({"error": {"type": "rate_limit_error", "message": chunk["message"]}});
        }
    }
    let dialect = Dialect {
        rewrite: Some(top_level_error),
        ..DIALECT
    };
    let mut chunks = Chunks::default().in_dialect(dialect);
    let chunk = json!({"object": "error", "type": "throttled", "message": "slow down"});
    let err = chunks.chunk(&chunk.to_string()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(tollgate::ProviderError::RateLimited { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn a_document_by_its_bytes_is_refused_where_the_dialect_takes_no_file_parts() {
    let document = Block::Document {
        source: tollgate::DocumentSource::Base64 {
            media_type: "application/pdf".into(),
            data: "JVBERi0=".into(),
        },
        name: None,
        cache: None,
    };
    let messages = vec![Message {
        role: Role::User,
        content: vec![Block::text("Read this."), document],
    }];
    let request = LlmRequest::new("m", messages, vec![], SamplingParams::new()).unwrap();
    let no_files = Dialect {
        file_parts: false,
        ..DIALECT
    };
    let err = encode_request(&request, &options(no_files)).unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("messages[0].content[1]"), "{err}");
    let body = encode_request(&request, &options(DIALECT)).unwrap();
    assert_eq!(body["messages"][0]["content"][1]["type"], "file");
}
