//! Stream events: [`Events`], run in the kit's
//! [`StreamDecoder`](tollgate::provider::StreamDecoder) shell ([`StreamDecoder`]).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tollgate::provider::{BlockAssembler, ChunkDecoder, parse_json, undecodable};
use tollgate::provider::{LlmResponse, ResponseBody, Result, StreamEvent};

use super::response::{Slot, WireUsage, finish, null_as_default};

/// One SSE event's data: its `type`, `index` and `delta`, read per type.
#[derive(Debug, Deserialize)]
struct WireEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: u64,
    #[serde(default)]
    delta: Value,
}

#[derive(Debug, Default, Deserialize)]
struct ContentDelta {
    #[serde(default, deserialize_with = "null_as_default")]
    message: ContentMessage,
}

#[derive(Debug, Default, Deserialize)]
struct ContentMessage {
    #[serde(default, deserialize_with = "null_as_default")]
    content: ContentPart,
}

#[derive(Debug, Default, Deserialize)]
struct ContentPart {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct PlanDelta {
    #[serde(default, deserialize_with = "null_as_default")]
    message: PlanMessage,
}

#[derive(Debug, Default, Deserialize)]
struct PlanMessage {
    #[serde(default)]
    tool_plan: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct CallDelta {
    #[serde(default, deserialize_with = "null_as_default")]
    message: CallMessage,
}

#[derive(Debug, Default, Deserialize)]
struct CallMessage {
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: CallPart,
}

#[derive(Debug, Default, Deserialize)]
struct CallPart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    function: FunctionPart,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionPart {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct EndDelta {
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<String>,
}

/// The delta of an event of kind `kind`, read as `T`.
fn delta<T: DeserializeOwned + Default>(event: &WireEvent) -> Result<T> {
    if event.delta.is_null() {
        return Ok(T::default());
    }
    T::deserialize(&event.delta)
        .map_err(|e| undecodable(format!("the delta of a `{}` event: {e}", event.kind)))
}

/// The decoder `cohere` streams run through: the kit's shell around [`Events`].
pub type StreamDecoder = tollgate::provider::StreamDecoder<Events>;

/// Turns Cohere's v2 stream events into [`StreamEvent`]s and, at `message-end`, the
/// whole [`LlmResponse`](tollgate::LlmResponse).
///
/// | event | becomes |
/// |---|---|
/// | `content-start`, `content-delta` (text or thinking) | a text or thinking block, `TextDelta` / `ThinkingDelta` |
/// | `tool-plan-delta` | a text block (the plan before the calls), `TextDelta` |
/// | `tool-call-start`, `tool-call-delta` | a tool-use block, `ToolUseDelta`s (id and name on the first) |
/// | `message-end` | `Usage`, `Stop` and `Completed`; with `finish_reason` `ERROR` or `TIMEOUT`, the failure it stands for |
/// | `message-start`, `content-end`, `tool-call-end`, `citation-*`, `debug`, others | nothing |
///
/// Blocks are numbered in order of first appearance. A stream that ends before
/// `message-end` was cut (the kit's default). An event that does not decode is
/// `ProviderError::Malformed` with its bytes.
#[derive(Debug, Default)]
pub struct Events {
    model: String,
    blocks: BlockAssembler<Slot>,
    finished: bool,
}

impl Events {
    /// The decoder of a stream answering `model` (Cohere's events name no model).
    pub fn for_model(model: &str) -> Self {
        Events {
            model: model.to_owned(),
            ..Events::default()
        }
    }

    fn content(&mut self, event: &WireEvent) -> Result<Option<StreamEvent>> {
        let part = delta::<ContentDelta>(event)?.message.content;
        let slot = Slot::Content(event.index);
        if part.kind.as_deref() == Some("thinking") || part.thinking.is_some() {
            return self
                .blocks
                .thinking(slot, part.thinking.as_deref().unwrap_or_default());
        }
        self.blocks
            .text(slot, part.text.as_deref().unwrap_or_default())
    }

    fn end(&mut self, event: &WireEvent) -> Result<Vec<StreamEvent>> {
        let end = delta::<EndDelta>(event)?;
        let wire = end
            .finish_reason
            .ok_or_else(|| undecodable("a `message-end` without a finish_reason"))?;
        let stop_reason = finish(&wire, end.error.as_deref())?;
        let usage = end.usage.unwrap_or_default().neutral();
        let content = self.blocks.finish()?;
        self.finished = true;
        let response = LlmResponse::new(ResponseBody {
            model: std::mem::take(&mut self.model),
            content,
            stop_reason,
            usage,
            refusal: None,
        })?;
        Ok(vec![
            StreamEvent::Usage(usage),
            StreamEvent::Stop(stop_reason),
            StreamEvent::Completed(response),
        ])
    }
}

impl ChunkDecoder for Events {
    /// Decodes one event's `data`; returns the events it produces (often none). A failed
    /// generation or malformed data is an `Err`.
    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        let event: WireEvent = parse_json(data.as_bytes())?;
        let out = match event.kind.as_str() {
            "content-start" | "content-delta" => self.content(&event)?,
            "tool-plan-delta" => {
                let plan = delta::<PlanDelta>(&event)?.message.tool_plan;
                self.blocks
                    .text(Slot::Plan, plan.as_deref().unwrap_or_default())?
            }
            "tool-call-start" => {
                let call = delta::<CallDelta>(&event)?.message.tool_calls;
                let slot = Slot::Call(event.index);
                Some(self.blocks.tool_use(
                    slot,
                    call.id.as_deref().unwrap_or_default(),
                    call.function.name.as_deref().unwrap_or_default(),
                    call.function.arguments.as_deref().unwrap_or_default(),
                )?)
            }
            "tool-call-delta" => {
                let call = delta::<CallDelta>(&event)?.message.tool_calls;
                let arguments = call.function.arguments.unwrap_or_default();
                self.blocks
                    .tool_input(Slot::Call(event.index), &arguments)?
            }
            "message-end" => return self.end(&event),
            _ => None,
        };
        Ok(out.into_iter().collect())
    }

    fn is_finished(&self) -> bool {
        self.finished
    }
}
