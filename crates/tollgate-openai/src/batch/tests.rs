//! The batch APIs' JSON read and written without I/O: statuses, whole-batch failures,
//! results lines (the fixtures are the API references' own examples), the line and
//! create shapes, the multipart body, ids and file names.

use serde_json::{Value, json};
use tollgate::provider::batch::{BatchPhase, BatchStatus};
use tollgate::provider::{Block, Error, ProviderError, StopReason};

use super::wire::{FIND_PAGES, Next, outcome};
use super::{file_name, segment, upload::multipart};
use crate::codec;
use crate::dialect::{BatchApi, Dialect};

/// OpenAI's batch object example (Batch API reference, "Retrieve batch").
fn openai_batch(status: &str) -> Value {
    json!({
        "id": "batch_abc123",
        "object": "batch",
        "endpoint": "/v1/chat/completions",
        "errors": null,
        "input_file_id": "file-abc123",
        "completion_window": "24h",
        "status": status,
        "output_file_id": "file-cvaTdG",
        "error_file_id": "file-HOWS94",
        "created_at": 1_711_471_533,
        "request_counts": {"total": 100, "completed": 95, "failed": 5},
        "metadata": {"customer_id": "user_123456789", "tollgate_label": "run-1"}
    })
}

/// Mistral's job object (its client's `BatchJobOut` fields).
fn mistral_job(status: &str) -> Value {
    json!({
        "id": "b9a1c0d2-0000-4000-8000-000000000001",
        "object": "batch",
        "input_files": ["f-in"],
        "metadata": {"tollgate_label": "run-1"},
        "endpoint": "/v1/chat/completions",
        "model": "mistral-small-latest",
        "output_file": null,
        "error_file": null,
        "errors": [],
        "status": status,
        "created_at": 1_711_471_533,
        "total_requests": 3,
        "completed_requests": 2,
        "succeeded_requests": 2,
        "failed_requests": 0
    })
}

fn status(api: BatchApi, value: Value) -> BatchStatus {
    api.job(value).expect("a batch object").status()
}

fn phase(api: BatchApi, value: Value) -> BatchPhase {
    status(api, value).phase
}

#[test]
fn openai_statuses_map_to_their_phases_with_request_counts() {
    let cases = [
        ("validating", BatchPhase::Queued),
        ("in_progress", BatchPhase::Running),
        ("finalizing", BatchPhase::Running),
        ("cancelling", BatchPhase::Cancelling),
        ("completed", BatchPhase::Ended),
        ("expired", BatchPhase::Ended),
        ("cancelled", BatchPhase::Ended),
        ("failed", BatchPhase::Ended),
    ];
    for (wire, want) in cases {
        assert_eq!(phase(BatchApi::OpenAi, openai_batch(wire)), want, "{wire}");
    }
    let done = status(BatchApi::OpenAi, openai_batch("completed"));
    assert_eq!(
        (done.counts.total, done.counts.succeeded, done.counts.failed),
        (100, 95, 5)
    );
    assert!(done.failure.is_none());
    // Expired and cancelled batches end line by line: their lines say it, not the batch.
    assert!(
        status(BatchApi::OpenAi, openai_batch("expired"))
            .failure
            .is_none()
    );
    let job = BatchApi::OpenAi.job(openai_batch("completed")).unwrap();
    assert_eq!(job.output_file.as_deref(), Some("file-cvaTdG"));
    assert_eq!(job.error_file.as_deref(), Some("file-HOWS94"));
    assert_eq!(job.handle().input_file.as_deref(), Some("file-abc123"));
}

#[test]
fn openai_enqueued_token_cap_failure_is_rate_limited() {
    let mut batch = openai_batch("failed");
    batch["errors"] = json!({"object": "list", "data": [{
        "code": "token_limit_exceeded",
        "message": "Enqueued token limit reached for gpt-4o in organization org-x. Limit: 90,000 enqueued tokens.",
        "param": null, "line": null
    }]});
    let failure = status(BatchApi::OpenAi, batch).failure;
    assert!(
        matches!(
            failure,
            Some(Error::Provider(ProviderError::RateLimited {
                retry_after: None
            }))
        ),
        "{failure:?}"
    );
}

