//! The codec alone, without I/O: request bodies, answers, stream chunks, errors, Go
//! durations, embeddings and decision answers.

use std::time::Duration;
use tollgate::wire::WireError;

use serde_json::{Value, json};
use tollgate::{
    Block, Error, ImageSource, Json, LlmRequest, Message, ProviderError, Role, SamplingParams,
    StopReason, StreamEvent, Usage,
};
use tollgate_openai::OutputLimitField;
use tollgate_openai::codec::{
    self, EncodeOptions, StreamDecoder, ToolChoice, decode_decision, decode_embeddings,
    decode_response, encode_request, parse_go_duration, read_error, read_stream_error,
};

fn options() -> EncodeOptions {
    EncodeOptions {
        max_tokens: Some(100),
        stream_usage: true,
        ..EncodeOptions::new("gpt-4o", OutputLimitField::MaxCompletionTokens)
    }
}

fn request(messages: Vec<Message>) -> LlmRequest {
    LlmRequest::new("m", messages, vec![], SamplingParams::new()).unwrap()
}

#[test]
fn go_durations_as_openai_sends_them() {
    for (text, expected) in [
        ("1s", Duration::from_secs(1)),
        ("6m0s", Duration::from_secs(360)),
        ("12ms", Duration::from_millis(12)),
        ("1.5s", Duration::from_millis(1500)),
        ("1h2m3s", Duration::from_secs(3723)),
        ("250us", Duration::from_micros(250)),
        ("0", Duration::ZERO),
        (" 2m ", Duration::from_secs(120)),
    ] {
        assert_eq!(parse_go_duration(text), Some(expected), "{text}");
    }
    for bad in ["", "s", "5", "5x", "1.2.3s", "-1s", "m5"] {
        assert_eq!(parse_go_duration(bad), None, "{bad}");
    }
}

#[test]
fn finish_reasons_map_to_stop_reasons() {
    assert_eq!(codec::stop_reason("stop"), Some(StopReason::EndTurn));
    assert_eq!(codec::stop_reason("length"), Some(StopReason::MaxTokens));
    assert_eq!(codec::stop_reason("tool_calls"), Some(StopReason::ToolUse));
    assert_eq!(
        codec::stop_reason("function_call"),
        Some(StopReason::ToolUse)
    );
    assert_eq!(
        codec::stop_reason("content_filter"),
        Some(StopReason::ContentFilter)
    );
    assert_eq!(codec::stop_reason("mystery"), None);
}

#[test]
fn an_unknown_finish_reason_is_a_malformed_answer_and_a_missing_one_a_natural_end() {
    let body = |finish: Value| {
        json!({"model": "m", "choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": finish}]})
            .to_string()
    };
    let err = decode_response(body(json!("mystery")).as_bytes()).unwrap_err();
    assert!(err.to_string().contains("mystery"), "{err}");
    let answer = decode_response(body(Value::Null).as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
}

#[test]
fn usage_subtracts_cache_reads_and_writes_and_keeps_reasoning_in_output() {
    let body = json!({"model": "m", "choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 50,
                  "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100},
                  "completion_tokens_details": {"reasoning_tokens": 30}}});
    let answer = decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        answer.usage(),
        Usage {
            input_tokens: 300,
            cache_read_tokens: 600,
            cache_write_tokens: 100,
            output_tokens: 50,
            ..Usage::default()
        }
    );
}

#[test]
fn every_block_type_is_encoded() {
    let r = request(vec![
        Message::system("sys"),
        Message {
            role: Role::User,
            content: vec![
                Block::text("look"),
                Block::Image {
                    source: ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data: "AAAA".into(),
                    },
                    cache: None,
                },
                Block::Image {
                    source: ImageSource::Url {
                        url: "https://example.invalid/a.png".into(),
                    },
                    cache: None,
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                Block::Thinking {
                    text: "hmm".into(),
                    signature: None,
                    origin: None,
                    cache: None,
                },
                Block::text("calling"),
                Block::ToolUse {
                    id: "call_1".into(),
                    name: "f".into(),
                    input: Json::new(json!({"a": 1})),
                    cache: None,
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: vec![Block::text("42")],
                    is_error: false,
                    cache: None,
                },
                Block::text("and?"),
            ],
        },
    ]);
    let body = encode_request(&r, &options()).unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}},
            ]},
            {"role": "assistant", "content": "calling", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
        ])
    );
    assert_eq!(body["max_completion_tokens"], 100);
}

