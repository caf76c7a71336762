//! The codec without I/O: request encoding, response and stream decoding, error
//! classification, each against fixture bodies shaped as PROTOCOLS.md §1 describes.

use std::time::Duration;
use tollgate::wire::WireError;

use serde_json::{Value, json};
use tollgate::{
    Block, CacheMark, Conversation, Error, ImageSource, Json, LlmRequest, Message, ProviderError,
    ResponseShape, Role, SamplingParams, StopReason, StreamEvent, ToolDefinition, Usage,
};
use tollgate_anthropic::codec::{
    EncodeOptions, Host, MAX_CACHE_MARKS, StreamDecoder, ToolChoice, decode_response,
    decode_response_from, encode_request, read_error, read_stream_error,
};

fn options() -> EncodeOptions {
    EncodeOptions {
        model: Some("claude-test".into()),
        max_tokens: 1000,
        ..EncodeOptions::default()
    }
}

fn request(messages: Vec<Message>) -> LlmRequest {
    LlmRequest::new("m", messages, vec![], SamplingParams::new()).unwrap()
}

fn response(content: Value, stop: &str, usage: Value) -> Vec<u8> {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage,
    })
    .to_string()
    .into_bytes()
}

fn plain_usage() -> Value {
    json!({"input_tokens": 10, "output_tokens": 5})
}

// ---- request encoding ----

#[test]
fn system_messages_go_to_the_system_field_and_sampling_is_encoded() {
    let sampling = SamplingParams::new()
        .with_temperature(0.5)
        .unwrap()
        .with_top_p(0.9)
        .unwrap()
        .with_stop("END")
        .with_max_output_tokens(321)
        .unwrap();
    let request = Conversation::new()
        .with_system("Be brief.")
        .user("Hi")
        .request("m", sampling)
        .unwrap();
    let body = encode_request(
        &request,
        &EncodeOptions {
            top_k: Some(40),
            stream: true,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 321,
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "temperature": 0.5,
            "top_p": 0.9,
            "top_k": 40,
            "stop_sequences": ["END"],
            "stream": true,
        })
    );
}

#[test]
fn max_tokens_falls_back_to_the_options_when_the_request_sets_none() {
    let body = encode_request(&request(vec![Message::user("x")]), &options()).unwrap();
    assert_eq!(body["max_tokens"], 1000);
    assert!(body.get("stream").is_none());
}

#[test]
fn a_bedrock_style_body_leaves_the_model_out() {
    let body = encode_request(
        &request(vec![Message::user("x")]),
        &EncodeOptions {
            model: None,
            ..options()
        },
    )
    .unwrap();
    assert!(body.get("model").is_none());
}

#[test]
fn a_vertex_body_leaves_the_model_out_and_keeps_stream() {
    let body = encode_request(
        &request(vec![Message::user("x")]),
        &EncodeOptions {
            host: Host::Vertex,
            stream: true,
            ..options()
        },
    )
    .unwrap();
    assert!(body.get("model").is_none(), "{body}");
    assert_eq!(body["stream"], true, "Vertex takes `stream` in the body");
}