#[test]
fn openai_validation_failure_is_a_request_error_naming_code_and_line() {
    let mut batch = openai_batch("failed");
    batch["errors"] = json!({"data": [{
        "code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
        "param": null, "line": 3
    }]});
    match status(BatchApi::OpenAi, batch).failure {
        Some(Error::ProviderRequest(e)) => {
            assert_eq!(e.status, 400);
            assert!(e.message.contains("invalid_json_line"), "{}", e.message);
            assert!(e.message.contains("line 3"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    // No errors listed: still a failure, never silence.
    let failure = status(BatchApi::OpenAi, openai_batch("failed")).failure;
    assert!(
        matches!(failure, Some(Error::ProviderRequest(_))),
        "{failure:?}"
    );
}

#[test]
fn an_unknown_status_is_malformed_not_a_guess() {
    for (api, value) in [
        (BatchApi::OpenAi, openai_batch("paused")),
        (BatchApi::MistralJobs, mistral_job("PAUSED")),
    ] {
        let error = api.read_job(value.to_string().as_bytes()).unwrap_err();
        assert!(
            matches!(error, Error::Provider(ProviderError::Malformed { .. })),
            "{error:?}"
        );
    }
}

#[test]
fn mistral_statuses_map_to_their_phases_with_request_counts() {
    let cases = [
        ("QUEUED", BatchPhase::Queued),
        ("RUNNING", BatchPhase::Running),
        ("CANCELLATION_REQUESTED", BatchPhase::Cancelling),
        ("SUCCESS", BatchPhase::Ended),
        ("FAILED", BatchPhase::Ended),
        ("TIMEOUT_EXCEEDED", BatchPhase::Ended),
        ("CANCELLED", BatchPhase::Ended),
    ];
    for (wire, want) in cases {
        assert_eq!(
            phase(BatchApi::MistralJobs, mistral_job(wire)),
            want,
            "{wire}"
        );
    }
    let running = status(BatchApi::MistralJobs, mistral_job("RUNNING"));
    assert_eq!(
        (
            running.counts.total,
            running.counts.succeeded,
            running.counts.failed
        ),
        (3, 2, 0)
    );
}

#[test]
fn mistral_output_files_read_as_ids_or_as_llmock_file_objects() {
    let mut job = mistral_job("SUCCESS");
    job["output_file"] = json!("f-out");
    job["error_file"] = json!({"id": "f-err", "object": "file", "purpose": "batch_error"});
    let job = BatchApi::MistralJobs.job(job).unwrap();
    assert_eq!(job.output_file.as_deref(), Some("f-out"));
    assert_eq!(job.error_file.as_deref(), Some("f-err"));
    assert_eq!(job.input_file.as_deref(), Some("f-in"));
}

#[test]
fn mistral_failed_job_without_results_fails_the_batch_and_with_them_fails_by_line() {
    let mut failed = mistral_job("FAILED");
    failed["errors"] = json!([{"message": "Invalid input file", "count": 1}]);
    match status(BatchApi::MistralJobs, failed.clone()).failure {
        Some(Error::ProviderRequest(e)) => assert!(e.message.contains("Invalid input file")),
        other => panic!("{other:?}"),
    }
    failed["error_file"] = json!("f-err");
    assert!(status(BatchApi::MistralJobs, failed).failure.is_none());
}

/// The results lines of OpenAI's reference ("The request output object"), one a
/// tool call, one the example's expired line.
const ANSWER_LINE: &str = r#"{"id": "batch_req_123", "custom_id": "request-2", "response": {"status_code": 200, "request_id": "req_123", "body": {"id": "chatcmpl-123", "object": "chat.completion", "created": 1711652795, "model": "gpt-3.5-turbo-0125", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}, "logprobs": null, "finish_reason": "stop"}], "usage": {"prompt_tokens": 22, "completion_tokens": 2, "total_tokens": 24}, "system_fingerprint": "fp_123"}}, "error": null}"#;
const TOOL_LINE: &str = r#"{"id": "batch_req_124", "custom_id": "request-3", "response": {"status_code": 200, "request_id": "req_124", "body": {"id": "chatcmpl-124", "object": "chat.completion", "created": 1711652795, "model": "gpt-4o-mini", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}}}, "error": null}"#;
const EXPIRED_LINE: &str = r#"{"id": "batch_req_456", "custom_id": "request-1", "response": null, "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}}"#;

fn read(line: &str) -> Option<tollgate::provider::batch::BatchOutcome> {
    let decode = |body: &[u8]| codec::decode_response_in(body, &Dialect::OPENAI);
    outcome(line.as_bytes(), "batch_abc123", &decode, codec::read_error)
}

#[test]
fn an_answer_line_decodes_as_the_live_answer_does() {
    let line = read(ANSWER_LINE).expect("a result");
    assert_eq!(line.custom_id, "request-2");
    let answer = line.result.expect("an answer");
    assert_eq!(answer.text(), "Hello.");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert_eq!(answer.usage().input_tokens, 22);
    assert_eq!(answer.usage().output_tokens, 2);
    let live = codec::decode_response(
        serde_json::from_str::<Value>(ANSWER_LINE).unwrap()["response"]["body"]
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(answer.usage(), live.usage());

    let tool = read(TOOL_LINE).unwrap().result.expect("an answer");
    assert_eq!(tool.stop_reason(), StopReason::ToolUse);
    assert!(
        tool.blocks()
            .iter()
            .any(|b| matches!(b, Block::ToolUse { name, input, .. }
            if name == "get_weather" && input.value() == &json!({"city": "Paris"}))),
        "{tool:?}"
    );
}

#[test]
fn an_error_status_line_goes_through_the_live_error_classifier() {
    let line = |status: u16, error: Value| {
        json!({"id": "r", "custom_id": "c", "response": {"status_code": status,
            "request_id": "q", "body": {"error": error}}, "error": null})
        .to_string()
    };
    let rate = read(&line(
        429,
        json!({"type": "requests", "code": "rate_limit_exceeded", "message": "slow down"}),
    ));
    assert!(matches!(
        rate.unwrap().result,
        Err(Error::Provider(ProviderError::RateLimited { .. }))
    ));
    let bad = read(&line(
        400,
        json!({"type": "invalid_request_error", "code": null, "message": "bad"}),
    ));
    assert!(matches!(bad.unwrap().result, Err(Error::ProviderRequest(e)) if e.status == 400));
    let quota = read(&line(
        429,
        json!({"type": "insufficient_quota", "code": "insufficient_quota", "message": "out"}),
    ));
    assert!(matches!(
        quota.unwrap().result,
        Err(Error::QuotaExhausted { .. })
    ));
    let server = read(&line(
        500,
        json!({"type": "server_error", "message": "oops"}),
    ));
    assert!(matches!(
        server.unwrap().result,
        Err(Error::Provider(ProviderError::Server { status: 500, .. }))
    ));
}

#[test]
fn expired_and_cancelled_lines_are_unfinished_naming_the_batch() {
    let expired = read(EXPIRED_LINE).unwrap();
    assert_eq!(expired.custom_id, "request-1");
    assert!(
        matches!(&expired.result, Err(Error::BatchLineUnfinished { batch_id, how })
            if batch_id == "batch_abc123" && how == "expired"),
        "{:?}",
        expired.result
    );
    let cancelled = EXPIRED_LINE.replace("batch_expired", "batch_cancelled");
    assert!(matches!(read(&cancelled).unwrap().result,
        Err(Error::BatchLineUnfinished { how, .. }) if how == "was cancelled"));
}

#[test]
fn a_timed_out_line_is_a_timeout_and_another_line_error_a_request_error() {
    let timeout = EXPIRED_LINE.replace("batch_expired", "request_timeout");
    assert!(matches!(
        read(&timeout).unwrap().result,
        Err(Error::Provider(ProviderError::Timeout { .. }))
    ));
    // llmock's own line error, for a line it could not read.
    let invalid = r#"{"id": "x", "custom_id": "c", "response": null, "error": {"code": "unsupported_endpoint", "message": "no"}}"#;
    assert!(matches!(read(invalid).unwrap().result,
        Err(Error::ProviderRequest(e)) if e.message.contains("unsupported_endpoint")));
}

#[test]
fn lines_naming_no_request_are_skipped_and_a_line_with_nothing_is_malformed() {
    assert!(read("not json").is_none());
    assert!(read(r#"{"response": null, "error": {"code": "batch_expired"}}"#).is_none());
    let empty = read(r#"{"custom_id": "c", "response": null, "error": null}"#).unwrap();
    assert!(matches!(
        empty.result,
        Err(Error::Provider(ProviderError::Malformed { .. }))
    ));
}

#[test]
fn lines_and_create_bodies_take_each_apis_shape() {
    let body = json!({"model": "m", "messages": []});
    assert_eq!(
        BatchApi::OpenAi.line("a", "/v1/chat/completions", body.clone()),
        json!({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": body})
    );
    assert_eq!(
        BatchApi::MistralJobs.line("a", "/v1/chat/completions", body.clone()),
        json!({"custom_id": "a", "body": body})
    );
    assert_eq!(
        BatchApi::OpenAi.create_body("file-1", "m", "/v1/chat/completions", "run-1"),
        json!({"input_file_id": "file-1", "endpoint": "/v1/chat/completions",
            "completion_window": "24h", "metadata": {"tollgate_label": "run-1"}})
    );
    assert_eq!(
        BatchApi::MistralJobs.create_body("file-1", "m", "/v1/chat/completions", "run-1"),
        json!({"input_files": ["file-1"], "model": "m", "endpoint": "/v1/chat/completions",
            "metadata": {"tollgate_label": "run-1"}})
    );
}

#[test]
fn list_pages_follow_openais_cursor_and_mistrals_page_numbers() {
    assert_eq!(BatchApi::OpenAi.list_path(None), "/v1/batches?limit=100");
    let after = Next::After("batch_9".into());
    assert_eq!(
        BatchApi::OpenAi.list_path(Some(&after)),
        "/v1/batches?limit=100&after=batch_9"
    );
    assert_eq!(
        BatchApi::MistralJobs.list_path(None),
        "/v1/batch/jobs?page=0&page_size=100"
    );
    assert_eq!(
        BatchApi::MistralJobs.list_path(Some(&Next::Page(2))),
        "/v1/batch/jobs?page=2&page_size=100"
    );
    let page = BatchApi::OpenAi
        .read_page(br#"{"object":"list","data":[{"id":"b"}],"first_id":"b","last_id":"b","has_more":true}"#, None)
        .unwrap();
    assert_eq!(page.next, Some(Next::After("b".into())));
    let done = BatchApi::OpenAi
        .read_page(
            br#"{"object":"list","data":[{"id":"b"}],"last_id":"b","has_more":false}"#,
            None,
        )
        .unwrap();
    assert_eq!(done.next, None);
    let last = BatchApi::MistralJobs
        .read_page(br#"{"object":"list","data":[{"id":"j"}],"total":1}"#, None)
        .unwrap();
    assert_eq!(last.next, None);
    let full = json!({"object": "list", "data": vec![json!({"id": "j"}); 100]}).to_string();
    let full = BatchApi::MistralJobs
        .read_page(full.as_bytes(), Some(&Next::Page(3)))
        .unwrap();
    assert_eq!(full.next, Some(Next::Page(4)));
    const { assert!(FIND_PAGES >= 1) };
}

/// Groq's list (its batch guide, "Iterate Over All Batches"): no `has_more`, a
/// `paging.next_cursor` asked for again as `?cursor=`, encoded as one query value.
#[test]
fn groqs_list_pages_by_its_next_cursor_sent_encoded() {
    let page = BatchApi::OpenAi
        .read_page(
            br#"{"object":"list","data":[{"id":"batch_01jh6xa7reempvjyh6n3yst111","object":"batch","status":"completed"}],"paging":{"next_cursor":"cursor_eyJpZCI6ImJhdGNoIn0="}}"#,
            None,
        )
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
    let next = page.next.expect("a next page");
    assert_eq!(next, Next::Cursor("cursor_eyJpZCI6ImJhdGNoIn0=".into()));
    assert_eq!(
        BatchApi::OpenAi.list_path(Some(&next)),
        "/v1/batches?cursor=cursor_eyJpZCI6ImJhdGNoIn0%3D"
    );
    let last = BatchApi::OpenAi
        .read_page(br#"{"object":"list","data":[],"paging":{}}"#, None)
        .unwrap();
    assert_eq!(last.next, None);
    let odd = Next::After("a b/c+d".into());
    assert_eq!(
        BatchApi::OpenAi.list_path(Some(&odd)),
        "/v1/batches?limit=100&after=a%20b%2Fc%2Bd"
    );
}

/// Groq's batch object lists its `errors` bare, not under `data` (its batch guide's
/// completed example, and a failed one): read both ways, the line error named.
#[test]
fn groqs_bare_errors_list_is_read_like_openais() {
    let mut completed = openai_batch("completed");
    completed["errors"] = json!([{"code": "invalid_method",
        "message": "Invalid value: 'GET'. Supported values are: 'POST'", "param": "method", "line": 4}]);
    let done = status(BatchApi::OpenAi, completed);
    assert_eq!(done.phase, BatchPhase::Ended);
    assert!(
        done.failure.is_none(),
        "a completed batch ends line by line"
    );
    let mut failed = openai_batch("failed");
    failed["errors"] = json!([{"code": "invalid_json_line", "message": "not JSON", "line": 2}]);
    match status(BatchApi::OpenAi, failed).failure {
        Some(Error::ProviderRequest(e)) => {
            assert!(e.message.contains("invalid_json_line"), "{}", e.message);
            assert!(e.message.contains("line 2"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn caps_are_the_documented_ones() {
    let openai = BatchApi::OpenAi.caps();
    assert_eq!(
        (openai.max_requests, openai.max_bytes),
        (50_000, 209_715_200)
    );
    let mistral = BatchApi::MistralJobs.caps();
    assert_eq!(
        (mistral.max_requests, mistral.max_bytes),
        (100_000, 512_000_000)
    );
}

#[test]
fn the_multipart_body_carries_purpose_and_file_under_a_boundary_the_file_lacks() {
    let (content_type, body) = multipart("batch", "x.jsonl", b"{\"a\":1}\n");
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .expect("the boundary");
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with(&format!("--{boundary}\r\n")));
    assert!(text.contains("name=\"purpose\"\r\n\r\nbatch\r\n"));
    assert!(text.contains("name=\"file\"; filename=\"x.jsonl\"\r\n"));
    assert!(text.contains("\r\n\r\n{\"a\":1}\n\r\n"));
    assert!(text.ends_with(&format!("\r\n--{boundary}--\r\n")));

    // A file that holds the first boundary after a line break gets another.
    let sneaky = format!("\r\n--{boundary}\n");
    let (other, _) = multipart("batch", "x.jsonl", sneaky.as_bytes());
    assert_ne!(other, content_type);
}

#[test]
fn ids_are_one_path_segment_and_file_names_keep_plain_characters() {
    assert_eq!(segment("batch_abc-1.2").unwrap(), "batch_abc-1.2");
    for bad in ["", "../files", "a/b", "a?b=1", ".hidden", "a b"] {
        assert!(
            matches!(segment(bad), Err(Error::InvalidRequest { .. })),
            "{bad}"
        );
    }
    assert_eq!(file_name("run 1/ü-x"), "tollgate-run_1__-x.jsonl");
    assert_eq!(
        file_name(&"a".repeat(100)).len(),
        "tollgate-.jsonl".len() + 64
    );
}
