//! The Gemini codec without I/O, case by case from the wire facts in
//! `shared/PROTOCOLS.md` §6: request nesting and every block, thought signatures,
//! finish reasons and prompt blocks, usage, stream chunks, `google.rpc.Status` errors,
//! embeddings and decision bodies.

use std::time::Duration;

use serde_json::{Value, json};
use tollgate::wire::ToolChoice;
use tollgate::{
    Block, Conversation, EmbeddingPurpose, Error, ImageSource, Json, LlmRequest, Message,
    ProviderError, ResponseShape, Role, SamplingParams, StopReason, StreamEvent, ToolDefinition,
};
use tollgate_gemini::codec::{
    self, EncodeOptions, MissingSignature, SKIP_SIGNATURE_VALIDATOR, SYNTHETIC_ID_PREFIX,
    StreamDecoder, ThinkingConfig,
};

fn tool() -> ToolDefinition {
    ToolDefinition {
        defer_loading: false,
        cache: None,
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema: Json::new(
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        ),
        strict: None,
        native: None,
    }
}

fn request(
    messages: Vec<Message>,
    tools: Vec<ToolDefinition>,
    sampling: SamplingParams,
) -> LlmRequest {
    LlmRequest::new("m", messages, tools, sampling).unwrap()
}

fn encode(request: &LlmRequest) -> Value {
    codec::encode_request(request, &EncodeOptions::default()).unwrap()
}

fn tool_use(id: &str) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: "get_weather".into(),
        input: Json::new(json!({"city": "Paris"})),
        cache: None,
    }
}

fn tool_result(id: &str, text: &str, is_error: bool) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: vec![Block::text(text)],
        is_error,
        cache: None,
    }
}

fn signature(s: &str) -> Block {
    Block::Thinking {
        text: String::new(),
        signature: Some(s.into()),
        origin: None,
        cache: None,
    }
}

#[test]
fn every_block_is_encoded_with_roles_user_and_model_only() {
    let messages = vec![
        Message::system("You are terse."),
        Message {
            role: Role::User,
            content: vec![
                Block::text("Weather in Paris?"),
                Block::Image {
                    source: ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBORw0K".into(),
                    },
                    cache: None,
                },
                Block::Image {
                    source: ImageSource::Url {
                        url: "gs://bucket/cat.JPG?x=1".into(),
                    },
                    cache: None,
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![Block::text("Let me look."), tool_use("c1")],
        },
        Message {
            role: Role::User,
            content: vec![tool_result("c1", "21 C", false)],
        },
    ];
    let body = encode(&request(messages, vec![tool()], SamplingParams::new()));
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": "You are terse."}]},
            "contents": [
                {"role": "user", "parts": [
                    {"text": "Weather in Paris?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}},
                    {"fileData": {"fileUri": "gs://bucket/cat.JPG?x=1", "mimeType": "image/jpeg"}},
                ]},
                {"role": "model", "parts": [
                    {"text": "Let me look."},
                    {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "c1", "name": "get_weather", "response": {"output": "21 C"}}},
                ]},
            ],
            "tools": [{"functionDeclarations": [{
                "name": "get_weather",
                "description": "Weather for a city",
                "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }]}],
        })
    );
}

#[test]
fn a_failed_tool_result_is_sent_as_an_error_response() {
    let messages = vec![
        Message::user("go"),
        Message {
            role: Role::Assistant,
            content: vec![tool_use("c1")],
        },
        Message {
            role: Role::User,
            content: vec![tool_result("c1", "no such city", true)],
        },
    ];
    let body = encode(&request(messages, vec![tool()], SamplingParams::new()));
    assert_eq!(
        body["contents"][2]["parts"][0]["functionResponse"]["response"],
        json!({"error": "no such city"})
    );
}

#[test]
fn a_tool_result_whose_call_is_not_in_the_conversation_fails_before_sending() {
    let messages = vec![Message {
        role: Role::User,
        content: vec![tool_result("nowhere", "x", false)],
    }];
    let err = codec::encode_request(
        &request(messages, vec![], SamplingParams::new()),
        &EncodeOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "messages[0].content[0]"),
        "{err}"
    );
}

#[test]
fn a_non_text_system_block_fails_before_sending() {
    let messages = vec![
        Message {
            role: Role::System,
            content: vec![Block::Image {
                source: ImageSource::Url {
                    url: "https://x/y.png".into(),
                },
                cache: None,
            }],
        },
        Message::user("hi"),
    ];
    let err = codec::encode_request(
        &request(messages, vec![], SamplingParams::new()),
        &EncodeOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidRequest { .. }), "{err}");
}

