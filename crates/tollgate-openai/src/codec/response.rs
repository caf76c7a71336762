//! Response bodies: [`decode_response`], usage and stop reasons.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tollgate::provider::{
    Block, Json, LlmResponse, Refusal, ResponseBody, Result, StopReason, Usage,
};
use tollgate::provider::{keep_raw, parse_json, undecodable};

use crate::dialect::Dialect;

/// Reads `bytes` as `T` in `dialect`: directly, or, where the dialect rewrites answers
/// or keeps fields of them, through a JSON value first (rewritten into OpenAI's shape),
/// with the kept fields as a native block's value.
pub(super) fn read_in<T: DeserializeOwned>(
    bytes: &[u8],
    dialect: &Dialect,
) -> Result<(T, Option<Value>)> {
    read_filtered_in(bytes, dialect).map(|(read, kept, _)| (read, kept))
}

/// [`read_in`], with the categories the dialect's content filter names in the answer
/// ([`Dialect::filtered`]; none where it has no such hook).
pub(super) fn read_filtered_in<T: DeserializeOwned>(
    bytes: &[u8],
    dialect: &Dialect,
) -> Result<(T, Option<Value>, Vec<String>)> {
    if !dialect.reads_raw() {
        return Ok((parse_json(bytes)?, None, Vec::new()));
    }
    let mut value: Value = parse_json(bytes)?;
    let filtered = dialect.filtered.map(|f| f(&value)).unwrap_or_default();
    if let Some(rewrite) = dialect.rewrite {
        rewrite(&mut value);
    }
    let kept = dialect.kept(&value);
    let read = T::deserialize(value).map_err(|e| undecodable(format!("{e}")))?;
    Ok((read, kept, filtered))
}

/// The block that holds the fields `dialect` keeps from an answer.
pub(super) fn kept_block(dialect: &Dialect, kept: Value) -> Block {
    Block::Native {
        provider: dialect.provider.to_owned(),
        value: Json::new(kept),
    }
}

/// A thinking block of reasoning text as OpenAI-like servers return it (DeepSeek's,
/// vLLM's and xAI's `reasoning_content`, Groq's and OpenRouter's `reasoning`): unsigned.
pub(super) fn thinking(text: String) -> Block {
    Block::Thinking {
        text,
        signature: None,
        origin: None,
        cache: None,
    }
}

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
/// OpenAI's filters; category `content_filter`, with the `filtered` categories where
/// the dialect names them) or a `refusal` finish (sent by some compatible servers), with
/// `text` kept and the usage billed. A refusal is an answer with its stop reason, which
/// the pipeline judges; never a codec error.
pub(super) fn refused(
    model: &str,
    refusal_text: &str,
    finish_reason: Option<&str>,
    text: &str,
    usage: Usage,
    filtered: &[String],
) -> Option<Result<LlmResponse>> {
    let (stop_reason, category, text) = if !refusal_text.is_empty() {
        (StopReason::Refusal, "refusal".to_owned(), refusal_text)
    } else {
        match finish_reason? {
            "content_filter" => (
                StopReason::ContentFilter,
                Dialect::filter_category(filtered),
                text,
            ),
            "refusal" => (StopReason::Refusal, "refusal".to_owned(), text),
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
    /// Reasoning text (DeepSeek, vLLM, xAI).
    #[serde(default)]
    reasoning_content: Option<String>,
    /// Reasoning text (Groq, OpenRouter).
    #[serde(default)]
    reasoning: Option<String>,
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
    dialect: &Dialect,
) -> Result<LlmResponse> {
    let stop_reason = match stop {
        Some(s) => dialect
            .stop_reason(s)
            .ok_or_else(|| undecodable(format!("unknown finish_reason `{s}`")))?,
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
    decode_response_in(body, &Dialect::OPENAI)
}

/// [`decode_response`] in `dialect`: its finish reasons, its rewrite of the answer, and
/// its kept fields (as a last `Block::Native` of the dialect's provider). Reasoning text
/// (`reasoning_content`, or `reasoning`) becomes a first `Block::Thinking`.
pub fn decode_response_in(body: &[u8], dialect: &Dialect) -> Result<LlmResponse> {
    decode_body(body, dialect).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8], dialect: &Dialect) -> Result<LlmResponse> {
    let (response, kept, filtered): (WireResponse, _, _) = read_filtered_in(body, dialect)?;
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
        &filtered,
    ) {
        return answer;
    }
    let mut content = Vec::new();
    if let Some(text) = message
        .reasoning_content
        .or(message.reasoning)
        .filter(|t| !t.is_empty())
    {
        content.push(thinking(text));
    }
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
    if let Some(kept) = kept {
        content.push(kept_block(dialect, kept));
    }
    finish(
        response.model,
        content,
        choice.finish_reason.as_deref(),
        response.usage.unwrap_or_default().neutral(),
        dialect,
    )
}
