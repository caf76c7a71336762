//! Response bodies: [`decode_response`], usage and stop reasons.

use serde::Deserialize;
use serde_json::json;
use tollgate::provider::{keep_raw, parse_json, undecodable};
use tollgate::{Block, Json, LlmResponse, Refusal, ResponseBody, Result, StopReason, Usage};

/// The wire `usage` object. Every field optional: compatible servers leave some out.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(super) struct PromptDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_write_tokens: Option<u64>,
}

impl WireUsage {
    /// In tollgate's convention: `prompt_tokens` includes cache reads and writes, which
    /// are taken out; `completion_tokens` includes reasoning tokens.
    pub fn neutral(&self) -> Usage {
        let details = self.prompt_tokens_details.unwrap_or_default();
        Usage::from_cache_inclusive(
            self.prompt_tokens.unwrap_or(0),
            details.cached_tokens.unwrap_or(0),
            details.cache_write_tokens.unwrap_or(0),
            self.completion_tokens.unwrap_or(0),
        )
    }

    /// The prompt tokens as sent (embeddings report only these).
    pub fn prompt_tokens(&self) -> u64 {
        self.prompt_tokens.unwrap_or(0)
    }
}

/// Maps a wire `finish_reason`. `function_call` is the deprecated form of `tool_calls`;
/// `eos` is what some compatible servers send for a natural end.
pub fn stop_reason(wire: &str) -> Option<StopReason> {
    Some(match wire {
        "stop" | "eos" | "end_turn" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::ContentFilter,
        _ => return None,
    })
}

/// Reads `null` as the default: compatible servers (and OpenAI's own examples) send
/// `"tool_calls": null` where a list is empty.
pub(super) fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The refused answer, if it is one: `message.refusal` (`refusal_text`, the answer's
/// text, category `refusal`), else a `content_filter` finish (content omitted by
/// OpenAI's filters) or a `refusal` finish (sent by some compatible servers), with
/// `text` kept and the usage billed. A refusal is an answer with its stop reason, which
/// the pipeline judges; never a codec error.
pub(super) fn refused(
    model: &str,
    refusal_text: &str,
    finish_reason: Option<&str>,
    text: &str,
    usage: Usage,
) -> Option<Result<LlmResponse>> {
    let (stop_reason, category, text) = if !refusal_text.is_empty() {
        (StopReason::Refusal, "refusal", refusal_text)
    } else {
        match finish_reason? {
            "content_filter" => (StopReason::ContentFilter, "content_filter", text),
            "refusal" => (StopReason::Refusal, "refusal", text),
            _ => return None,
        }
    };
    let content = if text.is_empty() {
        Vec::new()
    } else {
        vec![Block::text(text)]
    };
    Some(LlmResponse::new(ResponseBody {
        model: model.to_owned(),
        content,
        stop_reason,
        usage,
        refusal: Some(Refusal::new(category)),
    }))
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(default)]
    model: String,
    #[serde(default, deserialize_with = "null_as_default")]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default, deserialize_with = "null_as_default")]
    message: WireMessage,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    content: Option<String>,
    refusal: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    #[serde(default)]
    function: WireFunction,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

fn parse_arguments(text: &str, id: &str) -> Result<Json> {
    if text.trim().is_empty() {
        return Ok(Json::new(json!({})));
    }
    serde_json::from_str(text).map(Json::new).map_err(|e| {
        undecodable(format!(
            "the arguments of tool call `{id}` are not JSON: {e}"
        ))
    })
}

pub(super) fn finish(
    model: String,
    content: Vec<Block>,
    stop: Option<&str>,
    usage: Usage,
) -> Result<LlmResponse> {
    let stop_reason = match stop {
        Some(s) => {
            stop_reason(s).ok_or_else(|| undecodable(format!("unknown finish_reason `{s}`")))?
        }
        // Some compatible servers leave it out of a natural end.
        None => StopReason::EndTurn,
    };
    LlmResponse::new(ResponseBody {
        model,
        content,
        stop_reason,
        usage,
        refusal: None,
    })
}

/// Decodes a (non-streamed) Chat Completions body: the first choice. A body that does
/// not decode is `ProviderError::Malformed` (retried) with its first bytes; a refusal
/// is an answer stopped by `Refusal`, a `content_filter` finish one stopped by
/// `ContentFilter`, each with the usage billed.
pub fn decode_response(body: &[u8]) -> Result<LlmResponse> {
    decode_body(body).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8]) -> Result<LlmResponse> {
    let response: WireResponse = parse_json(body)?;
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| undecodable("no choices"))?;
    let message = choice.message;
    let usage = response.usage.unwrap_or_default().neutral();
    if let Some(answer) = refused(
        &response.model,
        message.refusal.as_deref().unwrap_or_default(),
        choice.finish_reason.as_deref(),
        message.content.as_deref().unwrap_or_default(),
        usage,
    ) {
        return answer;
    }
    let mut content = Vec::new();
    if let Some(text) = message.content.filter(|t| !t.is_empty()) {
        content.push(Block::text(text));
    }
    for call in message.tool_calls {
        let input = parse_arguments(&call.function.arguments, &call.id)?;
        content.push(Block::ToolUse {
            id: call.id,
            name: call.function.name,
            input,
            cache: None,
        });
    }
    finish(
        response.model,
        content,
        choice.finish_reason.as_deref(),
        response.usage.unwrap_or_default().neutral(),
    )
}
