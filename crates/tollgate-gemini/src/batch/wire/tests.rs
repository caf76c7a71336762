//! The wire format's unit tests: every state, both answer shapes, error entries, the
//! create bodies, batch names and the list.

use tollgate::provider::{ProviderError, StopReason};

use super::*;

const ID: &str = "batches/abc123";

fn answer(text: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 4,
                          "totalTokenCount": 16},
        "modelVersion": "gemini-2.5-flash",
    })
}

fn bytes(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The real API's finished batch: an `Operation` with the answers in `response`.
fn gemini_operation(state: &str, responses: Value) -> Value {
    json!({
        "name": ID,
        "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": "models/gemini-2.5-flash",
            "displayName": "run-1",
            "state": state,
            "batchStats": {"requestCount": "3", "successfulRequestCount": "2",
                           "failedRequestCount": "1"},
        },
        "done": true,
        "response": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
            "inlinedResponses": {"inlinedResponses": responses},
        },
    })
}

fn phase_of(state: &str) -> BatchPhase {
    let body = json!({"name": ID, "metadata": {"state": state}});
    decode_status(&bytes(&body), ID).expect("decodes").phase
}

#[test]
fn every_batch_state_in_either_spelling_maps_to_its_phase() {
    for prefix in ["BATCH_STATE_", "JOB_STATE_"] {
        let phase = |s: &str| phase_of(&format!("{prefix}{s}"));
        assert_eq!(phase("PENDING"), BatchPhase::Queued);
        assert_eq!(phase("RUNNING"), BatchPhase::Running);
        for ended in ["SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"] {
            assert_eq!(phase(ended), BatchPhase::Ended, "{prefix}{ended}");
        }
    }
    assert_eq!(phase_of("JOB_STATE_QUEUED"), BatchPhase::Queued);
    assert_eq!(phase_of("JOB_STATE_CANCELLING"), BatchPhase::Cancelling);
}

#[test]
fn an_unknown_state_is_running_until_the_operation_is_done() {
    assert_eq!(phase_of("BATCH_STATE_SOMETHING_NEW"), BatchPhase::Running);
    let done =
        json!({"name": ID, "metadata": {"state": "BATCH_STATE_SOMETHING_NEW"}, "done": true});
    let status = decode_status(&bytes(&done), ID).unwrap();
    assert_eq!(status.phase, BatchPhase::Ended);
}

#[test]
fn a_batch_without_a_state_is_malformed() {
    let err = decode_status(br#"{"name":"batches/abc123"}"#, ID).unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Malformed { .. })),
        "{err}"
    );
}

#[test]
fn a_running_batch_reads_its_int64_counts_and_has_no_failure() {
    let body = json!({"name": ID, "metadata": {"state": "BATCH_STATE_RUNNING",
        "batchStats": {"requestCount": "5", "successfulRequestCount": "2",
                       "failedRequestCount": 1, "pendingRequestCount": "2"}}});
    let status = decode_status(&bytes(&body), ID).unwrap();
    assert_eq!(
        status.counts,
        BatchCounts {
            total: 5,
            succeeded: 2,
            failed: 1
        }
    );
    assert!(status.failure.is_none());
}

#[test]
fn gemini_inline_responses_decode_with_the_live_decoder_under_their_keys() {
    let body = gemini_operation(
        "BATCH_STATE_SUCCEEDED",
        json!([
            {"response": answer("one"), "metadata": {"key": "a"}},
            {"response": answer("two"), "metadata": {"key": "b"}},
        ]),
    );
    let status = decode_status(&bytes(&body), ID).unwrap();
    assert_eq!(status.phase, BatchPhase::Ended);
    assert!(status.failure.is_none());
    let outcomes = decode_results(&bytes(&body), ID).unwrap();
    let texts: Vec<(String, String)> = outcomes
        .into_iter()
        .map(|o| (o.custom_id, o.result.expect("an answer").text()))
        .collect();
    assert_eq!(
        texts,
        [("a".into(), "one".into()), ("b".into(), "two".into())]
    );
    let live = codec::decode_response(&bytes(&answer("one"))).unwrap();
    let batch = decode_results(&bytes(&body), ID).unwrap().remove(0);
    let batch = batch.result.unwrap();
    assert_eq!(batch.usage(), live.usage());
    assert_eq!(batch.stop_reason(), StopReason::EndTurn);
}

