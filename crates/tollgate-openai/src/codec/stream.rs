//! Stream chunks: [`Chunks`], run in the kit's [`StreamDecoder`](tollgate::provider::StreamDecoder)
//! shell ([`StreamDecoder`]).

use super::errors::read_stream_error;
use super::response::{WireUsage, finish, kept_block, null_as_default, read_filtered_in, refused};

use serde::Deserialize;
use serde_json::Value;
use tollgate::provider::{BlockAssembler, ChunkDecoder, undecodable};
use tollgate::provider::{ProviderError, Result, StreamEvent};

use crate::dialect::Dialect;

/// Where a streamed block comes from: the reasoning text, the answer's text (one block
/// each), a tool call by its wire `index`, or the fields the dialect keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Thinking,
    Text,
    Call(u64),
    Kept,
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
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
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

/// The decoder `openai` and `openai-compatible` streams run through: the kit's shell
/// around [`Chunks`].
pub type StreamDecoder = tollgate::provider::StreamDecoder<Chunks>;

/// Turns `chat.completion.chunk`s into [`StreamEvent`]s and, at `data: [DONE]` (or at
/// the end of the body, where [`Chunks::requiring_done`] allows it), the whole
/// [`LlmResponse`](tollgate::LlmResponse).
///
/// Content blocks are numbered in order of first appearance (text, then each tool call
/// as its first fragment arrives). Role-only chunks emit nothing, so the first event
/// comes with the first content. A refusal (`delta.refusal`) is collected and, at the
/// end (once the usage is known), becomes
/// [`Error::ProviderRefusal`](tollgate::Error::ProviderRefusal); so does a
/// `content_filter` finish (category `content_filter`, with the categories the
/// dialect's filter named in any chunk: [`Dialect::filtered`]). A chunk that does not decode is
/// `ProviderError::Malformed` with its bytes.
#[derive(Debug, Default)]
pub struct Chunks {
    dialect: Dialect,
    kept: Option<Value>,
    done_required: bool,
    model: String,
    blocks: BlockAssembler<Slot>,
    refusal: String,
    /// The categories the dialect's content filter named in any chunk so far.
    filtered: Vec<String>,
    usage: Option<WireUsage>,
    stop: Option<String>,
    finished: bool,
}

impl Chunks {
    /// The decoder for a server whose streams must end with `data: [DONE]` (OpenAI's)
    /// when `required`: a stream without it counts as cut when its events run out.
    /// Otherwise (compatible servers, where `[DONE]` is optional) a stream that gave a
    /// finish reason is complete at the end of the body.
    pub fn requiring_done(mut self, required: bool) -> Self {
        self.done_required = required;
        self
    }

    /// The decoder for an OpenAI-like API's `dialect`: its finish reasons, its rewrite
    /// of each chunk, and its kept fields (the last chunk's that has them, handed on as
    /// a whole `Block::Native` before the answer completes).
    pub fn in_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    fn complete(&mut self) -> Result<Vec<StreamEvent>> {
        if self.finished {
            return Ok(Vec::new());
        }
        let usage = self.usage.unwrap_or_default().neutral();
        if let Some(answer) = refused(
            &self.model,
            &self.refusal,
            self.stop.as_deref(),
            &self.blocks.text_so_far(),
            usage,
            &self.filtered,
        ) {
            self.finished = true;
            return Ok(vec![StreamEvent::Completed(answer?)]);
        }
        if self.stop.is_none() {
            return Err(
                ProviderError::closed_early("the stream ended without a finish reason").into(),
            );
        }
        self.finished = true;
        let mut events = Vec::new();
        if let Some(kept) = self.kept.take() {
            events.push(
                self.blocks
                    .whole(Slot::Kept, kept_block(&self.dialect, kept))?,
            );
        }
        let content = self.blocks.finish()?;
        let response = finish(
            std::mem::take(&mut self.model),
            content,
            self.stop.as_deref(),
            usage,
            &self.dialect,
        )?;
        events.push(StreamEvent::Completed(response));
        Ok(events)
    }
}

impl ChunkDecoder for Chunks {
    /// Decodes one event's `data`; returns the events it produces (often none). An
    /// error chunk, a refusal, or malformed data is an `Err`.
    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        if data.trim_start().starts_with("[DONE]") {
            return self.complete();
        }
        let (chunk, kept, filtered): (WireChunk, _, _) =
            read_filtered_in(data.as_bytes(), &self.dialect)?;
        if kept.is_some() {
            self.kept = kept;
        }
        for name in filtered {
            if !self.filtered.contains(&name) {
                self.filtered.push(name);
            }
        }
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            // Read as the dialect's rewrite left it (a provider's own error shape moved
            // into OpenAI's), not as it came.
            let rewritten = serde_json::json!({ "error": error }).to_string();
            return Err(read_stream_error(&rewritten).verdict());
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        let mut out = Vec::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            if let Some(text) = delta
                .reasoning_content
                .or(delta.reasoning)
                .filter(|t| !t.is_empty())
            {
                out.extend(self.blocks.thinking(Slot::Thinking, &text)?);
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                out.extend(self.blocks.text(Slot::Text, &text)?);
            }
            if let Some(r) = delta.refusal {
                self.refusal.push_str(&r);
            }
            for call in delta.tool_calls {
                let function = call.function.unwrap_or_default();
                let arguments = function.arguments.unwrap_or_default();
                let slot = Slot::Call(call.index);
                if self.blocks.contains(&slot) {
                    out.extend(self.blocks.tool_input(slot, &arguments)?);
                } else {
                    let id = call.id.unwrap_or_default();
                    let name = function.name.unwrap_or_default();
                    out.push(self.blocks.tool_use(slot, &id, &name, &arguments)?);
                }
            }
            if let Some(stop) = choice.finish_reason {
                // A refusal or a filter ends the answer at `complete`, with the usage
                // (which may come in a later chunk); no `Stop` event for it.
                if !self.refusal.is_empty() || stop == "refusal" || stop == "content_filter" {
                    self.stop = Some(stop);
                    continue;
                }
                let reason = self
                    .dialect
                    .stop_reason(&stop)
                    .ok_or_else(|| undecodable(format!("unknown finish_reason `{stop}`")))?;
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

    /// Whether the answer is complete (`[DONE]` seen, or the end of the body accepted).
    fn is_finished(&self) -> bool {
        self.finished
    }

    /// The body ended. With `done_required` (OpenAI) a stream without `[DONE]` was cut;
    /// otherwise a stream that gave a finish reason is complete. A cut stream is a
    /// connection closed early (`ProviderError::Connection`).
    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        if self.done_required || self.stop.is_none() {
            return Err(ProviderError::closed_early("the stream ended before `[DONE]`").into());
        }
        self.complete()
    }
}