#[test]
fn a_setting_vertex_cannot_take_is_refused_naming_anthropic_vertex() {
    let sampling = SamplingParams::new().with_seed(7);
    let request = Conversation::new()
        .user("x")
        .request("m", sampling)
        .unwrap();
    let err = encode_request(
        &request,
        &EncodeOptions {
            host: Host::Vertex,
            ..options()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("anthropic-vertex") && err.contains("claude-test"),
        "{err}"
    );
}

#[test]
fn thinking_from_vertex_is_signed_by_anthropic_vertex_and_goes_back_to_claude() {
    let content = json!([{"type": "thinking", "thinking": "Hmm.", "signature": "sig-v"},
                         {"type": "text", "text": "ok"}]);
    let answer =
        decode_response_from(&response(content, "end_turn", plain_usage()), Host::Vertex).unwrap();
    assert!(
        matches!(&answer.blocks()[0], Block::Thinking { origin: Some(o), .. } if o == "anthropic-vertex"),
        "{:?}",
        answer.blocks()
    );
    let mut conversation = Conversation::new().user("q");
    conversation.push_response(&answer);
    let next = conversation
        .user("more")
        .request("m", SamplingParams::new())
        .unwrap();
    // Anthropic documents signatures as valid on every platform: direct takes it back.
    let body = encode_request(&next, &options()).unwrap();
    assert_eq!(body["messages"][1]["content"][0]["signature"], "sig-v");
}

#[test]
fn tools_and_tool_choice_are_encoded() {
    let tool = ToolDefinition {
        defer_loading: false,
        cache: None,
        name: "lookup".into(),
        description: "Looks up".into(),
        input_schema: Json::new(json!({"type": "object", "properties": {}})),
        strict: None,
        native: None,
    };
    let request = LlmRequest::new(
        "m",
        vec![Message::user("x")],
        vec![tool],
        SamplingParams::new(),
    )
    .unwrap();
    for (choice, wire) in [
        (ToolChoice::Auto, None),
        (ToolChoice::Required, Some(json!({"type": "any"}))),
        (ToolChoice::None, Some(json!({"type": "none"}))),
        (
            ToolChoice::Tool("lookup".into()),
            Some(json!({"type": "tool", "name": "lookup"})),
        ),
    ] {
        let body = encode_request(
            &request,
            &EncodeOptions {
                tool_choice: choice,
                ..options()
            },
        )
        .unwrap();
        assert_eq!(
            body["tools"],
            json!([{"name": "lookup", "description": "Looks up",
                    "input_schema": {"type": "object", "properties": {}}}])
        );
        assert_eq!(body.get("tool_choice").cloned(), wire);
    }
    assert_eq!(
        ToolChoice::parse("tool:lookup", "any"),
        Some(ToolChoice::Tool("lookup".into()))
    );
    assert_eq!(ToolChoice::parse("tool:", "any"), None);
}

#[test]
fn a_response_shape_becomes_output_config_json_schema() {
    let schema = json!({"type": "object", "required": ["a"]});
    let sampling = SamplingParams::new().with_response_shape(ResponseShape {
        name: "answer".into(),
        schema: Json::new(schema.clone()),
        strict: Some(true),
    });
    let request = LlmRequest::new("m", vec![Message::user("x")], vec![], sampling).unwrap();
    let body = encode_request(&request, &options()).unwrap();
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema}})
    );
}

#[test]
fn a_temperature_above_one_is_rejected_before_sending() {
    let sampling = SamplingParams::new().with_temperature(1.5).unwrap();
    let request = LlmRequest::new("m", vec![Message::user("x")], vec![], sampling).unwrap();
    let err = encode_request(&request, &options()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "sampling_params.temperature"),
        "{err}"
    );
}

#[test]
fn cache_marks_become_cache_control_with_the_one_hour_ttl_where_chosen() {
    let messages = vec![
        Message {
            role: Role::System,
            content: vec![Block::text("sys").with_cache(CacheMark::OneHour)],
        },
        Message {
            role: Role::User,
            content: vec![Block::text("doc").with_cache(CacheMark::FiveMinutes)],
        },
    ];
    let body = encode_request(&request(messages), &options()).unwrap();
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn a_tools_cache_mark_becomes_its_cache_control() {
    let tools = vec![
        ToolDefinition::new("a", "first", Json::new(json!({"type": "object"}))),
        ToolDefinition::new("b", "second", Json::new(json!({"type": "object"})))
            .with_cache(CacheMark::OneHour),
    ];
    let request =
        LlmRequest::new("m", vec![Message::user("x")], tools, SamplingParams::new()).unwrap();
    let body = encode_request(&request, &options()).unwrap();
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
}

#[test]
fn five_cache_marks_are_a_typed_error_naming_the_fifth() {
    let marked = |t: &str| Block::text(t).with_cache(CacheMark::FiveMinutes);
    let messages = vec![
        Message {
            role: Role::System,
            content: vec![marked("a")],
        },
        Message {
            role: Role::User,
            content: vec![marked("b"), marked("c")],
        },
        Message {
            role: Role::Assistant,
            content: vec![marked("d")],
        },
        Message {
            role: Role::User,
            content: vec![marked("e")],
        },
    ];
    let err = encode_request(&request(messages.clone()), &options()).unwrap_err();
    match err {
        Error::InvalidRequest { field, reason } => {
            assert_eq!(field, "messages[3].content[0].cache");
            assert!(reason.contains(&MAX_CACHE_MARKS.to_string()), "{reason}");
        }
        other => panic!("expected InvalidRequest, got {other}"),
    }
    // Four are fine.
    let four = messages[..3].to_vec();
    assert!(encode_request(&request(four), &options()).is_ok());
}

#[test]
fn a_cache_mark_on_a_thinking_block_is_rejected() {
    let thinking = Block::Thinking {
        text: "hmm".into(),
        signature: Some("sig".into()),
        origin: None,
        cache: Some(CacheMark::FiveMinutes),
    };
    let messages = vec![
        Message::user("q"),
        Message {
            role: Role::Assistant,
            content: vec![thinking],
        },
        Message::user("go on"),
    ];
    let err = encode_request(&request(messages), &options()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "messages[1].content[0].cache"),
        "{err}"
    );
}

