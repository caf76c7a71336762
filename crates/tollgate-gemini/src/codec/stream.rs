//! Stream chunks: [`StreamDecoder`].
//!
//! With `?alt=sse`, each event's `data` is one whole `GenerateContentResponse`; there is
//! no `event:` line and no `[DONE]`: the stream ends when the connection closes after
//! the chunk that carries `finishReason`. The kit's SSE parser copes with CRLF framing
//! and with one JSON split across reads.

use super::errors::read_stream_error;
use super::response::{
    PartsToBlocks, WireResponse, WireUsage, finish_reason, malformed, prompt_blocked,
};

use tollgate::wire::EventDecoder;
use tollgate::{Block, LlmResponse, ProviderError, ResponseBody, Result, StopReason, StreamEvent};

/// Turns `streamGenerateContent?alt=sse` chunks into [`StreamEvent`]s and, when the body
/// ends after a finish reason, the whole [`LlmResponse`].
///
/// - Text and thought parts become deltas of one text (or thinking) block until another
///   kind of part comes; a function call arrives whole, as one
///   [`StreamEvent::ToolUseDelta`] with its id, name and all of its arguments.
/// - `usageMetadata` is cumulative: the last chunk's is the answer's usage (never summed),
///   sent as one [`StreamEvent::Usage`] at the end.
/// - A chunk `{"error":{…}}` (after HTTP 200) fails the stream with its typed error; the
///   pipeline reports it as `StreamInterrupted` once content has reached the reader, and
///   retries it before that. Nothing is emitted before the first content.
/// - A blocked prompt, or a filtered answer (`finishReason: SAFETY` and the like), is
///   [`tollgate::Error::ProviderRefusal`].
#[derive(Debug, Default)]
pub struct StreamDecoder {
    model: String,
    parts: PartsToBlocks,
    usage: Option<WireUsage>,
    stop: Option<StopReason>,
    finished: bool,
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the answer is complete (the body ended after a finish reason).
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
        if data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let chunk: WireResponse =
            serde_json::from_str(data).map_err(|e| malformed(format!("stream chunk: {e}")))?;
        if chunk.error.as_ref().is_some_and(|e| !e.is_null()) {
            return Err(read_stream_error(data).verdict());
        }
        if let Some(model) = chunk.model_version.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        if let Some(usage) = chunk.usage_metadata {
            self.usage = Some(usage);
        }
        let mut out = Vec::new();
        if chunk.candidates.is_empty()
            && let Some(refusal) = chunk
                .prompt_feedback
                .as_ref()
                .and_then(|f| prompt_blocked(f, self.usage.unwrap_or_default().neutral()))
        {
            return Err(refusal);
        }
        for candidate in chunk
            .candidates
            .into_iter()
            .filter(|c| c.index.unwrap_or(0) == 0)
        {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                let call = part.function_call.is_some();
                let text = part.text.clone();
                match self.parts.push(part, true) {
                    Some((index, thinking)) => {
                        let text = text.unwrap_or_default();
                        out.push(if thinking {
                            StreamEvent::ThinkingDelta { index, text }
                        } else {
                            StreamEvent::TextDelta { index, text }
                        });
                    }
                    None if call => {
                        let index = self.parts.blocks.len() - 1;
                        if let Some(Block::ToolUse {
                            id, name, input, ..
                        }) = self.parts.blocks.get(index)
                        {
                            out.push(StreamEvent::ToolUseDelta {
                                index,
                                id: Some(id.clone()),
                                name: Some(name.clone()),
                                input_json: input.canonical(),
                            });
                        }
                    }
                    None => {}
                }
            }
            if let Some(reason) = candidate.finish_reason {
                let stop = finish_reason(
                    &reason,
                    self.parts.tool_calls,
                    candidate.finish_message.as_deref(),
                    self.usage.unwrap_or_default().neutral(),
                )?;
                self.stop = Some(stop);
                out.push(StreamEvent::Stop(stop));
            }
        }
        Ok(out)
    }

    /// The body ended: complete after a finish reason, else the stream was cut (closed
    /// early, retried when nothing reached the reader yet).
    pub fn end(&mut self) -> Result<Vec<StreamEvent>> {
        if self.finished {
            return Ok(Vec::new());
        }
        let Some(stop_reason) = self.stop else {
            return Err(
                ProviderError::closed_early("the stream ended without a finish reason").into(),
            );
        };
        self.finished = true;
        let usage = self.usage.unwrap_or_default().neutral();
        let response = LlmResponse::new(ResponseBody {
            model: std::mem::take(&mut self.model),
            content: std::mem::take(&mut self.parts.blocks),
            stop_reason,
            usage,
        })?;
        Ok(vec![
            StreamEvent::Usage(usage),
            StreamEvent::Completed(response),
        ])
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
        self.end()
    }
}
