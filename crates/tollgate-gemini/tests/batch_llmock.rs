//! The batch transport against llmock 0.2.2 (`TOLLGATE_LLMOCK_URL`, Gemini under
//! `/gemini/v1beta`), whose batch endpoints take another create body than the real API
//! (`{"requests":[{"custom_id","request"}]}`; it rejects the real one) and answer in their
//! own shape (`dest.inlinedResponses[]` with `custom_id`, `JOB_STATE_*`): the model says
//! `options.batch_body = "llmock"`. The real API's shapes are tested against a local
//! server in `batch.rs`. llmock finishes a batch 3 s after it is created; without the
//! server the test says so and passes, unless `TOLLGATE_PEERS_REQUIRED` is set.

use std::time::Duration;

use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::batch::{BatchItem, BatchPhase, BatchTransport};
use tollgate::{Catalog, Conversation, Error, Models, SamplingParams};
use tollgate_gemini as _;
use tollgate_testkit::peers::{PEER_CREDENTIAL, url as peer};

/// llmock's batch model at `base`, speaking llmock's batch body.
async fn batch(base: &str) -> std::sync::Arc<dyn BatchTransport> {
    let entry = ModelEntry::new("flash", "gemini", "gemini-2.5-flash")
        .with_credential(PEER_CREDENTIAL)
        .with_output_tokens(200, 50)
        .with_limits(Limits {
            rpm: 6000,
            input_tpm: 100_000_000,
            ..Limits::default()
        })
        .with_option("base_url", format!("{base}/gemini"))
        .with_option("batch_body", "llmock");
    let models = Models::builder()
        .catalog(Catalog::builder().model(entry).build().unwrap())
        .credentials(MemoryCredentialStore::new().with(PEER_CREDENTIAL, "llmock-key"))
        .build()
        .unwrap();
    models.batch("flash").await.unwrap()
}

fn item(id: &str, text: &str) -> BatchItem {
    BatchItem {
        custom_id: id.into(),
        request: Conversation::new()
            .user(text)
            .request("flash", SamplingParams::new())
            .unwrap(),
    }
}

#[tokio::test]
async fn llmock_runs_a_batch_of_three_to_per_key_answers_and_cancels_another() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = batch(&base).await;
    let lines: Vec<Vec<u8>> = [
        item("first", "Tell me a joke."),
        item("second", "Why is the sky blue?"),
        item("third", "Name a colour."),
    ]
    .iter()
    .map(|i| batch.encode(i).unwrap())
    .collect();
    let handle = batch.submit(&lines, "llmock-run").await.unwrap();
    assert!(handle.id.starts_with("batches/"), "{handle:?}");

    let first = batch.status(&handle).await.unwrap();
    assert_eq!(first.phase, BatchPhase::Queued);
    // llmock ends a batch 3 s after creating it: poll every half second, 20 s at most.
    let mut status = first;
    for _ in 0..40 {
        if status.phase == BatchPhase::Ended {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        status = batch.status(&handle).await.unwrap();
    }
    assert_eq!(status.phase, BatchPhase::Ended);
    assert!(status.failure.is_none(), "{:?}", status.failure);
    assert_eq!(status.counts.succeeded, 3);

    let mut outcomes = batch.results(&handle).await.unwrap();
    outcomes.sort_by(|a, b| a.custom_id.cmp(&b.custom_id));
    let ids: Vec<&str> = outcomes.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(ids, ["first", "second", "third"]);
    for outcome in &outcomes {
        let answer = outcome.result.as_ref().unwrap();
        assert!(!answer.text().is_empty(), "{}", outcome.custom_id);
        assert!(answer.usage().input_tokens > 0, "{}", outcome.custom_id);
        assert!(answer.usage().output_tokens > 0, "{}", outcome.custom_id);
    }

    // A fresh batch, cancelled before it runs: ended, its requests unfinished.
    let line = batch.encode(&item("late", "Too late.")).unwrap();
    let cancelled = batch.submit(&[line], "llmock-cancel").await.unwrap();
    batch.cancel(&cancelled).await.unwrap();
    let status = batch.status(&cancelled).await.unwrap();
    assert_eq!(status.phase, BatchPhase::Ended);
    assert!(
        matches!(&status.failure, Some(Error::BatchLineUnfinished { batch_id, how })
            if *batch_id == cancelled.id && how == "was cancelled"),
        "{:?}",
        status.failure
    );
}
