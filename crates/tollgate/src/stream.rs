//! Streamed answers: events as they arrive, ending with the whole response.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};

use crate::error::{Error, ProviderRequestError, Result};
use crate::response::{LlmResponse, StopReason};
use crate::usage::Usage;

/// One event of a streamed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More text for content block `index`.
    TextDelta {
        /// Content block index.
        index: usize,
        /// The new text.
        text: String,
    },
    /// More reasoning for content block `index`.
    ThinkingDelta {
        /// Content block index.
        index: usize,
        /// The new text.
        text: String,
    },
    /// The signature of thinking block `index` (Anthropic's `signature_delta`), which a
    /// client must send back unchanged with the block.
    SignatureDelta {
        /// Content block index.
        index: usize,
        /// The signature (or the next part of it).
        signature: String,
    },
    /// A block that arrives whole, not in deltas: redacted thinking, or a provider-native
    /// block such as Anthropic's `web_search_tool_result`.
    WholeBlock {
        /// Content block index.
        index: usize,
        /// The block.
        block: crate::conversation::Block,
    },
    /// Part of a tool call for content block `index`.
    ToolUseDelta {
        /// Content block index.
        index: usize,
        /// The tool-use id (on the first delta of the block).
        id: Option<String>,
        /// The tool name (on the first delta of the block).
        name: Option<String>,
        /// A fragment of the arguments' JSON text.
        input_json: String,
    },
    /// Usage so far (providers report it at the start, the end, or both).
    Usage(Usage),
    /// Why the model stopped.
    Stop(StopReason),
    /// The last event: the whole answer, as [`crate::LlmClient::single_response`] returns it.
    Completed(LlmResponse),
}

/// A streamed answer: [`StreamEvent`]s, the last one [`StreamEvent::Completed`].
pub struct ResponseStream {
    inner: Pin<Box<dyn Stream<Item = Result<StreamEvent>> + Send>>,
    provider: Option<String>,
}

impl ResponseStream {
    /// Wraps a stream of events.
    pub fn new(inner: impl Stream<Item = Result<StreamEvent>> + Send + 'static) -> Self {
        ResponseStream {
            inner: Box::pin(inner),
            provider: None,
        }
    }

    /// The same stream, said to come from a model of catalog provider key `provider`.
    pub fn with_provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// The catalog provider key of the model that answers, when the pipeline opened the
    /// stream: after a fallback, the model that took the call, not the one asked for
    /// (a relay seals streamed thinking as that provider's).
    pub fn provider(&self) -> Option<&str> {
        self.provider.as_deref()
    }

    /// Reads the stream to its end and returns the completed response.
    pub async fn into_response(mut self) -> Result<LlmResponse> {
        while let Some(event) = self.inner.next().await {
            if let StreamEvent::Completed(response) = event? {
                return Ok(response);
            }
        }
        Err(Error::ProviderRequest(ProviderRequestError::new(
            200,
            "the stream ended without its completed response",
        )))
    }
}

impl Stream for ResponseStream {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream").finish_non_exhaustive()
    }
}