#[test]
fn a_failed_tool_result_says_so_and_a_non_text_one_is_rejected() {
    let result = |content: Vec<Block>| {
        request(vec![
            Message::user("q"),
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "c".into(),
                    name: "f".into(),
                    input: Json::new(json!({})),
                    cache: None,
                }],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "c".into(),
                    content,
                    is_error: true,
                    cache: None,
                }],
            },
        ])
    };
    let body = encode_request(&result(vec![Block::text("boom")]), &options()).unwrap();
    assert_eq!(body["messages"][1]["content"], Value::Null);
    assert_eq!(body["messages"][2]["content"], "Error: boom");
    let image = Block::Image {
        source: ImageSource::Url {
            url: "https://example.invalid/x.png".into(),
        },
        cache: None,
    };
    let err = encode_request(&result(vec![image]), &options()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "messages[2].content[0].content[0]"),
        "{err}"
    );
}

#[test]
fn the_output_limit_field_and_stream_usage_follow_the_quirks() {
    let r = request(vec![Message::user("q")]);
    let mut o = options();
    o.output_limit_field = OutputLimitField::MaxTokens;
    o.stream = true;
    o.stream_usage = false;
    let body = encode_request(&r, &o).unwrap();
    assert_eq!(body["max_tokens"], 100);
    assert!(body.get("max_completion_tokens").is_none());
    assert_eq!(body["stream"], true);
    assert!(body.get("stream_options").is_none());
    o.stream_usage = true;
    let body = encode_request(&r, &o).unwrap();
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn tool_choices_parse_and_encode() {
    assert_eq!(
        ToolChoice::parse("required", "required"),
        Some(ToolChoice::Required)
    );
    assert_eq!(
        ToolChoice::parse("none", "required"),
        Some(ToolChoice::None)
    );
    assert_eq!(
        ToolChoice::parse("auto", "required"),
        Some(ToolChoice::Auto)
    );
    assert_eq!(
        ToolChoice::parse("tool:x", "required"),
        Some(ToolChoice::Tool("x".into()))
    );
    assert_eq!(ToolChoice::parse("tool:", "required"), None);
    assert_eq!(ToolChoice::parse("any", "required"), None);
}

#[test]
fn errors_classify_by_status_type_and_code() {
    let body = |t: &str, c: Value| {
        json!({"error": {"message": "m", "type": t, "code": c}})
            .to_string()
            .into_bytes()
    };
    let wait = Some(Duration::from_secs(2));
    assert!(matches!(
        classify_error(429, &body("requests", json!("rate_limit_exceeded")), wait),
        Error::Provider(ProviderError::RateLimited { retry_after }) if retry_after == wait
    ));
    assert!(matches!(
        classify_error(429, &body("tokens", json!("slow_down")), None),
        Error::Provider(ProviderError::RateLimited { .. })
    ));
    for (t, c) in [
        ("insufficient_quota", Value::Null),
        ("x", json!("insufficient_quota")),
        ("insufficient_quota", json!("credit_balance_exhausted")),
    ] {
        assert!(matches!(
            classify_error(429, &body(t, c), None),
            Error::QuotaExhausted { .. }
        ));
    }
    assert!(matches!(
        classify_error(402, b"payment required", None),
        Error::QuotaExhausted { .. }
    ));
    assert!(matches!(
        classify_error(408, b"", None),
        Error::Provider(ProviderError::Timeout { .. })
    ));
    assert!(matches!(
        classify_error(502, b"<html>bad gateway</html>", None),
        Error::Provider(ProviderError::Server { status: 502, .. })
    ));
    assert!(matches!(
        classify_error(409, &body("conflict", Value::Null), None),
        Error::ProviderRequest(e) if e.status == 409
    ));
    // Ollama-style `{"error": "text"}`.
    assert!(matches!(
        classify_error(404, br#"{"error":"model 'x' not found"}"#, None),
        Error::ProviderRequest(e) if e.status == 404 && e.message.contains("not found")
    ));
}

#[test]
fn stream_errors_classify_by_type_and_code() {
    let e = |t: &str, c: &str| {
        classify_stream_error(&json!({"error": {"message": "m", "type": t, "code": c}}).to_string())
    };
    assert!(matches!(
        e("server_error", ""),
        Error::Provider(ProviderError::Server { status: 500, .. })
    ));
    assert!(matches!(
        e("tokens", "rate_limit_exceeded"),
        Error::Provider(ProviderError::RateLimited { .. })
    ));
    assert!(matches!(
        e("insufficient_quota", ""),
        Error::QuotaExhausted { .. }
    ));
    assert!(matches!(
        e("invalid_request_error", "x"),
        Error::ProviderRequest(r) if r.status == 400
    ));
}

#[test]
fn the_stream_decoder_emits_nothing_before_content_and_completes_at_done() {
    let mut d = StreamDecoder::new();
    let chunk = |delta: Value, finish: Value| {
        json!({"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
    };
    assert!(
        d.event(&chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null
        ))
        .unwrap()
        .is_empty()
    );
    assert_eq!(
        d.event(&chunk(json!({"content": "hi"}), Value::Null))
            .unwrap(),
        vec![StreamEvent::TextDelta {
            index: 0,
            text: "hi".into()
        }]
    );
    assert_eq!(
        d.event(&chunk(json!({}), json!("stop"))).unwrap(),
        vec![StreamEvent::Stop(StopReason::EndTurn)]
    );
    assert!(!d.is_finished());
    let done = d.event("[DONE]").unwrap();
    assert!(d.is_finished());
    assert!(
        matches!(&done[..], [StreamEvent::Completed(a)] if a.text() == "hi" && a.stop_reason() == StopReason::EndTurn)
    );
}

#[test]
fn a_content_filter_finish_is_a_refusal_with_its_usage_at_the_end_of_the_stream() {
    let mut d = StreamDecoder::new();
    let chunk = |delta: Value, finish: Value| {
        json!({"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
    };
    d.event(&chunk(json!({"content": "hi"}), Value::Null))
        .unwrap();
    // No `Stop` event: the filter ends the stream as a refusal, once the usage is known.
    assert!(
        d.event(&chunk(json!({}), json!("content_filter")))
            .unwrap()
            .is_empty()
    );
    d.event(
        &json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}).to_string(),
    )
    .unwrap();
    let events = d.event("[DONE]").unwrap();
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("no completed answer: {events:?}");
    };
    assert_eq!(answer.stop_reason(), StopReason::ContentFilter);
    assert_eq!(answer.refusal_category(), Some("content_filter"));
    assert_eq!(answer.text(), "hi");
    assert_eq!(
        (answer.usage().input_tokens, answer.usage().output_tokens),
        (7, 2)
    );
    let body = json!({"model": "m", "choices": [{"message": {"content": "partial"}, "finish_reason": "content_filter"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}});
    let answer = decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ContentFilter);
    assert_eq!(answer.usage().output_tokens, 1);
}

#[test]
fn a_chunk_that_does_not_decode_is_malformed_with_its_bytes() {
    let mut d = StreamDecoder::new();
    let error = d.event("{\"choices\": [oops").unwrap_err();
    assert!(
        matches!(&error, Error::Provider(ProviderError::Malformed { raw, .. }) if raw == "{\"choices\": [oops"),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(matches!(
        decode_response(b"<html>502 Bad Gateway</html>"),
        Err(Error::Provider(ProviderError::Malformed {
            raw_len: 28,
            ..
        }))
    ));
}

#[test]
fn done_without_a_finish_reason_is_a_cut_stream() {
    let mut d = StreamDecoder::new();
    d.event(&json!({"choices": [{"index": 0, "delta": {"content": "x"}}]}).to_string())
        .unwrap();
    let closed_early = |r: Result<_, Error>| {
        matches!(
            r,
            Err(Error::Provider(ProviderError::Connection {
                cause: tollgate::ConnectionCause::ClosedEarly,
                ..
            }))
        )
    };
    assert!(closed_early(d.event("[DONE]")));
    let mut d = StreamDecoder::new();
    assert!(closed_early(d.end()));
}

#[test]
fn embeddings_decode_by_index_and_reject_wrong_counts() {
    let body = json!({"data": [
        {"index": 1, "embedding": [0.0, 1.0]},
        {"index": 0, "embedding": [1.0, 0.0]},
    ], "usage": {"prompt_tokens": 5, "total_tokens": 5}});
    let (vectors, tokens) = decode_embeddings(body.to_string().as_bytes(), 2).unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    assert_eq!(tokens, 5);
    assert!(decode_embeddings(body.to_string().as_bytes(), 3).is_err());
    let twice =
        json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]});
    assert!(decode_embeddings(twice.to_string().as_bytes(), 2).is_err());
    // A server that leaves `index` out: list order.
    let plain = json!({"data": [{"embedding": [3.0]}, {"embedding": [4.0]}]});
    let (vectors, tokens) = decode_embeddings(plain.to_string().as_bytes(), 2).unwrap();
    assert_eq!(vectors, vec![vec![3.0], vec![4.0]]);
    assert_eq!(tokens, 0);
}

