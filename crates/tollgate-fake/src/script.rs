//! Scripted answers and injectable faults.

use std::time::Duration;

use tollgate::provider::ModelEntry;
use tollgate::provider::{
    Block, EmbeddingPurpose, Error, LlmRequest, LlmResponse, ProviderError, ProviderRequestError,
    ResponseBody, StopReason, StreamEvent, Usage,
};

/// The error a stream (or a whole answer) breaks with when a reply is interrupted: the
/// connection dropped mid-answer, as a 502 from a proxy would report it.
pub(crate) const INTERRUPTION: ProviderError = ProviderError::Server {
    status: 502,
    retry_after: None,
};

/// A scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeReply {
    blocks: Vec<Block>,
    stop_reason: StopReason,
    usage: Option<Usage>,
    interrupt_after: Option<usize>,
    refusal: Option<tollgate::provider::Refusal>,
}

impl FakeReply {
    /// A text answer that ends the turn.
    pub fn text(text: impl Into<String>) -> Self {
        FakeReply::blocks(vec![Block::text(text)])
    }

    /// An answer of any blocks that ends the turn.
    pub fn blocks(blocks: Vec<Block>) -> Self {
        FakeReply {
            blocks,
            stop_reason: StopReason::EndTurn,
            usage: None,
            interrupt_after: None,
            refusal: None,
        }
    }

    /// Sets why the model stopped (e.g. [`StopReason::MaxTokens`] for a cut-off answer).
    pub fn with_stop(mut self, stop_reason: StopReason) -> Self {
        self.stop_reason = stop_reason;
        self
    }

    /// Reports this usage instead of the estimate (input ≈ characters / 4, output = words).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Breaks the answer after `events` content deltas (the stream's opening usage event
    /// comes before them): a stream yields them and then fails; a single response fails
    /// outright (HTTP 502).
    pub fn interrupted_after(mut self, events: usize) -> Self {
        self.interrupt_after = Some(events);
        self
    }

    pub(crate) fn interrupt_after(&self) -> Option<usize> {
        self.interrupt_after
    }

    pub(crate) fn into_response(
        self,
        model: &ModelEntry,
        request: &LlmRequest,
    ) -> tollgate::provider::Result<LlmResponse> {
        let usage = self
            .usage
            .unwrap_or_else(|| estimate_usage(request, &self.blocks));
        LlmResponse::new(ResponseBody {
            model: model.name.clone(),
            content: self.blocks,
            stop_reason: self.stop_reason,
            usage,
            refusal: self.refusal,
        })
    }
}

/// A failure to inject, one for each row of the failure table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// HTTP 429 with an optional `retry-after`.
    RateLimited {
        /// The `retry-after` sent.
        retry_after: Option<Duration>,
    },
    /// HTTP 529 (overloaded).
    Overloaded {
        /// The `retry-after` sent.
        retry_after: Option<Duration>,
    },
    /// A 5xx.
    Server {
        /// The status, 500–599.
        status: u16,
    },
    /// No answer within the deadline.
    Timeout,
    /// The account is out of quota (sent as a 429 by the real providers).
    QuotaExhausted,
    /// A safety refusal.
    Refusal {
        /// The refusal category.
        category: String,
        /// The explanation.
        explanation: String,
    },
    /// A 4xx rejection of the request.
    RequestError {
        /// The status, e.g. 400.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// An answer cut off at the output limit (`StopReason::MaxTokens`).
    Truncated,
    /// The provider reports that the input does not fit the model's context window (as
    /// OpenAI's 400 `context_length_exceeded`).
    ContextOverflow,
}

impl Fault {
    /// The error this fault produces, or for [`Fault::Truncated`] the cut-off answer.
    pub(crate) fn into_outcome(
        self,
        model: &ModelEntry,
        request: &LlmRequest,
    ) -> Result<FakeReply, Error> {
        if self == Fault::Truncated {
            let limit = model
                .output_limit(request.sampling_params().max_output_tokens())
                .unwrap_or(1);
            let estimate = estimate_usage(request, &[]);
            return Ok(FakeReply::text("This answer was cut off at the output li")
                .with_stop(StopReason::MaxTokens)
                .with_usage(Usage {
                    output_tokens: limit,
                    ..estimate
                }));
        }
        if let Fault::Refusal {
            category,
            explanation,
        } = self
        {
            // A refused chat answer is an answer with its stop reason, as codecs give it.
            let mut reply = FakeReply::blocks(Vec::new()).with_stop(StopReason::Refusal);
            reply.refusal =
                Some(tollgate::provider::Refusal::new(category).with_explanation(explanation));
            return Ok(reply);
        }
        Err(self.into_error(model))
    }

