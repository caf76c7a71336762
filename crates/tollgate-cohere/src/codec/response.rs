//! Chat answers: [`decode_response`], usage and finish reasons.

use serde::{Deserialize, Deserializer};
use tollgate::provider::{BlockAssembler, keep_raw, parse_json, undecodable};
use tollgate::provider::{LlmResponse, ResponseBody, Result, StopReason, Usage};

use super::errors::read_failed_finish;

/// Token counts as Cohere sends them (numbers, which its SDK types as floats).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(super) struct Units {
    #[serde(default)]
    input_tokens: Option<f64>,
    #[serde(default)]
    output_tokens: Option<f64>,
}

fn whole(n: Option<f64>) -> Option<u64> {
    // Token counts are whole and non-negative; a float is rounded, a negative is 0.
    n.map(|n| n.max(0.0).round() as u64)
}

impl Units {
    pub(super) fn input(&self) -> Option<u64> {
        whole(self.input_tokens)
    }

    fn output(&self) -> Option<u64> {
        whole(self.output_tokens)
    }

    fn is_empty(&self) -> bool {
        self.input_tokens.is_none() && self.output_tokens.is_none()
    }
}

/// The wire `usage` object: `billed_units` (what Cohere bills) and `tokens` (what the
/// model read and wrote, with Cohere's own prompt template).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct WireUsage {
    #[serde(default)]
    billed_units: Option<Units>,
    #[serde(default)]
    tokens: Option<Units>,
}

impl WireUsage {
    /// In tollgate's convention: the billed input and output tokens (`billed_units`),
    /// or `tokens` where an answer carries no billed units. Cohere reports no cache
    /// writes and prices no cache reads (`cached_tokens` is not read).
    pub fn neutral(&self) -> Usage {
        let units = self
            .billed_units
            .filter(|u| !u.is_empty())
            .or(self.tokens)
            .unwrap_or_default();
        Usage::from_cache_inclusive(
            units.input().unwrap_or(0),
            0,
            0,
            units.output().unwrap_or(0),
        )
    }
}

/// Maps a finish reason that ends an answer: `COMPLETE`, `STOP_SEQUENCE`, `MAX_TOKENS`,
/// `TOOL_CALL`. `ERROR` and `TIMEOUT` end none (they are failures,
/// [`read_failed_finish`]); an unknown value is `None`.
pub fn stop_reason(wire: &str) -> Option<StopReason> {
    Some(match wire {
        "COMPLETE" => StopReason::EndTurn,
        "STOP_SEQUENCE" => StopReason::StopSequence,
        "MAX_TOKENS" => StopReason::MaxTokens,
        "TOOL_CALL" => StopReason::ToolUse,
        _ => return None,
    })
}

/// The answer's stop reason, or the failure its finish reason stands for.
pub(super) fn finish(wire: &str, error: Option<&str>) -> Result<StopReason> {
    if let Some(failed) = read_failed_finish(wire, error) {
        return Err(failed.verdict());
    }
    stop_reason(wire).ok_or_else(|| undecodable(format!("unknown finish_reason `{wire}`")))
}

/// Reads `null` as the default.
pub(super) fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    finish_reason: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    message: WireMessage,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default, deserialize_with = "null_as_default")]
    content: Vec<WireContent>,
    #[serde(default)]
    tool_plan: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Debug, Deserialize)]
struct WireContent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    function: WireFunction,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

/// Where a block of an answer comes from: a content item by its `index` (text or
/// thinking), the tool plan, or a tool call by its own `index` (Cohere counts content
/// items and tool calls apart). Whole answers and streams key their blocks alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    Content(u64),
    Plan,
    Call(u64),
}

/// Decodes a (non-streamed) `/v2/chat` answer of `model` (Cohere's answer names no
/// model). A body that does not decode is `ProviderError::Malformed` (retried) with its
/// first bytes; a `finish_reason` of `ERROR` is a `Server` error (500) and `TIMEOUT` a
/// `Timeout`, both retried.
pub fn decode_response(body: &[u8], model: &str) -> Result<LlmResponse> {
    decode_body(body, model).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8], model: &str) -> Result<LlmResponse> {
    let response: WireResponse = parse_json(body)?;
    let wire = response
        .finish_reason
        .ok_or_else(|| undecodable("no finish_reason"))?;
    let stop_reason = finish(&wire, None)?;
    let message = response.message;
    let mut blocks = BlockAssembler::new();
    for (i, part) in (0u64..).zip(message.content) {
        match part.kind.as_str() {
            "text" => blocks.text(Slot::Content(i), part.text.as_deref().unwrap_or_default())?,
            "thinking" => blocks.thinking(
                Slot::Content(i),
                part.thinking.as_deref().unwrap_or_default(),
            )?,
            other => {
                return Err(undecodable(format!(
                    "message.content[{i}] is of unknown type `{other}`"
                )));
            }
        };
    }
    if let Some(plan) = message.tool_plan.filter(|p| !p.is_empty()) {
        blocks.text(Slot::Plan, &plan)?;
    }
    for (i, call) in (0u64..).zip(message.tool_calls) {
        let f = call.function;
        blocks.tool_use(Slot::Call(i), &call.id, &f.name, &f.arguments)?;
    }
    let content = blocks.finish()?;
    LlmResponse::new(ResponseBody {
        model: model.to_owned(),
        content,
        stop_reason,
        usage: response.usage.unwrap_or_default().neutral(),
        refusal: None,
    })
}
