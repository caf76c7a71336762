//! The codec against fixtures of Cohere's documented shapes (`tests/fixtures/`, after
//! the v2 API reference and its streaming and tool-use guides): answers, each finish
//! reason, usage, stream events, error bodies and embed bodies.

use serde_json::{Value, json};
use tollgate::provider::WireError;
use tollgate::{
    Block, ConnectionCause, EmbeddingPurpose, Error, ProviderError, StopReason, StreamEvent,
};
use tollgate_cohere::InputType;
use tollgate_cohere::codec::{
    Events, StreamDecoder, decode_embeddings, decode_response, encode_embeddings, input_type,
    is_overflow, read_error, read_failed_finish, stop_reason,
};

const MODEL: &str = "command-a-03-2025";

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn decode(body: &Value) -> tollgate::Result<tollgate::LlmResponse> {
    decode_response(body.to_string().as_bytes(), MODEL)
}

fn answer_with(finish: &str) -> Value {
    json!({"id": "x", "finish_reason": finish,
           "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
           "usage": {"billed_units": {"input_tokens": 2, "output_tokens": 1}}})
}

/// Every `data:` line of an SSE fixture, through a fresh decoder; the events, or the
/// first error.
fn run_stream(sse: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let mut decoder = StreamDecoder::with(Events::for_model(MODEL));
    let mut events = Vec::new();
    for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
        match decoder.event(data) {
            Ok(more) => events.extend(more),
            Err(e) => return (events, Some(e)),
        }
    }
    match decoder.end() {
        Ok(more) => events.extend(more),
        Err(e) => return (events, Some(e)),
    }
    (events, None)
}

fn completed(events: &[StreamEvent]) -> &tollgate::LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(answer)) => answer,
        other => panic!("not completed: {other:?}"),
    }
}

#[test]
fn a_text_answer_is_decoded_with_its_billed_usage_and_the_model_asked() {
    let answer = decode_response(fixture("text.json").as_bytes(), MODEL).unwrap();
    assert_eq!(answer.text(), "LLMs stand for Large Language Models.");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert_eq!(answer.model(), MODEL);
    let usage = answer.usage();
    assert_eq!((usage.input_tokens, usage.output_tokens), (17, 12));
}

#[test]
fn a_tool_call_answer_is_the_plan_as_text_then_the_call() {
    let answer = decode_response(fixture("tool_call.json").as_bytes(), MODEL).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let blocks = answer.blocks();
    assert_eq!(
        blocks[0],
        Block::text("I will search for the weather in Toronto.")
    );
    let Block::ToolUse {
        id, name, input, ..
    } = &blocks[1]
    else {
        panic!("{blocks:?}")
    };
    assert_eq!(
        (id.as_str(), name.as_str()),
        ("get_weather_1byjy32y4hvq", "get_weather")
    );
    assert_eq!(input.value(), &json!({"location": "Toronto"}));
    assert_eq!(
        answer.usage().input_tokens,
        37,
        "billed, not the template's 913"
    );
}

#[test]
fn each_ending_finish_reason_is_its_stop_reason() {
    for (wire, stop) in [
        ("COMPLETE", StopReason::EndTurn),
        ("STOP_SEQUENCE", StopReason::StopSequence),
        ("MAX_TOKENS", StopReason::MaxTokens),
        ("TOOL_CALL", StopReason::ToolUse),
    ] {
        assert_eq!(stop_reason(wire), Some(stop), "{wire}");
        assert_eq!(decode(&answer_with(wire)).unwrap().stop_reason(), stop);
    }
    assert_eq!(stop_reason("ERROR"), None);
}

#[test]
fn finish_reason_error_is_a_server_error_and_timeout_a_timeout_both_retried() {
    let err = decode(&answer_with("ERROR")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Server { status: 500, .. })
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let err = decode(&answer_with("TIMEOUT")).unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Timeout { .. })),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(read_failed_finish("COMPLETE", None).is_none());
}

#[test]
fn an_unknown_or_missing_finish_reason_is_malformed() {
    for body in [answer_with("SOMETHING_NEW"), json!({"message": {}})] {
        let err = decode(&body).unwrap_err();
        assert!(
            matches!(err, Error::Provider(ProviderError::Malformed { .. })),
            "{err:?}"
        );
    }
}

#[test]
fn usage_falls_back_to_tokens_and_reads_float_counts() {
    let body = json!({"finish_reason": "COMPLETE", "message": {"content": []},
                      "usage": {"tokens": {"input_tokens": 40.0, "output_tokens": 7.0}}});
    let usage = decode(&body).unwrap().usage();
    assert_eq!((usage.input_tokens, usage.output_tokens), (40, 7));
    let none = json!({"finish_reason": "COMPLETE", "message": {"content": []}});
    assert_eq!(decode(&none).unwrap().usage().input_tokens, 0);
}