#[test]
fn sampling_the_output_limit_a_shape_and_thinking_go_in_generation_config() {
    let sampling = SamplingParams::new()
        .with_temperature(0.2)
        .unwrap()
        .with_top_p(0.9)
        .unwrap()
        .with_stop("END")
        .with_max_output_tokens(512)
        .unwrap()
        .with_response_shape(ResponseShape {
            name: "answer".into(),
            schema: Json::new(json!({"type": "object"})),
            strict: Some(true),
        });
    let options = EncodeOptions {
        max_output_tokens: Some(99),
        top_k: Some(40),
        thinking: ThinkingConfig {
            budget: Some(1024),
            level: None,
            include_thoughts: Some(true),
        },
        ..EncodeOptions::default()
    };
    let body = codec::encode_request(
        &request(vec![Message::user("hi")], vec![], sampling),
        &options,
    )
    .unwrap();
    assert_eq!(
        body["generationConfig"],
        json!({
            "maxOutputTokens": 512, "temperature": 0.2, "topP": 0.9, "topK": 40,
            "stopSequences": ["END"],
            "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"},
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true},
        })
    );
    // Without a request limit, the catalog's default is sent.
    let body = codec::encode_request(
        &request(vec![Message::user("hi")], vec![], SamplingParams::new()),
        &options,
    )
    .unwrap();
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 99);
}

#[test]
fn tool_choice_becomes_function_calling_config() {
    let table = [
        (ToolChoice::Auto, Value::Null),
        (
            ToolChoice::Required,
            json!({"functionCallingConfig": {"mode": "ANY"}}),
        ),
        (
            ToolChoice::None,
            json!({"functionCallingConfig": {"mode": "NONE"}}),
        ),
        (
            ToolChoice::Tool("get_weather".into()),
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}),
        ),
    ];
    for (choice, want) in table {
        let options = EncodeOptions {
            tool_choice: choice.clone(),
            ..EncodeOptions::default()
        };
        let body = codec::encode_request(
            &request(
                vec![Message::user("hi")],
                vec![tool()],
                SamplingParams::new(),
            ),
            &options,
        )
        .unwrap();
        assert_eq!(body["toolConfig"], want, "{choice:?}");
    }
}

#[test]
fn an_explicit_cache_is_named_and_forbids_a_system_prompt_or_tools_beside_it() {
    let options = EncodeOptions {
        cached_content: Some("cachedContents/abc123".into()),
        ..EncodeOptions::default()
    };
    let body = codec::encode_request(
        &request(vec![Message::user("hi")], vec![], SamplingParams::new()),
        &options,
    )
    .unwrap();
    assert_eq!(body["cachedContent"], "cachedContents/abc123");
    for (messages, tools) in [
        (vec![Message::system("s"), Message::user("hi")], vec![]),
        (vec![Message::user("hi")], vec![tool()]),
    ] {
        let err = codec::encode_request(&request(messages, tools, SamplingParams::new()), &options)
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidRequest { field, .. } if field == "options.cached_content"),
            "{err}"
        );
    }
}

/// An answer whose function call carries a signature, after a signed thought.
fn signed_answer() -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Thinking about weather.", "thought": true, "thoughtSignature": "U0lHLTE="},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "U0lHLTI="},
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 7},
        "modelVersion": "gemini-3-pro",
    })
}

#[test]
fn thought_signatures_are_carried_opaquely_into_the_next_request() {
    let answer = codec::decode_response(signed_answer().to_string().as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let id = format!("{SYNTHETIC_ID_PREFIX}0");
    assert_eq!(
        answer.blocks(),
        &[
            Block::Thinking {
                text: "Thinking about weather.".into(),
                signature: Some("U0lHLTE=".into()),
                origin: None,
                cache: None
            },
            signature("U0lHLTI="),
            Block::ToolUse {
                id: id.clone(),
                name: "get_weather".into(),
                input: Json::new(json!({"city": "Paris"})),
                cache: None
            },
        ]
    );
    let mut conversation = Conversation::new().user("Weather in Paris?");
    conversation.push_response(&answer);
    conversation.messages.push(Message {
        role: Role::User,
        content: vec![tool_result(&id, "21 C", false)],
    });
    let next = conversation.request("m", SamplingParams::new()).unwrap();
    let body = encode(&next);
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"text": "Thinking about weather.", "thought": true, "thoughtSignature": "U0lHLTE="},
            // The made-up id is not sent: Gemini matches an id-less call by name and order.
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "U0lHLTI="},
        ]})
    );
    assert_eq!(
        body["contents"][2]["parts"][0],
        json!({"functionResponse": {"name": "get_weather", "response": {"output": "21 C"}}})
    );
}

