//! The conformance tier of the batch transport: OpenAI's Batch API as llmock
//! (PyPI llmock==0.2.2, `/v1/files` and `/v1/batches`) serves it, started on 127.0.0.1
//! by `scripts/peers.sh`; the round trips are `tollgate_openai::testkit::batch`'s.
//!
//! The server's URL comes from `TOLLGATE_LLMOCK_URL`. Without it the tests say so and
//! pass, unless `TOLLGATE_PEERS_REQUIRED` is set, where a missing server fails them.
//! llmock's batch answers are text whatever the request (it runs no tools in batches):
//! the tool line's request is checked in the uploaded file, and a tool call's decoding
//! in the crate's unit tests, on the reference's result line. Groq's batches, OpenAI's
//! API under Groq's base URL, are `tollgate-groq`'s `tests/batch_llmock.rs`.

use std::sync::Arc;

use tollgate::catalog::ModelEntry;
use tollgate::provider::batch::BatchTransport;
use tollgate_openai::OpenAiProvider;
use tollgate_openai::testkit::batch::{llmock_batch_cancel, llmock_batch_round_trip};
use tollgate_testkit::peers::url as peer;

/// The model name this test's requests carry.
const MODEL: &str = "gpt-4o-mini-tollgate-batch";

async fn transport(base: &str) -> Arc<dyn BatchTransport> {
    let entry = ModelEntry::new("chat", "openai", MODEL).with_option("base_url", base);
    tollgate_testkit::peers::llmock_models(OpenAiProvider::OPENAI, entry)
        .batch("chat")
        .await
        .expect("openai has a batch API")
}

#[tokio::test]
async fn llmock_openai_batch_submits_polls_collects_and_is_found_by_label() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = transport(&base).await;
    let files = format!("{base}/v1/files");
    let sent = llmock_batch_round_trip(batch.as_ref(), &files, "openai-batch").await;
    for line in &sent {
        assert_eq!(line["method"], "POST", "{line}");
        assert_eq!(line["url"], "/v1/chat/completions", "{line}");
        assert_eq!(line["body"]["model"], MODEL, "{line}");
    }
}

#[tokio::test]
async fn llmock_openai_batch_cancelled_when_fresh_ends_cancelled() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    llmock_batch_cancel(transport(&base).await.as_ref(), "openai-cancel").await;
}