#[test]
fn embeddings_send_dimensions_only_when_asked() {
    let texts = vec!["a".to_owned()];
    assert_eq!(
        codec::encode_embeddings("e", &texts, Some(256))["dimensions"],
        256
    );
    assert!(
        codec::encode_embeddings("e", &texts, None)
            .get("dimensions")
            .is_none()
    );
}

#[test]
fn decision_weights_come_from_the_first_tokens_top_logprobs() {
    let body = json!({"choices": [{"message": {"content": "A"}, "finish_reason": "length",
        "logprobs": {"content": [{"token": "A", "logprob": -0.5, "top_logprobs": [
            {"token": "A", "logprob": -0.5}, {"token": " b", "logprob": -1.5},
            {"token": "C", "logprob": -9999.0}, {"token": "Z", "logprob": -0.1}
        ]}]}}], "usage": {"prompt_tokens": 40, "completion_tokens": 1}});
    let labels = vec!["A".to_owned(), "B".to_owned(), "C".to_owned()];
    let (weights, usage) = decode_decision(body.to_string().as_bytes(), &labels).unwrap();
    assert!((weights["A"] - (-0.5f64).exp()).abs() < 1e-12);
    assert!((weights["B"] - (-1.5f64).exp()).abs() < 1e-12);
    assert_eq!(weights["C"], 0.0);
    assert_eq!(usage.input_tokens, 40);
    let none = json!({"choices": [{"message": {"content": "Q"}, "logprobs": {"content": [
        {"token": "Q", "logprob": -0.1, "top_logprobs": [{"token": "Q", "logprob": -0.1}]}]}}]});
    assert!(decode_decision(none.to_string().as_bytes(), &labels).is_err());
}

