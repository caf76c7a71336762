//! The batch transport's llmock round trips, which every OpenAI-like provider crate
//! with a batch API runs against its llmock prefix: three lines (one offering a tool)
//! submitted, found by their label, polled until ended (llmock ends a batch 3 s after it
//! is created; real sleeps, [`PATIENCE`] at most), collected and decoded; and a fresh
//! batch cancelled. Each takes the crate's transport and where llmock serves its files.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use tollgate::provider::batch::{BatchHandle, BatchItem, BatchPhase, BatchStatus, BatchTransport};
use tollgate::provider::{Error, Json, LlmRequest, Message, SamplingParams, ToolDefinition, clock};

/// The most a round trip waits for a batch to end.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A label no other run used (llmock is shared, and keeps its batches while it runs).
pub fn unique_label(what: &str) -> String {
    let nanos = clock::wall_now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{what}-{}-{nanos}", std::process::id())
}

/// The tool the round trip's third line offers.
pub fn weather_tool() -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

/// A batch item of catalog model `chat`: `text` asked, `tools` offered.
pub fn item(id: &str, text: &str, tools: Vec<ToolDefinition>) -> BatchItem {
    let request = LlmRequest::new(
        "chat",
        vec![Message::user(text)],
        tools,
        SamplingParams::new(),
    )
    .expect("a batch test's request");
    BatchItem {
        custom_id: id.into(),
        request,
    }
}

/// Polls `handle` until it ends, sleeping (real time) between polls; panics after
/// [`PATIENCE`].
pub async fn ended(batch: &dyn BatchTransport, handle: &BatchHandle) -> BatchStatus {
    let step = Duration::from_millis(250);
    for _ in 0..PATIENCE.as_millis() / step.as_millis() {
        let status = batch.status(handle).await.expect("a batch status");
        if status.phase == BatchPhase::Ended {
            return status;
        }
        tokio::time::sleep(step).await;
    }
    panic!("batch {} did not end within {PATIENCE:?}", handle.id);
}

/// Submits `greeting`, `question` and `tool` (offering [`weather_tool`]) under a fresh
/// label (`what` and a unique tail), finds the batch by it (and nothing by another),
/// waits until it ends without failing, and checks each answer decodes with text and
/// usage. Returns the uploaded lines as llmock keeps them, read at
/// `{files_url}/{file}/content`, for the caller's checks of its own line shape.
pub async fn llmock_batch_round_trip(
    batch: &dyn BatchTransport,
    files_url: &str,
    what: &str,
) -> Vec<Value> {
    let items = [
        item("greeting", "hello there", vec![]),
        item("question", "how is the sea today?", vec![]),
        item("tool", "weather in Paris?", vec![weather_tool()]),
    ];
    let lines: Vec<Vec<u8>> = items
        .iter()
        .map(|i| batch.encode(i).expect("an encoded line"))
        .collect();
    let label = unique_label(what);
    let handle = batch
        .submit(&lines, &label)
        .await
        .expect("a submitted batch");

    // A run that lost its submit answer finds the batch by its label.
    assert_eq!(
        batch.find(&label).await.expect("a list"),
        Some(handle.clone())
    );
    let other = format!("{label}-never");
    assert_eq!(batch.find(&other).await.expect("a list"), None);

    let file = handle.input_file.as_deref().expect("an input file");
    let sent = uploaded(&format!("{files_url}/{file}/content")).await;
    assert_eq!(sent.len(), 3, "{sent:?}");
    let tool_line = sent
        .iter()
        .find(|l| l["custom_id"] == "tool")
        .expect("the tool line");
    assert_eq!(
        tool_line["body"]["tools"][0]["function"]["name"],
        "get_weather"
    );
    assert!(tool_line["body"].get("stream").is_none(), "{tool_line}");

    let status = ended(batch, &handle).await;
    assert!(status.failure.is_none(), "{:?}", status.failure);
    assert_eq!((status.counts.total, status.counts.succeeded), (3, 3));

    let mut outcomes = batch.results(&handle).await.expect("the results");
    outcomes.sort_by(|a, b| a.custom_id.cmp(&b.custom_id));
    let ids: Vec<&str> = outcomes.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(ids, ["greeting", "question", "tool"]);
    for outcome in &outcomes {
        let answer = outcome.result.as_ref().expect("an answer");
        assert!(!answer.text().is_empty(), "{answer:?}");
        assert!(answer.usage().input_tokens > 0, "{answer:?}");
        assert!(answer.usage().output_tokens > 0, "{answer:?}");
    }
    sent
}

/// Submits one line under a fresh label, cancels the batch at once, and checks that it
/// ends without failing, with nothing to collect, and that cancelling it again is
/// refused as a request error (llmock's 400 for an ended batch).
pub async fn llmock_batch_cancel(batch: &dyn BatchTransport, what: &str) {
    let line = batch
        .encode(&item("only", "hello", vec![]))
        .expect("a line");
    let handle = batch
        .submit(&[line], &unique_label(what))
        .await
        .expect("a submitted batch");
    batch.cancel(&handle).await.expect("a cancel");
    let status = ended(batch, &handle).await;
    assert!(status.failure.is_none(), "{:?}", status.failure);
    assert_eq!(status.counts.succeeded, 0);
    assert!(batch.results(&handle).await.expect("results").is_empty());
    assert!(matches!(
        batch.cancel(&handle).await.unwrap_err(),
        Error::ProviderRequest(e) if e.status == 400
    ));
}

/// The lines of an uploaded file, as the server keeps them.
async fn uploaded(url: &str) -> Vec<Value> {
    let text = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
        .get(url)
        .send()
        .await
        .expect("llmock answers")
        .text()
        .await
        .expect("the file");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
