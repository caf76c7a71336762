//! Stream events: [`StreamDecoder`].

use super::errors::read_stream_error;
use super::response::{StopDetails, WireMessage, WireUsage, finish, malformed, stop_reason};
use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::wire::EventDecoder;
use tollgate::{Block, Json, LlmResponse, Result, StopReason, StreamEvent};

/// A content block being streamed.
#[derive(Debug)]
enum Building {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// A block type tollgate has no neutral form for; left out of the answer.
    Skipped,
}

/// Turns Anthropic stream events into [`StreamEvent`]s and, at `message_stop`, the
/// whole [`LlmResponse`].
///
/// Feed each event's JSON data (its `type` names the event) to [`StreamDecoder::event`].
/// Nothing is emitted for `message_start`, `ping` or a text block's start, so the first
/// event comes with the first content.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    model: String,
    blocks: Vec<(usize, Building)>,
    usage: WireUsage,
    stop: Option<String>,
    stop_details: Option<StopDetails>,
    finished: bool,
}

#[derive(Debug, Deserialize)]
struct WireStreamEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: usize,
    message: Option<WireMessage>,
    content_block: Option<Value>,
    delta: Option<Value>,
    usage: Option<WireUsage>,
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `message_stop` has been seen.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Decodes one event's JSON `data`; returns the events it produces (often none).
    /// An `error` event, a refusal with `stop_details`, or malformed data is an `Err`.
    pub fn event(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        self.decode(data)
            .map_err(|e| tollgate::wire::keep_raw(e, data.as_bytes()))
    }

    fn decode(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        let event: WireStreamEvent =
            serde_json::from_str(data).map_err(|e| malformed(format!("stream event: {e}")))?;
        let mut out = Vec::new();
        match event.kind.as_str() {
            "message_start" => {
                let message = event
                    .message
                    .ok_or_else(|| malformed("message_start without a message"))?;
                self.model = message.model;
                self.usage.merge(message.usage);
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or_default();
                let get = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
                let index = event.index;
                let building = match get("type") {
                    "text" => {
                        let text = get("text").to_owned();
                        if !text.is_empty() {
                            out.push(StreamEvent::TextDelta {
                                index,
                                text: text.clone(),
                            });
                        }
                        Building::Text(text)
                    }
                    "thinking" => {
                        let text = get("thinking").to_owned();
                        if !text.is_empty() {
                            out.push(StreamEvent::ThinkingDelta {
                                index,
                                text: text.clone(),
                            });
                        }
                        Building::Thinking {
                            text,
                            signature: block
                                .get("signature")
                                .and_then(Value::as_str)
                                .filter(|s| !s.is_empty())
                                .map(str::to_owned),
                        }
                    }
                    "tool_use" => {
                        let (id, name) = (get("id").to_owned(), get("name").to_owned());
                        out.push(StreamEvent::ToolUseDelta {
                            index,
                            id: Some(id.clone()),
                            name: Some(name.clone()),
                            input_json: String::new(),
                        });
                        Building::ToolUse {
                            id,
                            name,
                            json: String::new(),
                        }
                    }
                    other => {
                        tracing::debug!(
                            block_type = other,
                            "anthropic: streamed block type left out"
                        );
                        Building::Skipped
                    }
                };
                self.blocks.push((index, building));
            }
            "content_block_delta" => {
                let delta = event.delta.unwrap_or_default();
                let get = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                let index = event.index;
                let Some((_, building)) = self.blocks.iter_mut().rev().find(|(i, _)| *i == index)
                else {
                    return Err(malformed(format!(
                        "a delta for block {index}, which was not started"
                    )));
                };
                match (get("type"), building) {
                    ("text_delta", Building::Text(text)) => {
                        text.push_str(get("text"));
                        out.push(StreamEvent::TextDelta {
                            index,
                            text: get("text").to_owned(),
                        });
                    }
                    ("thinking_delta", Building::Thinking { text, .. }) => {
                        text.push_str(get("thinking"));
                        out.push(StreamEvent::ThinkingDelta {
                            index,
                            text: get("thinking").to_owned(),
                        });
                    }
                    ("signature_delta", Building::Thinking { signature, .. }) => {
                        signature
                            .get_or_insert_with(String::new)
                            .push_str(get("signature"));
                    }
                    ("input_json_delta", Building::ToolUse { json, .. }) => {
                        json.push_str(get("partial_json"));
                        out.push(StreamEvent::ToolUseDelta {
                            index,
                            id: None,
                            name: None,
                            input_json: get("partial_json").to_owned(),
                        });
                    }
                    // citations_delta and deltas of left-out blocks carry nothing we keep.
                    _ => {}
                }
            }
            "content_block_stop" => {
                // Tool input is parsed once, when its block is complete.
                if let Some((_, Building::ToolUse { json, .. })) =
                    self.blocks.iter().rev().find(|(i, _)| *i == event.index)
                    && !json.trim().is_empty()
                    && serde_json::from_str::<Value>(json).is_err()
                {
                    return Err(malformed(format!(
                        "the input of tool-use block {} is not JSON",
                        event.index
                    )));
                }
            }
            "message_delta" => {
                let delta = event.delta.unwrap_or_default();
                if let Some(stop) = delta.get("stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop.to_owned());
                }
                if let Some(details) = delta.get("stop_details").filter(|d| !d.is_null()) {
                    self.stop_details = serde_json::from_value(details.clone()).ok();
                }
                if let Some(usage) = event.usage {
                    self.usage.merge(usage);
                }
                out.push(StreamEvent::Usage(self.usage.neutral()));
                if let Some(reason) = self.stop.as_deref().and_then(stop_reason) {
                    if reason == StopReason::Refusal
                        && let Some(details) = self.stop_details.take()
                    {
                        return Err(details.refusal(self.usage.neutral()));
                    }
                    out.push(StreamEvent::Stop(reason));
                }
            }
            "message_stop" => {
                self.finished = true;
                let response = self.response()?;
                out.push(StreamEvent::Completed(response));
            }
            "ping" => {}
            "error" => return Err(read_stream_error(data).verdict()),
            other => tracing::debug!(event = other, "anthropic: stream event ignored"),
        }
        Ok(out)
    }

    fn response(&mut self) -> Result<LlmResponse> {
        let mut blocks = std::mem::take(&mut self.blocks);
        blocks.sort_by_key(|(i, _)| *i);
        let mut content = Vec::with_capacity(blocks.len());
        for (_, building) in blocks {
            content.push(match building {
                Building::Text(text) => Block::text(text),
                Building::Thinking { text, signature } => Block::Thinking {
                    text,
                    signature,
                    cache: None,
                },
                Building::ToolUse { id, name, json } => {
                    let input = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json)
                            .map_err(|e| malformed(format!("tool input: {e}")))?
                    };
                    Block::ToolUse {
                        id,
                        name,
                        input: Json::new(input),
                        cache: None,
                    }
                }
                Building::Skipped => continue,
            });
        }
        finish(
            std::mem::take(&mut self.model),
            content,
            self.stop.as_deref(),
            self.stop_details.take(),
            self.usage.neutral(),
        )
    }
}

impl EventDecoder for StreamDecoder {
    fn event(&mut self, data: String) -> Result<Vec<StreamEvent>> {
        StreamDecoder::event(self, &data)
    }

    fn is_finished(&self) -> bool {
        StreamDecoder::is_finished(self)
    }
}
