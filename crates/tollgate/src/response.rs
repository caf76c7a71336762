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
