//! The provider contract kit (`tollgate-testkit`) against xAI's wire format: OpenAI's
//! answers and streams, with error bodies in the shape xAI's API writes them,
//! `{"code": "…", "error": "…"}` (llmock's `{"error": {…}}` shape is OpenAI's, covered
//! by `tests/xai.rs`).

use serde_json::{Value, json};
use tollgate_openai::testkit::OpenAiWire;

/// xAI's error body: the code (a gRPC status text on the real API; the kit's type or
/// code here) and the message.
fn xai_error_body(kind: &str, code: Value, message: &str) -> Value {
    let code = code.as_str().unwrap_or(kind).to_owned();
    json!({"code": code, "error": message})
}

tollgate_testkit::provider_contract_tests!(
    OpenAiWire { error_body: xai_error_body, ..OpenAiWire::new(tollgate_xai::PROVIDER) };
    skip {
        rate_limit_headers_set_the_limiter_buckets:
            "xAI documents no rate-limit headers: none are read",
        a_context_window_stop_is_typed_and_names_the_model:
            "xAI has no full-window stop reason",
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each:
            "xAI has no embeddings models",
        a_failed_embeddings_request_is_resent_alone: "xAI has no embeddings models",
        an_embeddings_request_carries_the_purpose_and_the_width: "xAI has no embeddings models",
        the_secret_never_shows_in_embeddings_errors: "xAI has no embeddings models",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (xAI has none); the overflow error is checked",
    }
);