#[test]
fn answers_under_metadata_output_are_read_where_the_sdk_reads_them() {
    let body = json!({"name": ID, "done": true, "metadata": {
        "state": "BATCH_STATE_SUCCEEDED",
        "output": {"inlinedResponses": {"inlinedResponses": [
            {"response": answer("x"), "metadata": {"key": "k"}}]}},
    }});
    let outcomes = decode_results(&bytes(&body), ID).unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].custom_id, "k");
}

#[test]
fn llmock_dest_inlined_responses_decode_under_their_custom_ids() {
    let body = json!({
        "name": ID, "metadata": {"state": "JOB_STATE_SUCCEEDED", "completedRequestCount": 2},
        "dest": {"inlinedResponses": [
            {"custom_id": "x", "response": answer("hello")},
            {"custom_id": "y", "response": answer("there")},
        ]},
    });
    let status = decode_status(&bytes(&body), ID).unwrap();
    assert_eq!(status.phase, BatchPhase::Ended);
    assert_eq!(
        status.counts,
        BatchCounts {
            total: 2,
            succeeded: 2,
            failed: 0
        }
    );
    let outcomes = decode_results(&bytes(&body), ID).unwrap();
    assert_eq!(outcomes[1].custom_id, "y");
    assert_eq!(outcomes[1].result.as_ref().unwrap().text(), "there");
}

#[test]
fn an_error_entry_is_classified_as_the_same_live_error_answer() {
    let quota = json!({"code": 8, "message": "slow down", "details": [
        {"@type": codec::RETRY_INFO, "retryDelay": "7s"}]});
    let invalid = json!({"code": 3, "message": "Please use a valid role: user, model."});
    let body = gemini_operation(
        "BATCH_STATE_SUCCEEDED",
        json!([
            {"error": quota, "metadata": {"key": "q"}},
            {"error": invalid, "metadata": {"key": "i"}},
            {"error": {"code": 1, "message": "cancelled"}, "metadata": {"key": "c"}},
            {"metadata": {"key": "empty"}},
            {"response": answer("unkeyed")},
        ]),
    );
    let outcomes = decode_results(&bytes(&body), ID).unwrap();
    let keys: Vec<&str> = outcomes.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(
        keys,
        ["q", "i", "c", "empty"],
        "the unkeyed answer is left out"
    );
    let err = |i: usize| outcomes[i].result.as_ref().unwrap_err();
    assert!(
        matches!(err(0), Error::Provider(ProviderError::RateLimited { retry_after: Some(d) })
            if d.as_secs() == 7),
        "{}",
        err(0)
    );
    assert!(
        matches!(err(1), Error::ProviderRequest(e) if e.status == 400 && e.message.contains("INVALID_ARGUMENT")),
        "{}",
        err(1)
    );
    assert!(
        matches!(err(2), Error::BatchLineUnfinished { batch_id, how } if batch_id == ID && how == "was cancelled"),
        "{}",
        err(2)
    );
    assert!(
        matches!(err(3), Error::Provider(ProviderError::Malformed { .. })),
        "{}",
        err(3)
    );
}

#[test]
fn a_per_day_quota_in_an_entry_is_quota_exhausted_as_live() {
    let status = json!({"code": 8, "status": "RESOURCE_EXHAUSTED", "message": "m",
        "details": [{"@type": codec::QUOTA_FAILURE,
                     "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel"}]}]});
    let err = status_error(&status, ID);
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
}

#[test]
fn a_failed_batch_fails_with_its_error_classified() {
    let queue = json!({"name": ID, "done": true,
        "metadata": {"state": "BATCH_STATE_FAILED"},
        "error": {"code": 8, "message": "enqueued tokens over the limit"}});
    let status = decode_status(&bytes(&queue), ID).unwrap();
    assert_eq!(status.phase, BatchPhase::Ended);
    assert!(
        matches!(
            status.failure,
            Some(Error::Provider(ProviderError::RateLimited { .. }))
        ),
        "{:?}",
        status.failure
    );
    let invalid = json!({"name": ID, "done": true,
        "metadata": {"state": "BATCH_STATE_FAILED"},
        "error": {"code": 3, "message": "bad request"}});
    let status = decode_status(&bytes(&invalid), ID).unwrap();
    assert!(
        matches!(status.failure, Some(Error::ProviderRequest(ref e)) if e.status == 400),
        "{:?}",
        status.failure
    );
    let silent = json!({"name": ID, "metadata": {"state": "BATCH_STATE_FAILED"}});
    let status = decode_status(&bytes(&silent), ID).unwrap();
    assert!(
        matches!(
            status.failure,
            Some(Error::Provider(ProviderError::Server { status: 500, .. }))
        ),
        "{:?}",
        status.failure
    );
}

