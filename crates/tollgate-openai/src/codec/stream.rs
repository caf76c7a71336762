//! Stream chunks: [`StreamDecoder`].

use super::errors::read_stream_error;
use super::response::{
    WireUsage, finish, malformed, null_as_default, parse_arguments, refusal, refused, stop_reason,
};

use serde::Deserialize;
use serde_json::Value;
use tollgate::wire::EventDecoder;
use tollgate::{Block, ProviderError, Result, StreamEvent};

/// A content block being streamed, in order of first appearance.
#[derive(Debug)]
enum Building {
    Text(String),
    ToolUse {
        wire_index: u64,
        id: String,
        name: String,
        json: String,
    },
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    choices: Vec<WireChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    index: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    delta: WireDelta,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireDelta {
    content: Option<String>,
    refusal: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCallDelta>,
}

#[derive(Debug, Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: u64,
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// Turns `chat.completion.chunk`s into [`StreamEvent`]s and, at `data: [DONE]` (or at
/// the end of the body, where [`StreamDecoder::end`] allows it), the whole
/// [`LlmResponse`](tollgate::LlmResponse).
///
/// Content blocks are numbered in order of first appearance (text, then each tool call
/// as its first fragment arrives). Role-only chunks emit nothing, so the first event
/// comes with the first content. A refusal (`delta.refusal`) is collected and, at the
/// end (once the usage is known), becomes
/// [`Error::ProviderRefusal`](tollgate::Error::ProviderRefusal); so does a
/// `content_filter` finish (category `content_filter`). A chunk that does not decode is
/// `ProviderError::Malformed` with its bytes.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    done_required: bool,
    model: String,
    blocks: Vec<Building>,
    refusal: String,
    usage: Option<WireUsage>,
    stop: Option<String>,
    finished: bool,
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the answer is complete (`[DONE]` seen, or [`StreamDecoder::end`]
    /// accepted the end of the body).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Decodes one event's `data`; returns the events it produces (often none). An
    /// error chunk, a refusal, or malformed data is an `Err`.
    pub fn event(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        self.chunk(data)
            .map_err(|e| tollgate::wire::keep_raw(e, data.as_bytes()))
    }

    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        if data.trim_start().starts_with("[DONE]") {
            return self.complete();
        }
        let chunk: WireChunk =
            serde_json::from_str(data).map_err(|e| malformed(format!("stream chunk: {e}")))?;
        if chunk.error.as_ref().is_some_and(|e| !e.is_null()) {
            return Err(read_stream_error(data).verdict());
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        let mut out = Vec::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                let index = match self
                    .blocks
                    .iter()
                    .position(|b| matches!(b, Building::Text(_)))
                {
                    Some(i) => i,
                    None => {
                        self.blocks.push(Building::Text(String::new()));
                        self.blocks.len() - 1
                    }
                };
                if let Building::Text(all) = &mut self.blocks[index] {
                    all.push_str(&text);
                }
                out.push(StreamEvent::TextDelta { index, text });
            }
            if let Some(r) = delta.refusal {
                self.refusal.push_str(&r);
            }
            for call in delta.tool_calls {
                let function = call.function.unwrap_or_default();
                let arguments = function.arguments.unwrap_or_default();
                let existing = self.blocks.iter().position(
                    |b| matches!(b, Building::ToolUse { wire_index, .. } if *wire_index == call.index),
                );
                match existing {
                    Some(index) => {
                        if let Building::ToolUse { json, .. } = &mut self.blocks[index] {
                            json.push_str(&arguments);
                        }
                        if !arguments.is_empty() {
                            out.push(StreamEvent::ToolUseDelta {
                                index,
                                id: None,
                                name: None,
                                input_json: arguments,
                            });
                        }
                    }
                    None => {
                        let id = call.id.unwrap_or_default();
                        let name = function.name.unwrap_or_default();
                        self.blocks.push(Building::ToolUse {
                            wire_index: call.index,
                            id: id.clone(),
                            name: name.clone(),
                            json: arguments.clone(),
                        });
                        out.push(StreamEvent::ToolUseDelta {
                            index: self.blocks.len() - 1,
                            id: Some(id),
                            name: Some(name),
                            input_json: arguments,
                        });
                    }
                }
            }
            if let Some(stop) = choice.finish_reason {
                // A refusal or a filter ends the answer at `complete`, with the usage
                // (which may come in a later chunk); no `Stop` event for it.
                if !self.refusal.is_empty() || stop == "refusal" || stop == "content_filter" {
                    self.stop = Some(stop);
                    continue;
                }
                let reason = stop_reason(&stop)
                    .ok_or_else(|| malformed(format!("unknown finish_reason `{stop}`")))?;
                self.stop = Some(stop);
                out.push(StreamEvent::Stop(reason));
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
            out.push(StreamEvent::Usage(usage.neutral()));
        }
        Ok(out)
    }

    /// The decoder for a server whose streams must end with `data: [DONE]` (OpenAI's):
    /// a stream without it counts as cut when its events run out.
    pub fn requiring_done(mut self, required: bool) -> Self {
        self.done_required = required;
        self
    }

    /// The body ended. With `done_required` (OpenAI) a stream without `[DONE]` was cut;
    /// otherwise (compatible servers, where `[DONE]` is optional) a stream that gave a
    /// finish reason is complete. A cut stream is a connection closed early
    /// (`ProviderError::Connection`).
    pub fn end(&mut self, done_required: bool) -> Result<Vec<StreamEvent>> {
        if self.finished {
            return Ok(Vec::new());
        }
        if done_required || self.stop.is_none() {
            return Err(ProviderError::closed_early("the stream ended before `[DONE]`").into());
        }
        self.complete()
    }

    /// The text streamed so far.
    fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Building::Text(t) => Some(t.as_str()),
                Building::ToolUse { .. } => None,
            })
            .collect()
    }

    fn complete(&mut self) -> Result<Vec<StreamEvent>> {
        if self.finished {
            return Ok(Vec::new());
        }
        let usage = self.usage.unwrap_or_default().neutral();
        if !self.refusal.is_empty() {
            self.finished = true;
            return Err(refusal(&self.refusal, usage));
        }
        if let Some(error) = refused(self.stop.as_deref(), &self.text(), usage) {
            self.finished = true;
            return Err(error);
        }
        if self.stop.is_none() {
            return Err(
                ProviderError::closed_early("the stream ended without a finish reason").into(),
            );
        }
        self.finished = true;
        let mut content = Vec::with_capacity(self.blocks.len());
        for building in std::mem::take(&mut self.blocks) {
            content.push(match building {
                Building::Text(text) => Block::text(text),
                Building::ToolUse { id, name, json, .. } => {
                    let input = parse_arguments(&json, &format!("tool call `{id}`"))?;
                    Block::ToolUse {
                        id,
                        name,
                        input,
                        cache: None,
                    }
                }
            });
        }
        let response = finish(
            std::mem::take(&mut self.model),
            content,
            self.stop.as_deref(),
            self.usage.unwrap_or_default().neutral(),
        )?;
        Ok(vec![StreamEvent::Completed(response)])
    }
}

impl EventDecoder for StreamDecoder {
    fn event(&mut self, data: String) -> Result<Vec<StreamEvent>> {
        StreamDecoder::event(self, &data)
    }

    fn is_finished(&self) -> bool {
        StreamDecoder::is_finished(self)
    }

    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        self.end(self.done_required)
    }
}
