//! Stream events: [`Chunks`], run in the kit's shell ([`StreamDecoder`]).

use super::errors::read_stream_error;
use super::request::Host;
use super::response::{
    StopDetails, WireMessage, WireUsage, decode_block, finish, is_server_tool_block, stop_reason,
};
use serde::Deserialize;
use serde_json::Value;
use tollgate::provider::{BlockAssembler, ChunkDecoder, parse_json, undecodable};
use tollgate::provider::{LlmResponse, Result, StreamEvent};

/// The decoder Anthropic streams run through (`anthropic-direct`, and Claude on
/// Bedrock): the kit's shell around [`Chunks`].
pub type StreamDecoder = tollgate::provider::StreamDecoder<Chunks>;

/// Turns Anthropic stream events into [`StreamEvent`]s and, at `message_stop`, the
/// whole [`LlmResponse`].
///
/// Feed each event's JSON data (its `type` names the event) to
/// [`StreamDecoder::event`](tollgate::provider::StreamDecoder::event). Nothing is emitted
/// for `message_start`, `ping` or a text block's start, so the first event comes with the
/// first content. Blocks are assembled by the kit's [`BlockAssembler`], keyed by the
/// wire's `index`. Redacted thinking and server-tool results arrive whole in their
/// `content_block_start` and are handed on as [`StreamEvent::WholeBlock`]s; a server
/// tool's call (`server_tool_use`) streams its input as `input_json_delta`s and is handed
/// on whole at its `content_block_stop`. A block type tollgate has no neutral form for is
/// left out.
#[derive(Debug, Default)]
pub struct Chunks {
    /// Where the stream comes from: its thinking is marked as signed there.
    host: Host,
    model: String,
    blocks: BlockAssembler,
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

impl ChunkDecoder for Chunks {
    /// Decodes one event's JSON `data`; returns the events it produces (often none).
    /// An `error` event, a refusal with `stop_details`, or malformed data is an `Err`.
    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        let event: WireStreamEvent = parse_json(data.as_bytes())?;
        let mut out = Vec::new();
        match event.kind.as_str() {
            "message_start" => {
                let message = event
                    .message
                    .ok_or_else(|| undecodable("message_start without a message"))?;
                self.model = message.model;
                self.usage.merge(message.usage);
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or_default();
                let get = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
                let index = event.index;
                match get("type") {
                    "text" => out.extend(self.blocks.text(index, get("text"))?),
                    "thinking" => {
                        out.extend(self.blocks.thinking(index, get("thinking"))?);
                        out.extend(self.blocks.signature(index, get("signature"))?);
                    }
                    "tool_use" => {
                        out.push(self.blocks.tool_use(index, get("id"), get("name"), "")?);
                    }
                    // A server tool's call: its input follows as `input_json_delta`s.
                    "server_tool_use" | "mcp_tool_use" => {
                        self.blocks
                            .native_input(index, "anthropic", block.clone())?;
                    }
                    kind if kind == "redacted_thinking" || is_server_tool_block(kind) => {
                        if let Some(whole) = decode_block(&block, self.host.key())? {
                            out.push(self.blocks.whole(index, whole)?);
                        }
                    }
                    other => {
                        tracing::debug!(
                            block_type = other,
                            "anthropic: streamed block type left out"
                        );
                        self.blocks.skip(index);
                    }
                }
            }
            "content_block_delta" => {
                let delta = event.delta.unwrap_or_default();
                let get = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                let index = event.index;
                if !self.blocks.contains(&index) {
                    return Err(undecodable(format!(
                        "a delta for block {index}, which was not started"
                    )));
                }
                match get("type") {
                    "text_delta" => out.extend(self.blocks.text(index, get("text"))?),
                    "thinking_delta" => out.extend(self.blocks.thinking(index, get("thinking"))?),
                    // Kept on the block and passed on, so a client can send the block back.
                    "signature_delta" => {
                        out.extend(self.blocks.signature(index, get("signature"))?);
                    }
                    "input_json_delta" => {
                        out.extend(self.blocks.tool_input(index, get("partial_json"))?);
                    }
                    // citations_delta carries nothing we keep.
                    _ => {}
                }
            }
            // Tool input is parsed once, when its block is complete.
            "content_block_stop" => out.extend(self.blocks.complete(&event.index)?),
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

    /// Whether `message_stop` has been seen.
    fn is_finished(&self) -> bool {
        self.finished
    }
}

impl Chunks {
    /// A decoder for a stream from `host` (its thinking marked as signed there).
    pub fn from_host(host: Host) -> Self {
        Chunks {
            host,
            ..Chunks::default()
        }
    }

    fn response(&mut self) -> Result<LlmResponse> {
        finish(
            std::mem::take(&mut self.model),
            self.blocks.finish_signed_by(self.host.key())?,
            self.stop.as_deref(),
            self.stop_details.take(),
            self.usage.neutral(),
        )
    }
}