#[test]
fn a_signature_on_a_trailing_empty_text_part_goes_back_on_an_empty_part() {
    let wire = json!({"candidates": [{"content": {"parts": [
        {"text": "Hello."}, {"text": "", "thoughtSignature": "U0lHLTM="}
    ]}, "finishReason": "STOP"}]});
    let answer = codec::decode_response(wire.to_string().as_bytes()).unwrap();
    assert_eq!(
        answer.blocks(),
        &[Block::text("Hello."), signature("U0lHLTM=")]
    );
    let body = encode(&request(
        vec![
            Message::user("hi"),
            Message {
                role: Role::Assistant,
                content: answer.blocks().to_vec(),
            },
        ],
        vec![],
        SamplingParams::new(),
    ));
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "Hello."}, {"text": "", "thoughtSignature": "U0lHLTM="}])
    );
}

#[test]
fn an_unsigned_call_from_another_provider_gets_the_skip_sentinel_only_when_asked() {
    let messages = vec![
        Message::user("go"),
        Message {
            role: Role::Assistant,
            content: vec![tool_use("call_openai_1")],
        },
    ];
    let req = request(messages, vec![tool()], SamplingParams::new());
    let plain = encode(&req);
    assert_eq!(
        plain["contents"][1]["parts"][0],
        json!({"functionCall": {"id": "call_openai_1", "name": "get_weather", "args": {"city": "Paris"}}})
    );
    let options = EncodeOptions {
        missing_signature: MissingSignature::SkipValidator,
        ..EncodeOptions::default()
    };
    let skipped = codec::encode_request(&req, &options).unwrap();
    assert_eq!(
        skipped["contents"][1]["parts"][0]["thoughtSignature"],
        SKIP_SIGNATURE_VALIDATOR
    );
}

fn answer_with(reason: &str, parts: Value) -> Vec<u8> {
    json!({"candidates": [{"content": {"role": "model", "parts": parts},
        "finishReason": reason, "finishMessage": "why"}]})
    .to_string()
    .into_bytes()
}

#[test]
fn tool_use_is_detected_from_function_call_parts_not_the_finish_reason() {
    let call = json!([{"functionCall": {"id": "x1", "name": "get_weather", "args": {}}}]);
    let answer = codec::decode_response(&answer_with("STOP", call)).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(matches!(&answer.blocks()[0], Block::ToolUse { id, .. } if id == "x1"));
    let text = json!([{"text": "Done."}]);
    let answer = codec::decode_response(&answer_with("STOP", text.clone())).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let answer = codec::decode_response(&answer_with("MAX_TOKENS", text)).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::MaxTokens);
}

#[test]
fn every_filter_finish_reason_is_a_refused_answer_with_its_category() {
    for reason in codec::REFUSAL_REASONS {
        let answer = codec::decode_response(&answer_with(reason, json!([]))).unwrap();
        assert_eq!(answer.stop_reason(), StopReason::ContentFilter, "{reason}");
        let lower = reason.to_ascii_lowercase();
        assert_eq!(answer.refusal_category(), Some(lower.as_str()));
        assert_eq!(answer.refusal_explanation(), "why");
    }
}

#[test]
fn malformed_function_calls_are_invalid_output_and_other_reasons_are_rejections() {
    for reason in codec::INVALID_OUTPUT_REASONS {
        let err = codec::decode_response(&answer_with(reason, json!([]))).unwrap_err();
        assert!(
            matches!(&err, Error::ShapeInvalid { errors } if errors[0].contains(reason)),
            "{err}"
        );
    }
    for reason in [
        "LANGUAGE",
        "OTHER",
        "NO_IMAGE",
        "FINISH_REASON_UNSPECIFIED",
        "NEW_REASON",
    ] {
        let err = codec::decode_response(&answer_with(reason, json!([]))).unwrap_err();
        assert!(
            matches!(&err, Error::ProviderRequest(e) if e.status == 200),
            "{reason}: {err}"
        );
        assert!(!err.is_retryable());
    }
}

