//! The Message Batches transport against llmock's `/anthropic/v1/messages/batches`
//! (PyPI llmock==0.2.2), started on 127.0.0.1 by `scripts/peers.sh`: a batch submitted,
//! polled to its end (llmock ends a batch 3 s after it is made, so the test sleeps for
//! real between polls), its results collected; and a batch cancelled.
//!
//! The server's URL comes from `TOLLGATE_LLMOCK_URL`. Without it the tests say so and
//! pass, unless `TOLLGATE_PEERS_REQUIRED` is set, where a missing server fails them.
//!
//! What llmock does not do as Anthropic does, and so is checked in `tests/batch_http.rs`
//! on wiremock instead: its batch answers are always text (a tool definition is sent
//! but never answered with a `tool_use`: its batch path reads no tools and no scripted
//! behaviours), its `results_url` is a path (`/anthropic/v1/…`), and a cancelled batch
//! ends at once with an empty results file (Anthropic's lists each line `canceled`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tollgate::catalog::ModelEntry;
use tollgate::provider::batch::{BatchHandle, BatchItem, BatchPhase, BatchStatus, BatchTransport};
use tollgate::{Error, Json, LlmRequest, Message, SamplingParams, ToolDefinition};
use tollgate_anthropic::AnthropicProvider;
use tollgate_testkit::peers::url as peer;

/// The model name this test's requests carry.
const MODEL: &str = "claude-tollgate-batch-conformance";

/// Polls at most this many times, half a second apart (20 s in all).
const POLLS: u32 = 40;

async fn batch_api(base: &str) -> Arc<dyn BatchTransport> {
    let entry = ModelEntry::new("chat", "anthropic-direct", MODEL)
        .with_option("base_url", format!("{base}/anthropic"));
    tollgate_testkit::peers::llmock_models(AnthropicProvider, entry)
        .batch("chat")
        .await
        .expect("the anthropic batch API")
}

fn item(id: &str, messages: Vec<Message>, tools: Vec<ToolDefinition>) -> BatchItem {
    BatchItem {
        custom_id: id.into(),
        request: LlmRequest::new("chat", messages, tools, SamplingParams::new()).unwrap(),
    }
}

fn weather() -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

/// Polls `handle` until it ends (a real sleep between polls: llmock's clock is real).
async fn until_ended(batch: &dyn BatchTransport, handle: &BatchHandle) -> BatchStatus {
    for _ in 0..POLLS {
        let status = batch.status(handle).await.expect("a status");
        if status.phase == BatchPhase::Ended {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("batch {} did not end within {POLLS} polls", handle.id);
}

#[tokio::test]
async fn a_batch_of_three_runs_to_its_end_and_each_answer_comes_back_under_its_id() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = batch_api(&base).await;
    // Prompts of different lengths, so each line's input count tells them apart
    // (llmock counts a quarter token a character of the messages and the system).
    let asks = [
        ("plain-1", None, "What is the capital of France?"),
        (
            "tool-2",
            None,
            "What is the weather in Paris today, and should I take an umbrella?",
        ),
        (
            "system-3",
            Some("Answer in one word."),
            "Name a primary colour.",
        ),
    ];
    let mut lines = Vec::new();
    for (id, system, user) in asks {
        let mut messages = Vec::new();
        messages.extend(system.map(Message::system));
        messages.push(Message::user(user));
        let tools = if id == "tool-2" {
            vec![weather()]
        } else {
            vec![]
        };
        lines.push(batch.encode(&item(id, messages, tools)).expect("encodes"));
    }
    let tool_line: serde_json::Value = serde_json::from_slice(&lines[1]).expect("JSON");
    assert_eq!(tool_line["params"]["tools"][0]["name"], "get_weather");
    let handle = batch
        .submit(&lines, "tollgate-batch-conformance")
        .await
        .expect("submitted");
    assert!(handle.id.starts_with("msgbatch_"), "{handle:?}");

    let status = until_ended(batch.as_ref(), &handle).await;
    assert_eq!(
        (
            status.counts.total,
            status.counts.succeeded,
            status.counts.failed
        ),
        (3, 3, 0)
    );
    assert!(status.failure.is_none());

    let outcomes = batch.results(&handle).await.expect("results");
    assert_eq!(outcomes.len(), 3);
    for (id, system, user) in asks {
        let outcome = outcomes
            .iter()
            .find(|o| o.custom_id == id)
            .unwrap_or_else(|| panic!("no result for {id}"));
        let answer = outcome.result.as_ref().expect("an answer");
        let text = answer.text();
        assert!(text.contains(MODEL), "{id}: {text}");
        let usage = answer.usage();
        let input = (user.len() / 4 + system.map_or(0, |s| s.len() / 4)) as u64;
        assert_eq!(usage.input_tokens, input, "{id}");
        assert_eq!(usage.output_tokens, (text.len() / 4) as u64, "{id}");
        assert_eq!(answer.model(), MODEL);
    }
}

#[tokio::test]
async fn a_cancelled_batch_ends_with_its_lines_cancelled() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let batch = batch_api(&base).await;
    let lines: Vec<Vec<u8>> = ["c-1", "c-2"]
        .into_iter()
        .map(|id| {
            batch
                .encode(&item(id, vec![Message::user("Count to three.")], vec![]))
                .expect("encodes")
        })
        .collect();
    let handle = batch.submit(&lines, "cancel-me").await.expect("submitted");
    batch.cancel(&handle).await.expect("cancelled");

    let status = until_ended(batch.as_ref(), &handle).await;
    assert_eq!(
        (
            status.counts.total,
            status.counts.succeeded,
            status.counts.failed
        ),
        (2, 0, 2)
    );
    // llmock's file is empty; Anthropic's lists each line `canceled`.
    for outcome in batch.results(&handle).await.expect("results") {
        assert!(
            matches!(&outcome.result, Err(Error::BatchLineUnfinished { how, .. }) if how == "was cancelled"),
            "{outcome:?}"
        );
    }
}
