//! Tool calls: a whole answer's call decoded with its id, name and input (a
//! [`tollgate::Json`] object) and the tool-use stop; a streamed one in
//! `ToolUseDelta`s whose `index` is the call's block in the completed answer, the first
//! carrying the id and name, the fragments of `input_json` making the input.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use tollgate::{
    Block, Conversation, Json, LlmClient, LlmRequest, SamplingParams, StopReason, StreamEvent,
    ToolDefinition,
};

use super::super::harness::{Kit, MODEL, USAGE};
use super::super::outcome::Checked;
use super::super::script::{WireScript, WireToolCall};
use super::super::server::{End, Reply};

const NO_TOOLS: &str = "the script's `tool_call` / `tool_call_stream` is `None`: the provider's codec has no tool calls";

/// The text the model says before calling.
const TEXT: &str = "Let me look that up.";

fn call() -> WireToolCall {
    WireToolCall {
        id: "call_kit_1".into(),
        name: "get_weather".into(),
        input: json!({"city": "Paris", "days": 3, "units": {"temperature": "celsius"}}),
    }
}

/// The request: the question, and the tool the model may call.
fn tool_request() -> LlmRequest {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    Conversation::new()
        .with_tool(ToolDefinition {
            defer_loading: false,
            cache: None,
            name: call().name,
            description: "The weather in a city.".into(),
            input_schema: Json::new(schema),
            strict: None,
            native: None,
        })
        .user("What is the weather in Paris?")
        .request(MODEL, SamplingParams::new())
        .expect("a valid request")
}

/// A kit whose server answers `reply`, and the chat client of its model.
async fn answering(script: &dyn WireScript, reply: Reply) -> (Kit<'_>, Arc<dyn LlmClient>) {
    let kit = Kit::new(script).await;
    kit.server.only(reply);
    let chat = kit.models.chat(MODEL).await.expect("client");
    (kit, chat)
}

/// The answer's tool-use block's position, after checking it is the kit's call.
fn assert_the_call(content: &[Block]) -> usize {
    let expected = call();
    let (at, block) = content
        .iter()
        .enumerate()
        .find(|(_, b)| matches!(b, Block::ToolUse { .. }))
        .unwrap_or_else(|| panic!("the answer holds a tool call: {content:?}"));
    let Block::ToolUse {
        id, name, input, ..
    } = block
    else {
        unreachable!("found as a tool use");
    };
    assert_eq!(
        (id.as_str(), name.as_str()),
        (expected.id.as_str(), expected.name.as_str())
    );
    assert_eq!(
        *input,
        Json::new(expected.input),
        "the input, as a JSON object"
    );
    at
}

/// A whole answer holding text and a tool call is decoded: the text, one
/// [`Block::ToolUse`] with the call's id, name and input, the tool-use stop, the usage.
pub async fn a_tool_call_is_decoded_whole_with_its_id_name_and_input(
    script: &dyn WireScript,
) -> Checked {
    let Some(reply) = script.tool_call(TEXT, &call(), USAGE) else {
        return Checked::skipped(NO_TOOLS);
    };
    let (_kit, chat) = answering(script, reply).await;
    let answer = chat
        .single_response(&tool_request())
        .await
        .unwrap_or_else(|e| panic!("a tool call failed: {e}"));
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert_eq!(answer.text(), TEXT);
    assert_the_call(answer.blocks());
    let usage = answer.usage();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (USAGE.input, USAGE.output)
    );
    Checked::Passed
}

/// A streamed tool call reaches the reader as `ToolUseDelta`s whose `index` is the
/// position of the call's block in the completed answer (text deltas keep their own
/// block's); the first delta carries the id and name, the others none; the `input_json`
/// fragments, joined, are the input. The completed answer holds the call and stops for
/// the tool.
pub async fn a_streamed_tool_call_arrives_in_deltas_indexed_by_its_block(
    script: &dyn WireScript,
) -> Checked {
    let Some(stream) = script.tool_call_stream(TEXT, &call(), USAGE) else {
        return Checked::skipped(NO_TOOLS);
    };
    let reply = Reply::frames(&stream.content_type, stream.frames, End::Clean);
    let (_kit, chat) = answering(script, reply).await;
    let events: Vec<StreamEvent> = chat
        .stream_response(&tool_request())
        .await
        .unwrap_or_else(|e| panic!("the stream failed: {e}"))
        .map(|e| e.unwrap_or_else(|e| panic!("the stream failed: {e}")))
        .collect()
        .await;
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("the last event is the completed answer: {events:?}");
    };
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let content = answer.blocks();
    let at = assert_the_call(content);
    let text_at = content.iter().position(|b| matches!(b, Block::Text { .. }));
    let mut json_text = String::new();
    let mut deltas = 0;
    for event in &events {
        match event {
            StreamEvent::ToolUseDelta {
                index,
                id,
                name,
                input_json,
            } => {
                assert_eq!(
                    *index, at,
                    "a tool delta's index is its block's: {events:?}"
                );
                let first = deltas == 0;
                assert_eq!(
                    (id.is_some(), name.is_some()),
                    (first, first),
                    "id and name on the first delta only: {events:?}"
                );
                if first {
                    assert_eq!(id.as_deref(), Some(call().id.as_str()));
                    assert_eq!(name.as_deref(), Some(call().name.as_str()));
                }
                json_text.push_str(input_json);
                deltas += 1;
            }
            StreamEvent::TextDelta { index, .. } => {
                assert_eq!(Some(*index), text_at, "a text delta's index is its block's");
            }
            _ => {}
        }
    }
    assert!(deltas >= 1, "the call streamed as tool deltas: {events:?}");
    let input: serde_json::Value =
        serde_json::from_str(&json_text).unwrap_or_else(|e| panic!("{json_text:?}: {e}"));
    assert_eq!(input, call().input, "the fragments join into the input");
    assert_eq!(super::super::harness::streamed_text(&events), TEXT);
    Checked::Passed
}