    /// The error this fault produces for an embeddings or decision request (which have no
    /// answer to cut off: [`Fault::Truncated`] is a rejected request there).
    pub(crate) fn into_error(self, model: &ModelEntry) -> Error {
        match self {
            Fault::RateLimited { retry_after } => ProviderError::RateLimited { retry_after }.into(),
            Fault::Overloaded { retry_after } => ProviderError::overloaded(retry_after).into(),
            Fault::Server { status } => ProviderError::server(status).into(),
            Fault::Timeout => ProviderError::Timeout { after: None }.into(),
            Fault::QuotaExhausted => Error::QuotaExhausted {
                provider: crate::KEY.into(),
                message: "injected: the account has no credit left".into(),
            },
            Fault::Refusal {
                category,
                explanation,
            } => Error::refusal(category, explanation, tollgate::provider::Usage::default()),
            Fault::RequestError { status, message } => {
                ProviderRequestError::new(status, message).into()
            }
            Fault::ContextOverflow => Error::provider_context_overflow(),
            Fault::Truncated => ProviderRequestError::new(
                200,
                format!("model `{}`: only a chat answer can be cut off", model.id),
            )
            .into(),
        }
    }
}

/// One scripted step.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Reply(FakeReply),
    Fault(Fault),
    Replayed(LlmResponse),
}

/// Input ≈ a quarter of the request's characters (at least 1), output = words answered.
fn estimate_usage(request: &LlmRequest, answer: &[Block]) -> Usage {
    let chars: usize = request
        .messages()
        .iter()
        .flat_map(|m| &m.content)
        .map(|b| serde_json::to_string(b).map(|s| s.len()).unwrap_or(0))
        .sum();
    let words: usize = answer
        .iter()
        .filter_map(Block::as_text)
        .map(|t| t.split_whitespace().count())
        .sum();
    Usage {
        input_tokens: (chars as u64).div_ceil(4).max(1),
        output_tokens: words as u64,
        ..Usage::default()
    }
}

/// Splits an answer into stream deltas: text and thinking word by word (spaces kept, so
/// the deltas concatenate to the text), a tool call as one delta.
pub(crate) fn deltas(response: &LlmResponse) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    for (index, block) in response.blocks().iter().enumerate() {
        match block {
            Block::Text { text, .. } => {
                events.extend(words(text).map(|w| StreamEvent::TextDelta {
                    index,
                    text: w.to_owned(),
                }));
            }
            Block::Thinking {
                text, signature, ..
            } => {
                events.extend(words(text).map(|w| StreamEvent::ThinkingDelta {
                    index,
                    text: w.to_owned(),
                }));
                if let Some(signature) = signature {
                    events.push(StreamEvent::SignatureDelta {
                        index,
                        signature: signature.clone(),
                    });
                }
            }
            Block::RedactedThinking { .. } | Block::Native { .. } => {
                events.push(StreamEvent::WholeBlock {
                    index,
                    block: block.clone(),
                })
            }
            Block::ToolUse {
                id, name, input, ..
            } => events.push(StreamEvent::ToolUseDelta {
                index,
                id: Some(id.clone()),
                name: Some(name.clone()),
                input_json: input.canonical(),
            }),
            Block::Image { .. } | Block::ToolResult { .. } | Block::Document { .. } => {}
        }
    }
    events
}

/// Word-sized pieces of `text`, each with the whitespace that follows it.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let end = rest[word_end..]
            .find(|c: char| !c.is_whitespace())
            .map_or(rest.len(), |i| word_end + i);
        let (piece, tail) = rest.split_at(end.max(1).min(rest.len()));
        rest = tail;
        Some(piece)
    })
}

/// A deterministic pseudo-random vector of `width` components for `text`.
pub(crate) fn pseudo_vector(text: &str, purpose: EmbeddingPurpose, width: u64) -> Vec<f32> {
    // FNV-1a over the text, then a xorshift stream: cheap, stable, and never all zero.
    let mut seed: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes().chain([purpose as u8]) {
        seed ^= u64::from(byte);
        seed = seed.wrapping_mul(0x0100_0000_01b3);
    }
    (0..width)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0 + 1e-3
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_every_character() {
        for text in [
            "Hello brave new world",
            "  lead",
            "trail  ",
            "one",
            "a\n\nb c",
            "",
        ] {
            assert_eq!(words(text).collect::<String>(), text);
        }
        assert_eq!(words("Hi there").collect::<Vec<_>>(), vec!["Hi ", "there"]);
    }

    #[test]
    fn pseudo_vectors_are_deterministic_and_differ_by_purpose() {
        let a = pseudo_vector("x", EmbeddingPurpose::Query, 8);
        assert_eq!(a, pseudo_vector("x", EmbeddingPurpose::Query, 8));
        assert_ne!(a, pseudo_vector("x", EmbeddingPurpose::Document, 8));
        assert_eq!(a.len(), 8);
    }
}
