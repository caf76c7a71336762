//! What an answer's stop reason means to the caller: the names records and spans use, and
//! the refusal error an answer that stopped with a refusal or a content filter stands for.

use crate::error::Error;
use crate::response::{LlmResponse, StopReason};

/// The refusal an answer that stopped with a refusal or a content filter stands for,
/// with its usage and the stream events delivered before it.
pub(super) fn refusal(response: &LlmResponse, delivered_events: u64) -> Error {
    Error::ProviderRefusal {
        category: stop_name(response.stop_reason()).into(),
        explanation: response.text(),
        usage: response.usage(),
        delivered_events,
    }
}

pub(super) fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::Refusal => "refusal",
        StopReason::ContentFilter => "content_filter",
        StopReason::ContextWindowExceeded => "context_window_exceeded",
    }
}
