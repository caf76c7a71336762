//! Stream chunks: [`Chunks`], run in the kit's shell ([`StreamDecoder`]).
//!
//! With `?alt=sse`, each event's `data` is one whole `GenerateContentResponse`; there is
//! no `event:` line and no `[DONE]`: the stream ends when the connection closes after
//! the chunk that carries `finishReason`. The kit's SSE parser copes with CRLF framing
//! and with one JSON split across reads.

use super::errors::read_stream_error;
use super::response::{PartsToBlocks, WireResponse, WireUsage, finish_reason, prompt_blocked};

use tollgate::provider::{ChunkDecoder, parse_json};
use tollgate::provider::{
    LlmResponse, ProviderError, Refusal, ResponseBody, Result, StopReason, StreamEvent,
};

/// The decoder `gemini` and `vertex` streams run through: the kit's shell around
/// [`Chunks`].
pub type StreamDecoder = tollgate::provider::StreamDecoder<Chunks>;

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
pub struct Chunks {
    model: String,
    parts: PartsToBlocks,
    usage: Option<WireUsage>,
    stop: Option<StopReason>,
    /// What a filter's finish reason said, for the completed answer.
    refusal: Option<Refusal>,
    finished: bool,
}

impl ChunkDecoder for Chunks {
    /// Decodes one event's `data`; returns the events it produces (often none). An
    /// error chunk or malformed data is an `Err`; a blocked prompt is a refused answer.
    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        if data.trim().is_empty() {
            return Ok(Vec::new());
        }
        let chunk: WireResponse = parse_json(data.as_bytes())?;
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
            && let Some(answer) = chunk.prompt_feedback.as_ref().and_then(|f| {
                prompt_blocked(f, &self.model, self.usage.unwrap_or_default().neutral())
            })
        {
            self.finished = true;
            return Ok(vec![StreamEvent::Completed(answer?)]);
        }
        for candidate in chunk
            .candidates
            .into_iter()
            .filter(|c| c.index.unwrap_or(0) == 0)
        {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                out.extend(self.parts.push(part)?);
            }
            if let Some(reason) = candidate.finish_reason {
                let (stop, refusal) = finish_reason(
                    &reason,
                    self.parts.tool_calls,
                    candidate.finish_message.as_deref(),
                )?;
                self.stop = Some(stop);
                self.refusal = refusal;
                out.push(StreamEvent::Stop(stop));
            }
        }
        Ok(out)
    }

    /// Whether the answer is complete (the body ended after a finish reason).
    fn is_finished(&self) -> bool {
        self.finished
    }

    /// The body ended: complete after a finish reason, else the stream was cut (closed
    /// early, retried when nothing reached the reader yet).
    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        let Some(stop_reason) = self.stop else {
            return Err(
                ProviderError::closed_early("the stream ended without a finish reason").into(),
            );
        };
        self.finished = true;
        let usage = self.usage.unwrap_or_default().neutral();
        let response = LlmResponse::new(ResponseBody {
            model: std::mem::take(&mut self.model),
            content: self.parts.blocks.finish()?,
            stop_reason,
            usage,
            refusal: self.refusal.take(),
        })?;
        Ok(vec![
            StreamEvent::Usage(usage),
            StreamEvent::Completed(response),
        ])
    }
}
