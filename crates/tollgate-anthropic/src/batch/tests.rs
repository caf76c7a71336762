//! The Message Batches wire format on fixtures shaped as Anthropic's documentation shows
//! them (and as llmock serves them where it differs): each result type, each processing
//! status, the `custom_id` rule, where results are read from.

use serde_json::{Value, json};
use tollgate::provider::batch::{BatchCounts, BatchPhase};
use tollgate::provider::{Block, Error, ProviderError, StopReason};

use super::wire::{self, check_batch_id, check_custom_id, decode_batch, decode_results};

const BATCH: &str = "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF";

/// A batch object as "Retrieve a Message Batch" documents it, with `status` and counts.
fn batch(status: &str, counts: Value) -> Vec<u8> {
    json!({
        "id": BATCH,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": counts,
        "ended_at": null,
        "created_at": "2024-09-24T18:37:24.100435Z",
        "expires_at": "2024-09-25T18:37:24.100435Z",
        "cancel_initiated_at": null,
        "results_url": null
    })
    .to_string()
    .into_bytes()
}

fn counts(processing: u64, succeeded: u64, errored: u64, canceled: u64, expired: u64) -> Value {
    json!({"processing": processing, "succeeded": succeeded, "errored": errored,
        "canceled": canceled, "expired": expired})
}

fn lines(lines: &[Value]) -> Vec<u8> {
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    text.join("\n").into_bytes()
}

fn succeeded(id: &str, message: Value) -> Value {
    json!({"custom_id": id, "result": {"type": "succeeded", "message": message}})
}

fn text_message(text: &str) -> Value {
    json!({"id": "msg_014VwiXbi91y3JMjcpyGBHX5", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 11, "output_tokens": 36}})
}

#[test]
fn in_progress_is_running_with_every_request_counted() {
    let status = decode_batch(&batch("in_progress", counts(100, 50, 30, 10, 10)))
        .and_then(|b| b.status())
        .expect("a batch");
    assert_eq!(status.phase, BatchPhase::Running);
    assert_eq!(
        status.counts,
        BatchCounts {
            total: 200,
            succeeded: 50,
            failed: 50
        }
    );
    assert!(status.failure.is_none());
}

#[test]
fn canceling_is_cancelling() {
    let status = decode_batch(&batch("canceling", counts(3, 1, 0, 0, 0)))
        .and_then(|b| b.status())
        .expect("a batch");
    assert_eq!(status.phase, BatchPhase::Cancelling);
}

#[test]
fn ended_is_ended_and_errored_canceled_and_expired_count_as_failed() {
    let status = decode_batch(&batch("ended", counts(0, 2, 1, 3, 4)))
        .and_then(|b| b.status())
        .expect("a batch");
    assert_eq!(status.phase, BatchPhase::Ended);
    assert_eq!(
        status.counts,
        BatchCounts {
            total: 10,
            succeeded: 2,
            failed: 8
        }
    );
    assert!(
        status.failure.is_none(),
        "a message batch never fails whole"
    );
}

#[test]
fn an_unknown_processing_status_is_malformed() {
    let error = decode_batch(&batch("paused", counts(1, 0, 0, 0, 0)))
        .and_then(|b| b.status())
        .expect_err("unknown");
    assert!(
        matches!(error, Error::Provider(ProviderError::Malformed { .. })),
        "{error:?}"
    );
}

#[test]
fn a_succeeded_line_is_decoded_as_a_live_answer_with_its_usage() {
    let out = decode_results(
        &lines(&[succeeded("my-first-request", text_message("Hello again!"))]),
        BATCH,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].custom_id, "my-first-request");
    let answer = out[0].result.as_ref().expect("an answer");
    assert_eq!(answer.text(), "Hello again!");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert_eq!(
        (answer.usage().input_tokens, answer.usage().output_tokens),
        (11, 36)
    );
}

