//! The conformance tier of the `mistral` batch transport: Mistral's batch jobs as
//! llmock (PyPI llmock==0.2.2, `/mistral/v1/files` and `/mistral/v1/batch/jobs`) serves
//! them, started on 127.0.0.1 by `scripts/peers.sh`; the round trips are
//! `tollgate_openai::testkit::batch`'s (llmock ends a job 3 s after it is created).
//!
//! The server's URL comes from `TOLLGATE_LLMOCK_URL`. Without it the llmock tests say
//! so and pass, unless `TOLLGATE_PEERS_REQUIRED` is set, where a missing server fails
//! them. llmock's batch answers are text whatever the request (it runs no tools in
//! batches): the tool line's request is checked in the uploaded file, and a tool call's
//! decoding in `tollgate-openai`'s unit tests (the same results-line reader).

use std::sync::Arc;

use serde_json::Value;
use tollgate::catalog::ModelEntry;
use tollgate::provider::batch::{BatchItem, BatchTransport};
use tollgate::{LlmRequest, Message, SamplingParams};
use tollgate_mistral::PROVIDER;
use tollgate_openai::testkit::batch::{llmock_batch_cancel, llmock_batch_round_trip};
use tollgate_testkit::peers::url as peer;

/// The model name this test's requests carry.
const MODEL: &str = "mistral-small-tollgate-batch";

async fn transport(base: &str) -> Arc<dyn BatchTransport> {
    let entry = ModelEntry::new("chat", "mistral", MODEL)
        .with_option("base_url", format!("{base}/mistral"));
    tollgate_testkit::peers::llmock_models(PROVIDER, entry)
        .batch("chat")
        .await
        .expect("mistral has a batch API")
}

#[tokio::test]
async fn llmock_mistral_batch_job_submits_polls_collects_and_is_found_by_label() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = transport(&base).await;
    let files = format!("{base}/mistral/v1/files");
    let sent = llmock_batch_round_trip(batch.as_ref(), &files, "mistral-batch").await;
    // Mistral's line is `{custom_id, body}`: the job names the endpoint and model.
    for line in &sent {
        assert!(line.get("url").is_none(), "{line}");
        assert_eq!(line["body"]["model"], MODEL, "{line}");
    }
}

#[tokio::test]
async fn llmock_mistral_batch_job_cancelled_when_fresh_ends_cancelled() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    llmock_batch_cancel(transport(&base).await.as_ref(), "mistral-cancel").await;
}

/// Without a server: the preset names Mistral's batch jobs, with their caps, and a line
/// is `{custom_id, body}` whose body went through the live request hook (the seed as
/// `random_seed`).
#[tokio::test]
async fn mistral_batch_lines_are_custom_id_and_the_live_body_within_mistrals_caps() {
    let batch = transport("http://127.0.0.1:9").await;
    let caps = batch.caps();
    assert_eq!((caps.max_requests, caps.max_bytes), (100_000, 512_000_000));
    let request = LlmRequest::new(
        "chat",
        vec![Message::user("hi")],
        vec![],
        SamplingParams::new().with_seed(7),
    )
    .unwrap();
    let bytes = batch
        .encode(&BatchItem {
            custom_id: "s".into(),
            request,
        })
        .unwrap();
    let line: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(line["custom_id"], "s");
    assert_eq!(line["body"]["random_seed"], 7);
    assert!(line["body"].get("seed").is_none());
    assert_eq!(line.as_object().unwrap().len(), 2, "{line}");
}
