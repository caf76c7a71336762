//! The provider-neutral answer: canonical bytes, their digest, and typed accessors.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::conversation::{Block, Conversation, Message, Role};
use crate::error::{Error, Result};
use crate::json::canonical_bytes;
use crate::usage::Usage;

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The output limit was reached: the answer is cut off.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The model wants a tool run.
    ToolUse,
    /// The model refused.
    Refusal,
    /// The provider's content filter stopped the answer.
    ContentFilter,
    /// The conversation filled the model's context window (Anthropic's and Bedrock's
    /// `model_context_window_exceeded`): an overflow, not a truncation to re-run with a
    /// larger output limit. The pipeline reports it as
    /// [`crate::Error::ContextWindowExceeded`].
    ContextWindowExceeded,
}

impl StopReason {
    /// Its name in records, spans and its serialized form (`end_turn`, `content_filter`,
    /// …): the one place a stop reason is named in tollgate's own terms.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ToolUse => "tool_use",
            StopReason::Refusal => "refusal",
            StopReason::ContentFilter => "content_filter",
            StopReason::ContextWindowExceeded => "context_window_exceeded",
        }
    }

    /// Whether the answer was refused, by the model or by a filter.
    pub fn is_refusal(self) -> bool {
        matches!(self, StopReason::Refusal | StopReason::ContentFilter)
    }
}

/// What a provider said about a refused answer ([`StopReason::Refusal`] or
/// [`StopReason::ContentFilter`]) beyond the stop reason: its category and explanation,
/// which the pipeline's [`crate::Error::ProviderRefusal`] and a gateway's answer carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The provider's category: Anthropic's `stop_details.category` (`cyber`, …),
    /// `refusal` for a model's own refusal, or the filter's name (`content_filter`,
    /// Gemini's finish reason lower-cased, Bedrock's `guardrail_intervened`).
    pub category: String,
    /// The provider's explanation given apart from the answer's text (Anthropic's
    /// `stop_details.explanation`); empty when the refusal is the text itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub explanation: String,
}

impl Refusal {
    /// A refusal of `category` with no explanation beyond the answer's text.
    pub fn new(category: impl Into<String>) -> Self {
        Refusal {
            category: category.into(),
            explanation: String::new(),
        }
    }

    /// With `explanation`, given apart from the answer's text.
    pub fn with_explanation(mut self, explanation: impl Into<String>) -> Self {
        self.explanation = explanation.into();
        self
    }
}

/// The decoded content of a response, from which canonical bytes are made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseBody {
    /// The model name the provider reported.
    pub model: String,
    /// The answer's blocks.
    pub content: Vec<Block>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    #[serde(default)]
    pub usage: Usage,
    /// For a refused answer, what the provider said about it (absent otherwise, so an
    /// answer's bytes are what they were before the field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
}

impl ResponseBody {
    /// An answer with no refusal: what a provider's codec builds for most answers, so a
    /// field added later (one with a default) does not break it.
    pub fn new(
        model: impl Into<String>,
        content: Vec<Block>,
        stop_reason: StopReason,
        usage: Usage,
    ) -> Self {
        ResponseBody {
            model: model.into(),
            content,
            stop_reason,
            usage,
            refusal: None,
        }
    }

    /// The same answer with what the provider said about its refusal.
    pub fn with_refusal(mut self, refusal: Refusal) -> Self {
        self.refusal = Some(refusal);
        self
    }
}

/// A provider-neutral answer: canonical JSON bytes plus `response_digest` (their
/// SHA-256), with typed accessors. The bytes are what the replay cache stores.
///
/// Immutable: bytes, digest and decoded body are fixed at construction and only read.
///
/// ```compile_fail
/// # fn f(response: tollgate::LlmResponse) {
/// let mut response = response;
/// response.body.stop_reason = tollgate::StopReason::EndTurn; // private: does not compile
/// # }
/// ```
#[derive(Clone)]
pub struct LlmResponse {
    bytes: Arc<[u8]>,
    digest: [u8; 32],
    body: Arc<ResponseBody>,
}

impl LlmResponse {
    /// Makes a response from its decoded parts; the bytes are the canonical JSON of `body`.
    pub fn new(body: ResponseBody) -> Result<Self> {
        let bytes = canonical_bytes(&body).map_err(|source| Error::Decode {
            what: "a response body".into(),
            source,
        })?;
        Ok(Self::assemble(bytes.into(), body))
    }

    /// Restores a response from stored bytes (e.g. the replay cache), keeping them as
    /// they are; fails if they do not decode as a response.
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Result<Self> {
        let bytes = bytes.into();
        let body: ResponseBody =
            serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
                what: "stored response bytes".into(),
                source,
            })?;
        Ok(Self::assemble(bytes, body))
    }

    fn assemble(bytes: Arc<[u8]>, body: ResponseBody) -> Self {
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        LlmResponse {
            bytes,
            digest,
            body: Arc::new(body),
        }
    }

    /// The canonical response bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// SHA-256 of [`LlmResponse::bytes`].
    pub fn response_digest(&self) -> [u8; 32] {
        self.digest
    }

    /// SHA-256 of the bytes, as lowercase hex.
    pub fn response_digest_hex(&self) -> String {
        hex::encode(self.digest)
    }

    /// The decoded body.
    pub fn body(&self) -> &ResponseBody {
        &self.body
    }

    /// The content blocks.
    pub fn blocks(&self) -> &[Block] {
        &self.body.content
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        self.body
            .content
            .iter()
            .filter_map(Block::as_text)
            .collect()
    }

    /// Why the model stopped.
    pub fn stop_reason(&self) -> StopReason {
        self.body.stop_reason
    }

    /// Tokens used.
    pub fn usage(&self) -> Usage {
        self.body.usage
    }

    /// The model name the provider reported.
    pub fn model(&self) -> &str {
        &self.body.model
    }

    /// What the provider said about a refused answer, if it is one and said anything.
    pub fn refusal(&self) -> Option<&Refusal> {
        self.body.refusal.as_ref()
    }

    /// A refused answer's category: the provider's, else the stop reason's name
    /// (`refusal`, `content_filter`); `None` for an answer that is not refused.
    pub fn refusal_category(&self) -> Option<&str> {
        if !self.stop_reason().is_refusal() {
            return None;
        }
        Some(
            self.refusal()
                .map_or(self.stop_reason().as_str(), |r| r.category.as_str()),
        )
    }

    /// A refused answer's explanation: the provider's when it gave one apart, else the
    /// answer's text.
    pub fn refusal_explanation(&self) -> String {
        match self.refusal() {
            Some(r) if !r.explanation.is_empty() => r.explanation.clone(),
            _ => self.text(),
        }
    }
}

impl PartialEq for LlmResponse {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for LlmResponse {}

impl fmt::Debug for LlmResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmResponse")
            .field("digest", &self.response_digest_hex())
            .field("body", &self.body)
            .finish()
    }
}

// Defined here, not in `conversation.rs`, so that the conversation types need nothing of
// the response (which is made of them).
impl Conversation {
    /// Appends the model's answer as an assistant message.
    pub fn push_response(&mut self, response: &LlmResponse) {
        self.messages.push(Message {
            role: Role::Assistant,
            content: response.blocks().to_vec(),
        });
    }
}