#[test]
fn a_succeeded_tool_use_line_keeps_its_tool_call() {
    let message = json!({"id": "msg_2", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
            "input": {"city": "Paris"}}],
        "usage": {"input_tokens": 40, "output_tokens": 12,
            "cache_read_input_tokens": 5, "cache_creation_input_tokens": 0}});
    let out = decode_results(&lines(&[succeeded("tool-1", message)]), BATCH);
    let answer = out[0].result.as_ref().expect("an answer");
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(matches!(
        &answer.blocks()[0],
        Block::ToolUse { name, .. } if name == "get_weather"
    ));
    assert_eq!(answer.usage().cache_read_tokens, 5);
}

#[test]
fn an_errored_line_is_the_live_verdict_of_its_error_type() {
    let line = json!({"custom_id": "my-second-request", "result": {"type": "errored",
        "error": {"type": "error", "error": {"type": "invalid_request_error",
            "message": "Validation error: max_tokens: Field required"}}}});
    let out = decode_results(&lines(&[line]), BATCH);
    match &out[0].result {
        Err(Error::ProviderRequest(e)) => {
            assert_eq!(e.status, 400);
            assert!(e.message.contains("max_tokens"), "{e:?}");
        }
        other => panic!("a request error: {other:?}"),
    }
}

#[test]
fn an_errored_line_with_the_bare_error_object_reads_the_same() {
    let line = json!({"custom_id": "r", "result": {"type": "errored",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}});
    let out = decode_results(&lines(&[line]), BATCH);
    assert!(
        matches!(
            out[0].result,
            Err(Error::Provider(ProviderError::Overloaded {
                status: 529,
                ..
            }))
        ),
        "{:?}",
        out[0].result
    );
}

#[test]
fn an_errored_prompt_too_long_is_a_context_overflow() {
    let line = json!({"custom_id": "r", "result": {"type": "errored",
        "error": {"type": "error", "error": {"type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum"}}}});
    let out = decode_results(&lines(&[line]), BATCH);
    assert!(
        matches!(out[0].result, Err(Error::ContextWindowExceeded { .. })),
        "{:?}",
        out[0].result
    );
}

#[test]
fn a_canceled_line_is_unfinished_as_cancelled() {
    let line = json!({"custom_id": "c1", "result": {"type": "canceled"}});
    let out = decode_results(&lines(&[line]), BATCH);
    match &out[0].result {
        Err(Error::BatchLineUnfinished { batch_id, how }) => {
            assert_eq!((batch_id.as_str(), how.as_str()), (BATCH, "was cancelled"));
        }
        other => panic!("unfinished: {other:?}"),
    }
}

#[test]
fn an_expired_line_is_unfinished_as_expired() {
    let line = json!({"custom_id": "e1", "result": {"type": "expired"}});
    let out = decode_results(&lines(&[line]), BATCH);
    match &out[0].result {
        Err(Error::BatchLineUnfinished { how, .. }) => assert_eq!(how, "expired"),
        other => panic!("unfinished: {other:?}"),
    }
}

#[test]
fn an_unknown_result_type_is_that_lines_malformed_error() {
    let line = json!({"custom_id": "u1", "result": {"type": "deferred"}});
    let out = decode_results(&lines(&[line]), BATCH);
    assert_eq!(out[0].custom_id, "u1");
    assert!(matches!(
        out[0].result,
        Err(Error::Provider(ProviderError::Malformed { .. }))
    ));
}