#[test]
fn every_block_type_round_trips_through_the_wire_format() {
    // An assistant answer with text, thinking and tool use, decoded from the wire...
    let wire_answer = json!([
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig-1"},
        {"type": "text", "text": "Looking it up."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "rust"}},
    ]);
    let answer =
        decode_response(&response(wire_answer.clone(), "tool_use", plain_usage())).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    // ...sent back in the next turn with a tool result and images...
    let mut conversation = Conversation::new().user("find rust");
    conversation.push_response(&answer);
    conversation.messages.push(Message {
        role: Role::User,
        content: vec![
            Block::ToolResult {
                tool_use_id: "toolu_1".into(),
                content: vec![
                    Block::text("found"),
                    Block::Image {
                        source: ImageSource::Base64 {
                            media_type: "image/png".into(),
                            data: "iVBORw0KGgo=".into(),
                        },
                        cache: None,
                    },
                ],
                is_error: true,
                cache: None,
            },
            Block::Image {
                source: ImageSource::Url {
                    url: "https://example.invalid/cat.jpg".into(),
                },
                cache: None,
            },
        ],
    });
    let body = encode_request(
        &conversation.request("m", SamplingParams::new()).unwrap(),
        &options(),
    )
    .unwrap();
    // ...is encoded exactly as it came.
    assert_eq!(body["messages"][1]["role"], "assistant");
    assert_eq!(body["messages"][1]["content"], wire_answer);
    assert_eq!(
        body["messages"][2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true, "content": [
                {"type": "text", "text": "found"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ]},
            {"type": "image", "source": {"type": "url", "url": "https://example.invalid/cat.jpg"}},
        ])
    );
}

// ---- response decoding ----

#[test]
fn every_stop_reason_is_mapped() {
    for (wire, neutral) in [
        ("end_turn", StopReason::EndTurn),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("tool_use", StopReason::ToolUse),
        ("pause_turn", StopReason::EndTurn),
        (
            "model_context_window_exceeded",
            StopReason::ContextWindowExceeded,
        ),
        ("refusal", StopReason::Refusal),
    ] {
        let body = response(json!([{"type": "text", "text": "x"}]), wire, plain_usage());
        assert_eq!(
            decode_response(&body).unwrap().stop_reason(),
            neutral,
            "{wire}"
        );
    }
}

#[test]
fn an_unknown_or_missing_stop_reason_is_a_decode_failure() {
    let body = response(json!([]), "sideways", plain_usage());
    // Retryable, with the body's first bytes kept.
    assert!(matches!(
        decode_response(&body),
        Err(Error::Provider(tollgate::ProviderError::Malformed { raw, raw_len, .. }))
            if raw_len == body.len() && raw.contains("sideways")
    ));
    let mut missing: Value = serde_json::from_slice(&body).unwrap();
    missing["stop_reason"] = Value::Null;
    assert!(decode_response(missing.to_string().as_bytes()).is_err());
}