#[test]
fn a_blocked_prompt_is_a_refused_answer_with_its_block_reason() {
    let wire = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                      "usageMetadata": {"promptTokenCount": 8}});
    let answer = codec::decode_response(wire.to_string().as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ContentFilter);
    assert_eq!(answer.refusal_category(), Some("prohibited_content"));
    assert_eq!(answer.usage().input_tokens, 8);
}

#[test]
fn usage_takes_cached_tokens_out_of_the_prompt_and_adds_thoughts_to_output() {
    let wire = json!({"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 5000, "cachedContentTokenCount": 4096,
            "toolUsePromptTokenCount": 10, "candidatesTokenCount": 200, "thoughtsTokenCount": 50,
            "totalTokenCount": 5260}});
    let usage = codec::decode_response(wire.to_string().as_bytes())
        .unwrap()
        .usage();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.output_tokens
        ),
        (914, 4096, 0, 250)
    );
}

fn stream(chunks: &[Value]) -> (Vec<StreamEvent>, Option<Error>) {
    let mut decoder = StreamDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        match decoder.event(&chunk.to_string()) {
            Ok(e) => events.extend(e),
            Err(e) => return (events, Some(e)),
        }
    }
    match decoder.end() {
        Ok(e) => events.extend(e),
        Err(e) => return (events, Some(e)),
    }
    (events, None)
}

fn completed(events: &[StreamEvent]) -> &tollgate::LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(r)) => r,
        other => panic!("not completed: {other:?}"),
    }
}