#[test]
fn a_line_naming_no_request_is_left_out_and_blank_lines_are_skipped() {
    let mut body = lines(&[succeeded("a", text_message("one"))]);
    body.extend_from_slice(b"\n\nnot json at all\n{\"result\":{\"type\":\"canceled\"}}\r\n");
    body.extend_from_slice(&lines(&[succeeded("b", text_message("two"))]));
    body.extend_from_slice(b"\n");
    let out = decode_results(&body, BATCH);
    let ids: Vec<&str> = out.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn a_custom_id_of_letters_digits_underscore_and_dash_up_to_64_is_taken() {
    for id in ["a", "line-0001_x", &"Z9".repeat(32)] {
        assert!(check_custom_id(id).is_ok(), "{id}");
    }
}

#[test]
fn a_custom_id_outside_the_rule_is_an_invalid_request_naming_the_field_and_rule() {
    for id in ["", "has space", "dot.ted", "ünï", &"x".repeat(65), "a/b"] {
        match check_custom_id(id) {
            Err(Error::InvalidRequest { field, reason }) => {
                assert_eq!(field, "custom_id");
                assert!(reason.contains("^[a-zA-Z0-9_-]{1,64}$"), "{reason}");
            }
            other => panic!("{id:?} refused: {other:?}"),
        }
    }
}

#[test]
fn a_very_long_custom_id_is_named_by_its_start_only() {
    let id = "y".repeat(10_000);
    let Err(Error::InvalidRequest { reason, .. }) = check_custom_id(&id) else {
        panic!("refused");
    };
    assert!(reason.len() < 400, "{reason}");
}

#[test]
fn a_batch_id_that_is_not_one_path_segment_is_refused() {
    assert!(check_batch_id(BATCH).is_ok());
    for id in ["", "../v1/models", "msgbatch_1?x=1", "a/b", "a#b"] {
        assert!(
            matches!(check_batch_id(id), Err(Error::InvalidRequest { .. })),
            "{id}"
        );
    }
}

#[test]
fn an_absolute_results_url_under_the_base_url_is_followed() {
    let url = "https://api.anthropic.com/v1/messages/batches/msgbatch_1/results?beta=true";
    assert_eq!(
        wire::results_path("https://api.anthropic.com", Some(url), "msgbatch_1"),
        "/v1/messages/batches/msgbatch_1/results?beta=true"
    );
}

#[test]
fn a_relative_results_url_resolves_against_the_base_urls_origin() {
    assert_eq!(
        wire::results_path(
            "http://127.0.0.1:8000/anthropic",
            Some("/anthropic/v1/messages/batches/msgbatch_1/results"),
            "msgbatch_1"
        ),
        "/v1/messages/batches/msgbatch_1/results"
    );
}

#[test]
fn a_results_url_on_another_origin_or_none_reads_from_the_base_url() {
    let base = "https://gateway.example/anthropic";
    for given in [
        Some("https://api.anthropic.com/v1/messages/batches/msgbatch_1/results"),
        Some("http://gateway.example/anthropic/v1/messages/batches/msgbatch_1/results"),
        Some("https://gateway.example:8443/x"),
        Some("https://gateway.example.evil/anthropic/v1/messages/batches/msgbatch_1/results"),
        Some("https://gateway.example@evil.example/anthropic/v1/messages"),
        Some("//evil.example/anthropic/v1/messages/batches/msgbatch_1/results"),
        None,
    ] {
        assert_eq!(
            wire::results_path(base, given, "msgbatch_1"),
            "/v1/messages/batches/msgbatch_1/results",
            "{given:?}"
        );
    }
}

#[test]
fn a_results_url_on_the_origin_but_outside_the_base_path_reads_from_the_base_url() {
    let base = "https://gateway.example/anthropic";
    for given in [
        "https://gateway.example/other/v1/messages/batches/msgbatch_1/results",
        "https://gateway.example/anthropic-old/v1/messages/batches/msgbatch_1/results",
        "/other/v1/messages/batches/msgbatch_1/results",
        "v1/messages/batches/msgbatch_1/results",
    ] {
        assert_eq!(
            wire::results_path(base, Some(given), "msgbatch_1"),
            "/v1/messages/batches/msgbatch_1/results",
            "{given}"
        );
    }
}

#[test]
fn the_create_body_holds_each_line_as_a_request() {
    let one = wire::line("a", json!({"model": "m", "max_tokens": 5})).expect("a line");
    let body = wire::create_body(&[one.clone(), one]).expect("a body");
    assert_eq!(body["requests"].as_array().map(Vec::len), Some(2));
    assert_eq!(body["requests"][0]["custom_id"], "a");
    assert_eq!(body["requests"][0]["params"]["max_tokens"], 5);
    let refused = wire::create_body(&[b"not json".to_vec()]);
    assert!(matches!(refused, Err(Error::InvalidRequest { field, .. }) if field == "lines[0]"));
}

#[test]
fn the_line_byte_cap_leaves_room_for_the_create_bodys_own_bytes() {
    let own = wire::MAX_REQUESTS as u64 + "{\"requests\":[]}".len() as u64;
    assert!(wire::MAX_LINE_BYTES + own <= wire::MAX_CREATE_BYTES);
}