#[test]
fn a_refusal_with_stop_details_is_a_refused_answer_with_its_category() {
    let mut body: Value =
        serde_json::from_slice(&response(json!([]), "refusal", plain_usage())).unwrap();
    body["stop_details"] =
        json!({"type": "refusal", "category": "cyber", "explanation": "Not that."});
    let answer = decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::Refusal);
    assert_eq!(
        answer.refusal(),
        Some(&tollgate::Refusal::new("cyber").with_explanation("Not that."))
    );
    body["stop_details"] = json!({"type": "refusal", "category": null, "explanation": null});
    let answer = decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(answer.refusal_category(), Some("unspecified"));
}

#[test]
fn usage_without_cache_fields_is_all_full_price_input() {
    let body = response(json!([]), "end_turn", plain_usage());
    assert_eq!(
        decode_response(&body).unwrap().usage(),
        Usage::from_cache_exclusive(10, 0, 0, 0, 5)
    );
}

#[test]
fn usage_cache_creation_and_read_are_counted_apart_from_input() {
    let usage = json!({"input_tokens": 20, "output_tokens": 7,
                       "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000});
    let decoded = decode_response(&response(json!([]), "end_turn", usage))
        .unwrap()
        .usage();
    assert_eq!(decoded, Usage::from_cache_exclusive(20, 4000, 300, 0, 7));
    assert_eq!(decoded.total_input_tokens(), 4320);
}

#[test]
fn usage_cache_writes_split_by_lifetime_keep_five_minutes_and_one_hour_apart() {
    let usage = json!({"input_tokens": 3, "output_tokens": 1,
                       "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 0,
                       "cache_creation": {"ephemeral_5m_input_tokens": 500, "ephemeral_1h_input_tokens": 1000},
                       "output_tokens_details": {"thinking_tokens": 0}, "service_tier": "standard"});
    let decoded = decode_response(&response(json!([]), "end_turn", usage))
        .unwrap()
        .usage();
    assert_eq!(decoded, Usage::from_cache_exclusive(3, 0, 500, 1000, 1));
}

#[test]
fn redacted_thinking_and_server_tool_blocks_are_kept_for_the_history() {
    let content = json!([
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "kept"},
        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
        {"type": "container_upload", "file_id": "f"},
    ]);
    let decoded = decode_response(&response(content, "end_turn", plain_usage())).unwrap();
    assert_eq!(
        decoded.blocks().len(),
        3,
        "an unknown block type is still left out"
    );
    assert_eq!(
        decoded.blocks()[0],
        Block::RedactedThinking {
            data: "opaque".into(),
            origin: Some("anthropic".into())
        }
    );
    assert!(
        matches!(&decoded.blocks()[2], Block::Native { provider, value } if provider == "anthropic" && value.value()["id"] == "s")
    );
}

// ---- errors ----

fn error_body(kind: &str, message: &str) -> Vec<u8> {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"})
        .to_string()
        .into_bytes()
}

#[test]
fn client_error_statuses_are_rejections_with_their_status() {
    for (status, kind) in [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (409, "conflict_error"),
        (413, "request_too_large"),
    ] {
        match classify_error(status, &error_body(kind, "no"), None) {
            Error::ProviderRequest(e) => {
                assert_eq!(e.status, status);
                assert!(e.message.contains(kind), "{}", e.message);
            }
            other => panic!("{status}: expected a rejection, got {other}"),
        }
    }
}

#[test]
fn a_413_from_the_proxy_in_front_with_an_html_body_is_still_a_413_rejection() {
    let err = classify_error(413, b"<html>Request Entity Too Large</html>", None);
    assert!(matches!(err, Error::ProviderRequest(e) if e.status == 413));
}

#[test]
fn a_429_is_rate_limited_with_its_retry_after() {
    let wait = Some(Duration::from_secs(7));
    assert_eq!(
        classify_error(429, &error_body("rate_limit_error", "slow"), wait).to_string(),
        Error::from(ProviderError::RateLimited { retry_after: wait }).to_string()
    );
    assert!(matches!(
        classify_error(429, &error_body("rate_limit_error", "slow"), wait),
        Error::Provider(ProviderError::RateLimited { retry_after }) if retry_after == wait
    ));
}

#[test]
fn a_429_enforced_spend_limit_is_quota_exhausted_not_retried() {
    let body = json!({"type": "error", "error": {"type": "rate_limit_error", "message": "cap",
                      "details": {"error_code": "enforced_spend_limit_reached"}}});
    let err = classify_error(429, body.to_string().as_bytes(), None);
    assert!(
        // The codec names no provider: the pipeline writes the catalog's key in.
        matches!(err, Error::QuotaExhausted { ref provider, .. } if provider.is_empty())
    );
    assert!(!err.is_retryable());
}

#[test]
fn a_402_billing_error_is_quota_exhausted() {
    let err = classify_error(402, &error_body("billing_error", "pay"), None);
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
}

#[test]
fn a_500_is_a_server_error_and_a_504_too() {
    assert!(matches!(
        classify_error(500, &error_body("api_error", "oops"), None),
        Error::Provider(ProviderError::Server { status: 500, .. })
    ));
    assert!(matches!(
        classify_error(504, &error_body("timeout_error", "slow"), None),
        Error::Provider(ProviderError::Server { status: 504, .. })
    ));
}

#[test]
fn a_529_is_overloaded_with_its_retry_after() {
    let wait = Some(Duration::from_millis(1500));
    assert!(matches!(
        classify_error(529, &error_body("overloaded_error", "busy"), wait),
        Error::Provider(ProviderError::Overloaded { retry_after, .. }) if retry_after == wait
    ));
}

#[test]
fn stream_error_events_are_classified_by_their_type() {
    let data = |kind: &str| String::from_utf8(error_body(kind, "x")).unwrap();
    assert!(matches!(
        classify_stream_error(&data("overloaded_error")),
        Error::Provider(ProviderError::Overloaded {
            retry_after: None,
            ..
        })
    ));
    assert!(matches!(
        classify_stream_error(&data("rate_limit_error")),
        Error::Provider(ProviderError::RateLimited { .. })
    ));
    assert!(matches!(
        classify_stream_error(&data("api_error")),
        Error::Provider(ProviderError::Server { status: 500, .. })
    ));
    assert!(matches!(
        classify_stream_error(&data("invalid_request_error")),
        Error::ProviderRequest(e) if e.status == 400
    ));
}

// ---- streams ----

/// The `data` of each event of a stream, in order.
pub fn stream_events(events: &[Value]) -> Vec<String> {
    events.iter().map(Value::to_string).collect()
}

fn message_start(usage: Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}})
}