#[test]
fn stream_usage_comes_from_the_last_chunk_and_is_never_summed() {
    let (events, error) = stream(&[
        json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}],
               "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1}}),
        json!({"candidates": [{"content": {"parts": [{"text": "lo"}]}}],
               "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2}}),
        json!({"candidates": [{"content": {"parts": [{"text": "."}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "thoughtsTokenCount": 4},
               "modelVersion": "gemini-2.5-flash"}),
    ]);
    assert!(error.is_none(), "{error:?}");
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { index: 0, text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hel", "lo", "."]);
    let answer = completed(&events);
    assert_eq!(answer.text(), "Hello.");
    assert_eq!(
        (answer.usage().input_tokens, answer.usage().output_tokens),
        (10, 7)
    );
    assert_eq!(answer.model(), "gemini-2.5-flash");
    assert!(events.contains(&StreamEvent::Stop(StopReason::EndTurn)));
}

#[test]
fn a_streamed_function_call_arrives_whole_with_its_signature_and_thoughts_stream_as_thinking() {
    let (events, error) = stream(&[
        json!({"candidates": [{"content": {"parts": [{"text": "Let me ", "thought": true}]}}]}),
        json!({"candidates": [{"content": {"parts": [{"text": "check.", "thought": true}]}}]}),
        json!({"candidates": [{"content": {"parts": [
            {"functionCall": {"id": "f1", "name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "U0lH"}
        ]}, "finishReason": "STOP"}]}),
    ]);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[..3],
        [
            StreamEvent::ThinkingDelta {
                index: 0,
                text: "Let me ".into()
            },
            StreamEvent::ThinkingDelta {
                index: 0,
                text: "check.".into()
            },
            StreamEvent::ToolUseDelta {
                index: 2,
                id: Some("f1".into()),
                name: Some("get_weather".into()),
                input_json: "{\"city\":\"Paris\"}".into()
            },
        ]
    );
    let answer = completed(&events);
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert_eq!(answer.blocks()[1], signature("U0lH"));
}

#[test]
fn an_error_chunk_mid_stream_is_its_typed_error() {
    let (events, error) = stream(&[
        json!({"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}),
        json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
    ]);
    assert_eq!(events.len(), 1);
    assert!(
        matches!(
            error,
            Some(Error::Provider(ProviderError::Overloaded {
                status: 503,
                ..
            }))
        ),
        "{error:?}"
    );
    let (_, error) = stream(&[
        json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": codec::RETRY_INFO, "retryDelay": "2s"}]}}),
    ]);
    assert!(
        matches!(error, Some(Error::Provider(ProviderError::RateLimited { retry_after: Some(d) })) if d == Duration::from_secs(2)),
        "{error:?}"
    );
}

#[test]
fn a_stream_without_a_finish_reason_was_cut_and_a_filtered_one_is_a_refused_answer() {
    let (_, error) = stream(&[json!({"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]})]);
    assert!(
        matches!(
            error,
            Some(Error::Provider(ProviderError::Connection {
                cause: tollgate::ConnectionCause::ClosedEarly,
                ..
            }))
        ),
        "{error:?}"
    );
    for (chunk, category) in [
        (
            json!({"candidates": [{"finishReason": "SAFETY"}]}),
            "safety",
        ),
        (
            json!({"promptFeedback": {"blockReason": "BLOCKLIST"}}),
            "blocklist",
        ),
    ] {
        let (events, error) = stream(&[chunk]);
        assert!(error.is_none(), "{error:?}");
        let Some(StreamEvent::Completed(answer)) = events.last() else {
            panic!("no completed answer: {events:?}");
        };
        assert_eq!(answer.stop_reason(), StopReason::ContentFilter);
        assert_eq!(answer.refusal_category(), Some(category));
    }
}

fn status(code: u16, name: &str, details: Value) -> Vec<u8> {
    json!({"error": {"code": code, "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": name, "details": details}})
    .to_string()
    .into_bytes()
}

fn quota_failure(quota_id: &str) -> Value {
    json!({"@type": codec::QUOTA_FAILURE, "violations": [{
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": quota_id, "quotaDimensions": {"location": "global", "model": "gemini-2.5-pro"}, "quotaValue": "50"}]})
}

#[test]
fn a_429_with_retry_info_is_rate_limited_for_that_long_whatever_the_message_says() {
    let body = status(
        429,
        "RESOURCE_EXHAUSTED",
        json!([
            quota_failure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
            {"@type": codec::RETRY_INFO, "retryDelay": "19s"},
        ]),
    );
    let err = codec::read_error(429, &body).verdict();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(19)),
        "{err:?}"
    );
}

#[test]
fn a_429_whose_quota_is_per_day_is_quota_exhausted() {
    let body = status(
        429,
        "RESOURCE_EXHAUSTED",
        json!([
            quota_failure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
            quota_failure("GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
            {"@type": codec::RETRY_INFO, "retryDelay": "52758s"},
        ]),
    );
    let err = codec::read_error(429, &body).verdict();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err:?}");
}

#[test]
fn request_errors_are_read_by_status_and_error_info_and_never_retried() {
    let key = status(
        400,
        "INVALID_ARGUMENT",
        json!([{"@type": codec::ERROR_INFO,
        "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
    );
    let wire = codec::read_error(400, &key);
    assert_eq!(
        (wire.kind.as_str(), wire.code.as_str()),
        ("INVALID_ARGUMENT", "API_KEY_INVALID")
    );
    for (code, name) in [
        (400, "INVALID_ARGUMENT"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
        (400, "FAILED_PRECONDITION"),
    ] {
        let err = codec::read_error(code, &status(code, name, json!([]))).verdict();
        assert!(
            matches!(&err, Error::ProviderRequest(e) if e.status == code),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn server_errors_are_retryable_and_unavailable_is_overloaded() {
    for (code, name) in [(500, "INTERNAL"), (504, "DEADLINE_EXCEEDED")] {
        let err = codec::read_error(code, &status(code, name, json!([]))).verdict();
        assert!(
            matches!(err, Error::Provider(ProviderError::Server { status, .. }) if status == code),
            "{err:?}"
        );
    }
    let err = codec::read_error(503, &status(503, "UNAVAILABLE", json!([]))).verdict();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 503, .. })
        ),
        "{err:?}"
    );
}

#[test]
fn a_one_element_error_array_and_a_non_json_body_are_read() {
    let body = format!(
        "[{}]",
        String::from_utf8(status(404, "NOT_FOUND", json!([]))).unwrap()
    );
    let wire = codec::read_error(404, body.as_bytes());
    assert_eq!(wire.kind, "NOT_FOUND");
    let wire = codec::read_error(502, b"<html>bad gateway</html>");
    assert_eq!(
        (wire.status, wire.message.as_str()),
        (502, "<html>bad gateway</html>")
    );
}

#[test]
fn a_vertex_429_without_quota_failure_is_shared_capacity_running_short() {
    let body = status(429, "RESOURCE_EXHAUSTED", json!([]));
    let err = codec::read_vertex_error(429, &body).verdict();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 429, .. })
        ),
        "{err:?}"
    );
    let body = status(
        429,
        "RESOURCE_EXHAUSTED",
        json!([quota_failure("PerMinute")]),
    );
    let err = codec::read_vertex_error(429, &body).verdict();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
        "{err:?}"
    );
}

#[test]
fn protobuf_durations_are_read_with_fractions() {
    let table = [
        ("19s", Some(Duration::from_secs(19))),
        ("3.700s", Some(Duration::from_millis(3700))),
        ("0.5s", Some(Duration::from_millis(500))),
        (".25s", Some(Duration::from_millis(250))),
        ("45", None),
        ("s", None),
        ("1.2.3s", None),
        ("-1s", None),
    ];
    for (text, want) in table {
        assert_eq!(codec::parse_duration(text), want, "{text}");
    }
}

#[test]
fn batch_embeddings_name_the_model_the_task_and_the_width() {
    let texts = vec!["a".to_owned(), "b".to_owned()];
    let body = codec::encode_batch_embeddings(
        "gemini-embedding-001",
        &texts,
        EmbeddingPurpose::Query,
        Some(768),
    );
    assert_eq!(
        body["requests"][1],
        json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "b"}]},
               "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 768})
    );
    let answer =
        json!({"embeddings": [{"values": [1.0, 0.0]}, {"values": [0.0, 1.0]}]}).to_string();
    assert_eq!(
        codec::decode_batch_embeddings(answer.as_bytes(), 2).unwrap(),
        vec![vec![1.0, 0.0], vec![0.0, 1.0]]
    );
    assert!(codec::decode_batch_embeddings(answer.as_bytes(), 3).is_err());
}

#[test]
fn vertex_predict_and_embed_content_bodies() {
    let texts = vec!["doc".to_owned()];
    assert_eq!(
        codec::encode_vertex_predict(&texts, EmbeddingPurpose::Document, Some(256)),
        json!({"instances": [{"content": "doc", "task_type": "RETRIEVAL_DOCUMENT"}],
               "parameters": {"outputDimensionality": 256}})
    );
    let answer = json!({"predictions": [{"embeddings": {"values": [0.5, 0.5],
        "statistics": {"token_count": 7.0, "truncated": false}}}]})
    .to_string();
    assert_eq!(
        codec::decode_vertex_predict(answer.as_bytes(), 1).unwrap(),
        (vec![vec![0.5, 0.5]], 7)
    );
    assert_eq!(
        codec::encode_vertex_embed_content("q", EmbeddingPurpose::Query, None),
        json!({"content": {"role": "user", "parts": [{"text": "q"}]}, "taskType": "RETRIEVAL_QUERY"})
    );
    let answer = json!({"embedding": {"values": [1.0]}, "usageMetadata": {"promptTokenCount": 3}})
        .to_string();
    assert_eq!(
        codec::decode_embed_content(answer.as_bytes()).unwrap(),
        (vec![1.0], 3)
    );
}

#[test]
fn a_decision_is_constrained_to_the_labels_and_read_from_the_first_steps_candidates() {
    let labels = vec![
        ("A".to_owned(), "red".to_owned()),
        ("B".to_owned(), "blue".to_owned()),
    ];
    let body = codec::encode_decision("state", "Which?", &labels, None);
    assert_eq!(
        body["generationConfig"]["responseSchema"],
        json!({"type": "STRING", "enum": ["A", "B"]})
    );
    assert_eq!(body["generationConfig"]["responseMimeType"], "text/x.enum");
    assert_eq!(body["generationConfig"]["responseLogprobs"], true);
    assert_eq!(body["generationConfig"]["logprobs"], codec::TOP_LOGPROBS);
    let answer =
        json!({"candidates": [{"content": {"parts": [{"text": "A"}]}, "finishReason": "STOP",
        "logprobsResult": {
            "topCandidates": [{"candidates": [
                {"token": "A", "logProbability": (0.75f64).ln()},
                {"token": " b", "logProbability": (0.25f64).ln()},
                {"token": "C", "logProbability": -0.1}]}],
            "chosenCandidates": [{"token": "A", "logProbability": (0.75f64).ln()}]}}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 1}})
        .to_string();
    let names = vec!["A".to_owned(), "B".to_owned()];
    let (weights, usage) = codec::decode_decision(answer.as_bytes(), &names).unwrap();
    assert!((weights["A"] - 0.75).abs() < 1e-9 && (weights["B"] - 0.25).abs() < 1e-9);
    assert_eq!(usage.input_tokens, 30);
    let none = json!({"candidates": [{"content": {"parts": [{"text": "A"}]}}]}).to_string();
    assert!(codec::decode_decision(none.as_bytes(), &names).is_err());
}
