//! Response bodies: [`decode_response`], usage and stop reasons.

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::{
    Block, Json, LlmResponse, Refusal, ResponseBody, Result, StopReason, Usage,
};
use tollgate::provider::{keep_raw, parse_json, undecodable};

use super::request::Host;

/// The wire `usage` object (response, `message_start` and `message_delta`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(super) struct WireUsage {
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cache_creation_input_tokens: Option<u64>,
    pub(super) cache_read_input_tokens: Option<u64>,
    pub(super) cache_creation: Option<WireCacheCreation>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(super) struct WireCacheCreation {
    #[serde(default)]
    ephemeral_5m_input_tokens: u64,
    #[serde(default)]
    ephemeral_1h_input_tokens: u64,
}

impl WireUsage {
    /// Cumulative values: each field present replaces the one before.
    pub(super) fn merge(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation = later.cache_creation.or(self.cache_creation);
    }

    /// In tollgate's convention. Cache writes are split by lifetime where the breakdown
    /// is given; writes the breakdown does not account for count as 5-minute writes.
    pub(super) fn neutral(&self) -> Usage {
        let writes = self.cache_creation_input_tokens.unwrap_or(0);
        let (five, hour) = match self.cache_creation {
            Some(c) => {
                let hour = c.ephemeral_1h_input_tokens;
                (
                    c.ephemeral_5m_input_tokens.max(writes.saturating_sub(hour)),
                    hour,
                )
            }
            None => (writes, 0),
        };
        Usage::from_cache_exclusive(
            self.input_tokens.unwrap_or(0),
            self.cache_read_input_tokens.unwrap_or(0),
            five,
            hour,
            self.output_tokens.unwrap_or(0),
        )
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct StopDetails {
    pub(super) category: Option<String>,
    pub(super) explanation: Option<String>,
}

impl StopDetails {
    /// The refusal these details describe (category `unspecified` when none is given).
    pub(super) fn refusal(self) -> Refusal {
        Refusal::new(self.category.unwrap_or_else(|| "unspecified".into()))
            .with_explanation(self.explanation.unwrap_or_default())
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct WireMessage {
    #[serde(default)]
    pub(super) model: String,
    #[serde(default)]
    pub(super) content: Vec<Value>,
    pub(super) stop_reason: Option<String>,
    pub(super) stop_details: Option<StopDetails>,
    #[serde(default)]
    pub(super) usage: WireUsage,
}

/// Maps a wire `stop_reason`. `pause_turn` (a server tool paused; send the answer back
/// to go on) ends the turn; `model_context_window_exceeded` is an overflow (the window is
/// full), not a truncation that a larger output limit would fix.
pub fn stop_reason(wire: &str) -> Option<StopReason> {
    Some(match wire {
        "end_turn" | "pause_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::Refusal,
        _ => return None,
    })
}

/// Decodes one content block of a response, its thinking marked as signed by `signer`
/// (`anthropic`, or `bedrock` for Claude on Bedrock). Redacted thinking and server-tool
/// blocks are kept whole; block types tollgate has no neutral form for are left out.
pub(super) fn decode_block(block: &Value, signer: &str) -> Result<Option<Block>> {
    let get = |key: &str| block.get(key).and_then(Value::as_str);
    let kind = get("type").ok_or_else(|| undecodable("a content block has no type"))?;
    Ok(Some(match kind {
        "text" => Block::text(get("text").unwrap_or_default()),
        "tool_use" => Block::ToolUse {
            id: get("id").unwrap_or_default().to_owned(),
            name: get("name").unwrap_or_default().to_owned(),
            input: Json::new(block.get("input").cloned().unwrap_or_else(|| json!({}))),
            cache: None,
        },
        "thinking" => Block::Thinking {
            text: get("thinking").unwrap_or_default().to_owned(),
            signature: get("signature").map(str::to_owned),
            origin: get("signature").map(|_| signer.to_owned()),
            cache: None,
        },
        "redacted_thinking" => Block::RedactedThinking {
            data: get("data").unwrap_or_default().to_owned(),
            origin: Some(signer.to_owned()),
        },
        // Server tools' calls and results: kept as they came, for the history that must
        // send them back unchanged.
        kind if is_server_tool_block(kind) => Block::Native {
            provider: "anthropic".to_owned(),
            value: Json::new(block.clone()),
        },
        _ => {
            tracing::debug!(block_type = kind, "anthropic: content block type left out");
            return Ok(None);
        }
    }))
}

/// Whether `kind` is a server tool's call or result block (`server_tool_use`,
/// `mcp_tool_use`, `web_search_tool_result`, any other `*_tool_result`), kept as a
/// [`Block::Native`].
pub(super) fn is_server_tool_block(kind: &str) -> bool {
    matches!(kind, "server_tool_use" | "mcp_tool_use") || kind.ends_with("_tool_result")
}

pub(super) fn finish(
    model: String,
    content: Vec<Block>,
    stop: Option<&str>,
    details: Option<StopDetails>,
    usage: Usage,
) -> Result<LlmResponse> {
    let stop = stop.ok_or_else(|| undecodable("no stop_reason"))?;
    let stop_reason =
        stop_reason(stop).ok_or_else(|| undecodable(format!("unknown stop_reason `{stop}`")))?;
    // A refusal is an answer with its stop reason (and what `stop_details` says).
    let refusal = details
        .filter(|_| stop_reason == StopReason::Refusal)
        .map(StopDetails::refusal);
    LlmResponse::new(ResponseBody {
        model,
        content,
        stop_reason,
        usage,
        refusal,
    })
}

/// Decodes a (non-streamed) Messages response body. A body that does not decode is
/// `ProviderError::Malformed` (retried) with its first bytes; a `refusal` stop is a
/// refused answer, with what `stop_details` says and the usage billed.
pub fn decode_response(body: &[u8]) -> Result<LlmResponse> {
    decode_response_from(body, Host::Anthropic)
}

/// [`decode_response`] for an answer from `host`: its thinking is marked as signed there.
pub fn decode_response_from(body: &[u8], host: Host) -> Result<LlmResponse> {
    decode_body(body, host.key()).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8], signer: &str) -> Result<LlmResponse> {
    let message: WireMessage = parse_json(body)?;
    let mut content = Vec::with_capacity(message.content.len());
    for block in &message.content {
        content.extend(decode_block(block, signer)?);
    }
    finish(
        message.model,
        content,
        message.stop_reason.as_deref(),
        message.stop_details,
        message.usage.neutral(),
    )
}