#[test]
fn thinking_content_is_a_thinking_block_before_the_text() {
    let body = json!({"finish_reason": "COMPLETE", "message": {"content": [
        {"type": "thinking", "thinking": "Let me think."},
        {"type": "text", "text": "42."}]}});
    let answer = decode(&body).unwrap();
    assert!(matches!(&answer.blocks()[0], Block::Thinking { text, .. } if text == "Let me think."));
    assert_eq!(answer.text(), "42.");
}

#[test]
fn tool_arguments_that_are_not_json_are_malformed() {
    let body = json!({"finish_reason": "TOOL_CALL", "message": {"tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{nope"}}]}});
    let err = decode(&body).unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Malformed { .. })),
        "{err:?}"
    );
}

#[test]
fn a_streamed_tool_call_is_the_plan_then_the_call_in_deltas() {
    let (events, error) = run_stream(&fixture("tool_call_stream.sse"));
    assert!(error.is_none(), "{error:?}");
    let plan: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { index: 0, text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(plan, "I will search for the weather in Madrid.");
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseDelta {
                index,
                id,
                name,
                input_json,
            } => Some((*index, id.clone(), name.clone(), input_json.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(deltas[0].0, 1, "the call is the second block");
    assert_eq!(deltas[0].1.as_deref(), Some("get_weather_nsz5zm3w56q3"));
    assert_eq!(deltas[0].2.as_deref(), Some("get_weather"));
    assert!(deltas[1..].iter().all(|d| d.1.is_none() && d.2.is_none()));
    let answer = completed(&events);
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(
        matches!(&answer.blocks()[1], Block::ToolUse { input, .. } if input.value() == &json!({"location": "Madrid"}))
    );
    assert_eq!(answer.usage().output_tokens, 21);
    assert!(events.contains(&StreamEvent::Stop(StopReason::ToolUse)));
}

#[test]
fn a_streamed_text_answer_completes_at_message_end_and_citations_are_ignored() {
    let (events, error) = run_stream(&fixture("text_stream.sse"));
    assert!(error.is_none(), "{error:?}");
    let answer = completed(&events);
    assert_eq!(answer.text(), "Hello world!");
    assert_eq!(answer.model(), MODEL);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Usage(u) if u.input_tokens == 3))
    );
}

#[test]
fn a_streamed_thinking_item_is_a_thinking_block() {
    let sse = [
        json!({"type": "content-start", "index": 0,
               "delta": {"message": {"content": {"type": "thinking", "thinking": ""}}}}),
        json!({"type": "content-delta", "index": 0,
               "delta": {"message": {"content": {"thinking": "Hmm."}}}}),
        json!({"type": "content-start", "index": 1,
               "delta": {"message": {"content": {"type": "text", "text": ""}}}}),
        json!({"type": "content-delta", "index": 1,
               "delta": {"message": {"content": {"text": "Yes."}}}}),
        json!({"type": "message-end", "delta": {"finish_reason": "COMPLETE"}}),
    ]
    .iter()
    .map(|e| format!("data: {e}\n\n"))
    .collect::<String>();
    let (events, error) = run_stream(&sse);
    assert!(error.is_none(), "{error:?}");
    assert!(events.contains(&StreamEvent::ThinkingDelta {
        index: 0,
        text: "Hmm.".into()
    }));
    let answer = completed(&events);
    assert!(matches!(&answer.blocks()[0], Block::Thinking { text, .. } if text == "Hmm."));
    assert_eq!(answer.text(), "Yes.");
}

#[test]
fn a_stream_ending_with_finish_reason_error_fails_with_its_message() {
    let sse = fixture("text_stream.sse").replace(
        r#""delta":{"finish_reason":"COMPLETE","usage""#,
        r#""delta":{"finish_reason":"ERROR","error":"internal failure","usage""#,
    );
    let (events, error) = run_stream(&sse);
    assert!(
        matches!(
            error,
            Some(Error::Provider(ProviderError::Server { status: 500, .. }))
        ),
        "{error:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::Completed(_)))
    );
    let wire = read_failed_finish("ERROR", Some("internal failure")).unwrap();
    assert_eq!(wire.message, "internal failure");
}

#[test]
fn a_stream_without_message_end_was_cut() {
    let sse = fixture("text_stream.sse");
    let cut = &sse[..sse.find("event: message-end").unwrap()];
    let (_, error) = run_stream(cut);
    assert!(
        matches!(
            error,
            Some(Error::Provider(ProviderError::Connection {
                cause: ConnectionCause::ClosedEarly,
                ..
            }))
        ),
        "{error:?}"
    );
}

fn verdict(status: u16, body: &Value) -> Error {
    read_error(status, body.to_string().as_bytes()).verdict()
}

