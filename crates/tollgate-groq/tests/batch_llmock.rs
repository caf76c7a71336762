//! The `groq` batch transport: Groq's Batch API, OpenAI's under `/openai/v1`, as llmock
//! (PyPI llmock==0.2.2, `/groq/openai/v1/files` and `/groq/openai/v1/batches`) serves
//! it, started on 127.0.0.1 by `scripts/peers.sh`; the round trips are
//! `tollgate_openai::testkit::batch`'s (llmock ends a batch 3 s after it is created).
//!
//! The server's URL comes from `TOLLGATE_LLMOCK_URL`. Without it the llmock tests say
//! so and pass, unless `TOLLGATE_PEERS_REQUIRED` is set, where a missing server fails
//! them. llmock's batch answers are text whatever the request (it runs no tools in
//! batches): the tool line's request is checked in the uploaded file. Groq's own list
//! paging (`paging.next_cursor`) and bare `errors` list, which llmock does not send,
//! are `tollgate-openai`'s unit tests, on the shapes of Groq's batch guide.

use std::sync::Arc;

use tollgate::catalog::ModelEntry;
use tollgate::provider::batch::BatchTransport;
use tollgate_groq::{GROQ_BATCH_CAPS, PROVIDER};
use tollgate_openai::preset::BatchApi;
use tollgate_openai::testkit::batch::{llmock_batch_cancel, llmock_batch_round_trip};
use tollgate_testkit::peers::url as peer;

/// The model name this test's requests carry.
const MODEL: &str = "llama-3.3-70b-tollgate-batch";

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("chat", "groq", MODEL).with_option("base_url", base_url)
}

async fn transport(entry: ModelEntry) -> Arc<dyn BatchTransport> {
    tollgate_testkit::peers::llmock_models(PROVIDER, entry)
        .batch("chat")
        .await
        .expect("groq has a batch API")
}

#[tokio::test]
async fn llmock_groq_batch_submits_polls_collects_and_is_found_by_label() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = transport(entry(&format!("{base}/groq/openai"))).await;
    let files = format!("{base}/groq/openai/v1/files");
    let sent = llmock_batch_round_trip(batch.as_ref(), &files, "groq-batch").await;
    // OpenAI's line: the url is the chat path under the base URL (Groq's guide:
    // `/v1/chat/completions`, its `/openai` prefix in the base URL).
    for line in &sent {
        assert_eq!(line["method"], "POST", "{line}");
        assert_eq!(line["url"], "/v1/chat/completions", "{line}");
        assert_eq!(line["body"]["model"], MODEL, "{line}");
        assert!(
            line["body"].get("max_completion_tokens").is_some(),
            "{line}"
        );
    }
}

#[tokio::test]
async fn llmock_groq_batch_cancelled_when_fresh_ends_cancelled() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = transport(entry(&format!("{base}/groq/openai"))).await;
    llmock_batch_cancel(batch.as_ref(), "groq-cancel").await;
}

/// Without a server: the preset names OpenAI's Batch API with Groq's own caps (50,000
/// lines, a 100 MB file), which the catalog's terms lower and never raise.
#[tokio::test]
async fn groq_batches_are_openais_api_within_groqs_caps_lowered_by_the_catalog() {
    assert_eq!(PROVIDER.preset().dialect.batch, Some(BatchApi::OpenAi));
    let own = transport(entry("http://127.0.0.1:9")).await.caps();
    assert_eq!(own, GROQ_BATCH_CAPS);
    assert_eq!((own.max_requests, own.max_bytes), (50_000, 100_000_000));
    assert!(own.max_bytes < BatchApi::OpenAi.caps().max_bytes);
    let mut lowered = entry("http://127.0.0.1:9");
    lowered.batch.max_bytes = Some(1_000_000);
    lowered.batch.max_requests = Some(1_000_000);
    let caps = transport(lowered).await.caps();
    assert_eq!((caps.max_requests, caps.max_bytes), (50_000, 1_000_000));
}