fn decode_all(events: &[Value]) -> (Vec<StreamEvent>, Option<Error>) {
    let mut decoder = StreamDecoder::new();
    let mut out = Vec::new();
    for data in stream_events(events) {
        match decoder.event(&data) {
            Ok(events) => out.extend(events),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

#[test]
fn every_stream_event_type_decodes_into_deltas_usage_stop_and_the_completed_answer() {
    let events = vec![
        message_start(
            json!({"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 100}),
        ),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "2"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hel"}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"q\": "}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"rust\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 15}}),
        json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 42}}),
        json!({"type": "message_stop"}),
    ];
    let (out, error) = decode_all(&events);
    assert!(error.is_none(), "{error:?}");
    let usage = Usage::from_cache_exclusive(25, 100, 0, 0, 42);
    let Some(StreamEvent::Completed(response)) = out.last() else {
        panic!("no completed answer: {out:?}");
    };
    assert_eq!(
        &out[..out.len() - 1],
        &[
            StreamEvent::ThinkingDelta {
                index: 0,
                text: "Hmm.".into()
            },
            StreamEvent::SignatureDelta {
                index: 0,
                signature: "sig-".into()
            },
            StreamEvent::SignatureDelta {
                index: 0,
                signature: "2".into()
            },
            StreamEvent::TextDelta {
                index: 1,
                text: "Hel".into()
            },
            StreamEvent::TextDelta {
                index: 1,
                text: "lo".into()
            },
            StreamEvent::ToolUseDelta {
                index: 2,
                id: Some("toolu_9".into()),
                name: Some("lookup".into()),
                input_json: String::new()
            },
            StreamEvent::ToolUseDelta {
                index: 2,
                id: None,
                name: None,
                input_json: "{\"q\": ".into()
            },
            StreamEvent::ToolUseDelta {
                index: 2,
                id: None,
                name: None,
                input_json: "\"rust\"}".into()
            },
            StreamEvent::Usage(Usage::from_cache_exclusive(25, 100, 0, 0, 15)),
            StreamEvent::Stop(StopReason::ToolUse),
            StreamEvent::Usage(usage),
            StreamEvent::Stop(StopReason::ToolUse),
        ]
    );
    // message_delta usage is cumulative: the last value counts, nothing is summed.
    assert_eq!(response.usage(), usage);
    assert_eq!(response.stop_reason(), StopReason::ToolUse);
    assert_eq!(
        response.blocks(),
        &[
            Block::Thinking {
                text: "Hmm.".into(),
                signature: Some("sig-2".into()),
                origin: Some("anthropic".into()),
                cache: None
            },
            Block::text("Hello"),
            Block::ToolUse {
                id: "toolu_9".into(),
                name: "lookup".into(),
                input: Json::new(json!({"q": "rust"})),
                cache: None
            },
        ]
    );
}

#[test]
fn nothing_is_emitted_before_the_first_content() {
    let (out, error) = decode_all(&[
        message_start(plain_usage()),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ]);
    assert!(out.is_empty() && error.is_none(), "{out:?}");
}

#[test]
fn a_mid_stream_error_event_is_its_typed_error() {
    let (out, error) = decode_all(&[
        message_start(plain_usage()),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    assert_eq!(out.len(), 1);
    assert!(
        matches!(
            error,
            Some(Error::Provider(ProviderError::Overloaded { .. }))
        ),
        "{error:?}"
    );
}

#[test]
fn a_streamed_refusal_with_stop_details_ends_with_the_refused_answer() {
    let (events, error) = decode_all(&[
        message_start(plain_usage()),
        json!({"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_details": {"type": "refusal", "category": "bio", "explanation": "No."}}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ]);
    assert!(error.is_none(), "{error:?}");
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("no completed answer: {events:?}");
    };
    assert_eq!(answer.stop_reason(), StopReason::Refusal);
    assert_eq!(answer.refusal_category(), Some("bio"));
    assert_eq!(answer.refusal_explanation(), "No.");
}

#[test]
fn every_streamed_stop_reason_reaches_the_stop_event() {
    for (wire, neutral) in [
        ("end_turn", StopReason::EndTurn),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("tool_use", StopReason::ToolUse),
        ("refusal", StopReason::Refusal),
        (
            "model_context_window_exceeded",
            StopReason::ContextWindowExceeded,
        ),
    ] {
        let (out, error) = decode_all(&[
            message_start(plain_usage()),
            json!({"type": "message_delta", "delta": {"stop_reason": wire, "stop_details": null}, "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ]);
        assert!(error.is_none(), "{wire}: {error:?}");
        assert!(out.contains(&StreamEvent::Stop(neutral)), "{wire}: {out:?}");
    }
}

#[test]
fn tool_input_that_is_not_json_fails_at_its_block_stop() {
    let (_, error) = decode_all(&[
        message_start(plain_usage()),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"q\": "}}),
        json!({"type": "content_block_stop", "index": 0}),
    ]);
    assert!(matches!(
        error,
        Some(Error::Provider(tollgate::ProviderError::Malformed { raw, .. })) if raw.contains("content_block_stop")
    ));
}

/// The error an error answer means, as the kit's endpoint decides it.
fn classify_error(status: u16, body: &[u8], retry_after: Option<Duration>) -> Error {
    WireError {
        retry_after,
        ..read_error(status, body)
    }
    .verdict()
}

/// The error a stream's error event means.
fn classify_stream_error(data: &str) -> Error {
    read_stream_error(data).verdict()
}
