//! A batch line answered through the pipeline by the scripted `fake` provider, and the
//! output line written for it read back.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::watch;
use tollgate::catalog::ModelEntry;
use tollgate::limit::Priority;
use tollgate::{Block, Catalog, EmbeddingPurpose, Json, Models, StopReason};
use tollgate_fake::{FakeProvider, FakeReply};

use super::LineWriter;
use crate::input::parse_line;
use crate::record::CliRecorder;
use crate::run::request::{Shared, one};

/// Runs the batch line `text` on model `m`, which `fake` answers, and returns the
/// output line written for it.
async fn answered_line(fake: &FakeProvider, text: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    let recorder = Arc::new(CliRecorder::default());
    let catalog = Catalog::builder()
        .model(ModelEntry::new("m", "fake", "fake-chat-1").with_output_tokens(100, 50))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .provider(fake.clone())
        .recorder(recorder.clone())
        .build()
        .unwrap();
    let shared = Shared {
        models,
        model_id: "m".into(),
        fallback: false,
        retries: 0,
        priority: Priority::Batch,
        purpose: EmbeddingPurpose::Document,
        cap: None,
        preadmit: false,
        lines: LineWriter {
            model_id: "m".into(),
            recorder,
            out: Mutex::new(crate::output::open_append(&path).unwrap()),
            tally: Arc::default(),
            next_id: AtomicU64::new(0),
        },
    };
    let item = parse_line(1, text, "m").unwrap().unwrap();
    let (_stop_tx, stop) = watch::channel(0u8);
    assert!(one(&shared, item, stop).await, "the request was sent");
    let written = std::fs::read_to_string(&path).unwrap();
    let mut lines = written.lines();
    let line = serde_json::from_str(lines.next().expect("a line written")).unwrap();
    assert_eq!(lines.next(), None, "one line per request");
    line
}

#[tokio::test(start_paused = true)]
async fn a_batch_answer_with_a_tool_call_writes_its_tool_calls() {
    let fake = FakeProvider::new();
    fake.reply(
        "m",
        FakeReply::blocks(vec![Block::ToolUse {
            id: "call_1".into(),
            name: "get_weather".into(),
            input: Json::new(json!({"city": "Paris"})),
            cache: None,
        }])
        .with_stop(StopReason::ToolUse),
    );
    let batch_line = json!({
        "custom_id": "w1", "method": "POST", "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "Weather in Paris?"}]},
    });
    let line = answered_line(&fake, &batch_line.to_string()).await;
    assert_eq!(line["error"], Value::Null, "{line}");
    let body = &line["response"]["body"];
    assert_eq!(body["id"], line["response"]["request_id"], "{body}");
    assert_eq!(body["object"], "chat.completion");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "call_1", "{body}");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(line["tollgate"]["model"], "m");
}