#[test]
fn an_expired_or_cancelled_batch_without_answers_fails_as_unfinished() {
    for (state, how) in [
        ("BATCH_STATE_EXPIRED", "expired"),
        ("BATCH_STATE_CANCELLED", "was cancelled"),
        ("JOB_STATE_CANCELLED", "was cancelled"),
    ] {
        let body = json!({"name": ID, "metadata": {"state": state},
                          "dest": {"inlinedResponses": []}});
        let status = decode_status(&bytes(&body), ID).unwrap();
        assert_eq!(status.phase, BatchPhase::Ended);
        assert!(
            matches!(&status.failure, Some(Error::BatchLineUnfinished { batch_id, how: h })
                if batch_id == ID && h == how),
            "{state}: {:?}",
            status.failure
        );
    }
}

#[test]
fn a_cancelled_batch_with_answers_has_no_failure_so_its_answers_are_collected() {
    let body = gemini_operation(
        "BATCH_STATE_CANCELLED",
        json!([{"response": answer("done before"), "metadata": {"key": "a"}}]),
    );
    let status = decode_status(&bytes(&body), ID).unwrap();
    assert!(status.failure.is_none(), "{:?}", status.failure);
}

#[test]
fn the_create_bodies_are_the_gemini_api_s_and_llmock_s() {
    let request = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let real = entry(BatchBody::Gemini, "r1", request.clone());
    assert_eq!(
        create_body(BatchBody::Gemini, vec![real], "run-1"),
        json!({"batch": {"displayName": "run-1", "inputConfig": {"requests": {"requests": [
            {"request": request, "metadata": {"key": "r1"}}]}}}})
    );
    let mock = entry(BatchBody::Llmock, "r1", request.clone());
    assert_eq!(
        create_body(BatchBody::Llmock, vec![mock], "run-1"),
        json!({"requests": [{"custom_id": "r1", "request": request}]})
    );
}

#[test]
fn a_batch_id_goes_into_the_path_only_as_a_batch_name() {
    assert_eq!(
        batch_path("batches/a-b_1").unwrap(),
        "/v1beta/batches/a-b_1"
    );
    assert_eq!(batch_path("a1").unwrap(), "/v1beta/batches/a1");
    for bad in [
        "",
        "batches/",
        "batches/../models",
        "batches/a?b",
        "batches/a/b",
    ] {
        assert!(
            matches!(batch_path(bad), Err(Error::InvalidRequest { .. })),
            "{bad}"
        );
    }
    assert!(decode_created(br#"{"name":"batches/../x"}"#).is_err());
    assert_eq!(
        decode_created(br#"{"name":"batches/z9","metadata":{}}"#).unwrap(),
        "batches/z9"
    );
}

#[test]
fn the_list_is_searched_for_the_display_name_across_pages() {
    let page = json!({"operations": [
        {"name": "batches/other", "metadata": {"displayName": "run-0"}},
        {"name": "batches/mine", "metadata": {"displayName": "run-1"}},
    ]});
    assert_eq!(
        find_in_page(&bytes(&page), "run-1").unwrap(),
        Page::Found("batches/mine".into())
    );
    let next = json!({"operations": [], "nextPageToken": "t2"});
    assert_eq!(
        find_in_page(&bytes(&next), "run-1").unwrap(),
        Page::Next("t2".into())
    );
    let last = json!({"batches": [{"name": "batches/x"}]});
    assert_eq!(find_in_page(&bytes(&last), "run-1").unwrap(), Page::End);
}

#[test]
fn a_list_page_token_is_one_percent_encoded_query_value() {
    assert_eq!(list_path("100", None), "/v1beta/batches?pageSize=100");
    assert_eq!(
        list_path("100", Some("page 2/+&x=é~")),
        "/v1beta/batches?pageSize=100&pageToken=page%202%2F%2B%26x%3D%C3%A9~"
    );
}