#[test]
fn a_decision_prompt_asks_for_one_token_with_twenty_logprobs() {
    let labels = vec![
        ("A".to_owned(), "left".to_owned()),
        ("B".to_owned(), "right".to_owned()),
    ];
    let body = codec::encode_decision("m", OutputLimitField::MaxTokens, "state", "which?", &labels);
    assert_eq!(body["logprobs"], true);
    assert_eq!(body["top_logprobs"], 20);
    assert_eq!(body["max_tokens"], 1);
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("- A: left\n- B: right"), "{user}");
}

#[test]
fn a_refusal_finish_reason_from_a_compatible_server_is_a_refused_answer() {
    let body = json!({"model": "m", "choices": [{"message": {"content": "No."}, "finish_reason": "refusal"}]});
    let answer = decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::Refusal);
    assert_eq!(answer.refusal_explanation(), "No.");
    let mut d = StreamDecoder::new();
    d.event(&json!({"choices": [{"index": 0, "delta": {"content": "No"}}]}).to_string())
        .unwrap();
    // The refusal ends the answer at its end, once the usage is known.
    d.event(
        &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "refusal"}]}).to_string(),
    )
    .unwrap();
    let events = d.event("[DONE]").unwrap();
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Completed(a)) if a.stop_reason() == StopReason::Refusal && a.refusal_explanation() == "No"
    ));
}

#[test]
fn null_lists_read_as_empty() {
    let body = json!({"model": "m", "choices": [{"message": {"content": "x", "tool_calls": null},
        "finish_reason": "stop"}], "usage": null});
    assert_eq!(
        decode_response(body.to_string().as_bytes()).unwrap().text(),
        "x"
    );
    let mut d = StreamDecoder::new();
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "y", "tool_calls": null}}]});
    assert_eq!(d.event(&chunk.to_string()).unwrap().len(), 1);
    assert!(
        d.event(&json!({"choices": null}).to_string())
            .unwrap()
            .is_empty()
    );
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