#[test]
fn error_bodies_are_judged_by_status() {
    let body = |m: &str| json!({"id": "e", "message": m});
    assert!(
        matches!(verdict(400, &body("invalid request: temperature must be between 0 and 1.0 inclusive.")),
        Error::ProviderRequest(e) if e.status == 400 && e.message.contains("temperature"))
    );
    assert!(matches!(
        verdict(401, &body("invalid api token")),
        Error::ProviderRequest(e) if e.status == 401
    ));
    assert!(matches!(
        verdict(402, &body("Please add or update your payment method")),
        Error::QuotaExhausted { .. }
    ));
    assert!(matches!(
        verdict(
            429,
            &body("You are using a Trial key, which is limited to 20 API calls / minute.")
        ),
        Error::Provider(ProviderError::RateLimited { .. })
    ));
    assert!(matches!(
        verdict(499, &body("request cancelled")),
        Error::ProviderRequest(e) if e.status == 499
    ));
    assert!(matches!(
        verdict(500, &body("internal server error")),
        Error::Provider(ProviderError::Server { status: 500, .. })
    ));
    assert!(matches!(
        verdict(503, &body("service unavailable")),
        Error::Provider(ProviderError::Server { status: 503, .. })
    ));
}

#[test]
fn llmocks_type_is_kept_and_a_body_that_is_not_json_is_its_text() {
    let wire = read_error(
        429,
        br#"{"message": "Rate limit exceeded.", "type": "rate_limit_error"}"#,
    );
    assert_eq!(
        (wire.kind.as_str(), wire.message.as_str()),
        ("rate_limit_error", "Rate limit exceeded.")
    );
    let wire = read_error(502, b"<html>bad gateway</html>");
    assert_eq!(wire.message, "<html>bad gateway</html>");
    assert_eq!(wire.status, 502);
}

#[test]
fn the_documented_too_many_tokens_wordings_are_a_context_overflow() {
    for message in [
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 4292. Try using a shorter prompt, or enabling prompt truncating.",
        "Too many tokens: the total number of tokens in the prompt exceeds the limit of 4081.",
        "too many tokens: size limit exceeded by 11326 tokens. Try using shorter or fewer inputs.",
    ] {
        let err = verdict(400, &json!({"message": message}));
        assert!(
            matches!(err, Error::ContextWindowExceeded { .. }),
            "{message}: {err:?}"
        );
    }
}

#[test]
fn an_output_limit_over_the_maximum_or_the_wording_under_another_status_is_no_overflow() {
    let max = "too many tokens: max tokens must be less than or equal to 4096, the maximum output for this model - received 8192.";
    assert!(!is_overflow(400, max));
    let overflow = "too many tokens: total number of tokens in the prompt cannot exceed 4081";
    assert!(is_overflow(400, overflow));
    assert!(!is_overflow(500, overflow));
    assert_eq!(
        read_error(400, json!({"message": max}).to_string().as_bytes()),
        WireError {
            status: 400,
            message: max.into(),
            ..WireError::default()
        }
    );
}

#[test]
fn an_embed_request_asks_float_vectors_for_its_purpose_and_width() {
    let texts = vec!["a".to_owned(), "b".to_owned()];
    let body = encode_embeddings("embed-v4.0", &texts, "search_query", Some(256));
    assert_eq!(
        body,
        json!({"model": "embed-v4.0", "texts": ["a", "b"], "input_type": "search_query",
               "embedding_types": ["float"], "output_dimension": 256})
    );
    let plain = encode_embeddings("embed-v4.0", &texts, "search_document", None);
    assert!(plain.get("output_dimension").is_none());
}

#[test]
fn the_purpose_gives_the_input_type_unless_the_catalog_sets_one() {
    assert_eq!(
        input_type(EmbeddingPurpose::Document, None),
        "search_document"
    );
    assert_eq!(input_type(EmbeddingPurpose::Query, None), "search_query");
    assert_eq!(
        input_type(EmbeddingPurpose::Query, Some(InputType::Classification)),
        "classification"
    );
    assert_eq!(
        input_type(EmbeddingPurpose::Document, Some(InputType::Clustering)),
        "clustering"
    );
}

#[test]
fn an_embed_answer_is_its_float_vectors_in_order_and_its_billed_tokens() {
    let body = json!({"id": "e", "response_type": "embeddings_by_type",
        "embeddings": {"float": [[0.1, 0.2], [0.3, 0.4]]}, "texts": ["a", "b"],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 6}}});
    let (vectors, tokens) = decode_embeddings(body.to_string().as_bytes(), 2).unwrap();
    assert_eq!(vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
    assert_eq!(tokens, 6);
}

#[test]
fn an_embed_answer_with_the_wrong_count_or_no_floats_is_malformed() {
    let two = json!({"embeddings": {"float": [[0.1], [0.2]]}});
    let none = json!({"embeddings": {"int8": [[1]]}});
    for (body, n) in [(two, 3), (none, 1)] {
        let err = decode_embeddings(body.to_string().as_bytes(), n).unwrap_err();
        assert!(
            matches!(err, Error::Provider(ProviderError::Malformed { .. })),
            "{err:?}"
        );
    }
}
