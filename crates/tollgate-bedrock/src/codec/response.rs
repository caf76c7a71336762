//! Answer decoding: a Converse answer, its stop reason and usage, into tollgate's
//! neutral types ([`decode`]).

use aws_sdk_bedrockruntime::types::{
    CacheTtl, ContentBlock, Message as WireMessage, ReasoningContentBlock, StopReason as WireStop,
    TokenUsage,
};
use tollgate::provider::undecodable;
use tollgate::provider::{
    Block, Json, LlmResponse, Refusal, ResponseBody, Result, StopReason, Usage,
};

use super::document::to_json;

/// The refusal category of a content-filter stop: `guardrail_intervened` (a guardrail
/// stopped the answer) or `content_filtered` (the model's own filter); `None` for
/// every other stop.
pub(crate) fn filter_category(wire: &WireStop) -> Option<&'static str> {
    match wire {
        WireStop::GuardrailIntervened => Some("guardrail_intervened"),
        WireStop::ContentFiltered => Some("content_filtered"),
        _ => None,
    }
}

/// Maps a Converse stop reason. `guardrail_intervened` and `content_filtered` are content
/// filters; `model_context_window_exceeded` is an overflow (the window is full), not a
/// truncation;
/// malformed model output is an error.
pub(crate) fn stop_reason(wire: &WireStop) -> Result<StopReason> {
    Ok(match wire {
        WireStop::EndTurn => StopReason::EndTurn,
        WireStop::ToolUse => StopReason::ToolUse,
        WireStop::MaxTokens => StopReason::MaxTokens,
        WireStop::ModelContextWindowExceeded => StopReason::ContextWindowExceeded,
        WireStop::StopSequence => StopReason::StopSequence,
        WireStop::GuardrailIntervened | WireStop::ContentFiltered => StopReason::ContentFilter,
        other => return Err(undecodable(format!("stop reason `{}`", other.as_str()))),
    })
}

fn count(n: Option<i32>) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

/// Converse usage in tollgate's convention: `inputTokens` excludes cache reads and
/// writes; writes are split by TTL where `cacheDetails` gives it.
pub(crate) fn usage(wire: Option<&TokenUsage>) -> Usage {
    let Some(u) = wire else {
        return Usage::default();
    };
    let writes = count(u.cache_write_input_tokens());
    let hour: u64 = u
        .cache_details()
        .iter()
        .filter(|d| matches!(d.ttl(), CacheTtl::OneHour))
        .map(|d| count(Some(d.input_tokens())))
        .sum();
    Usage::from_cache_exclusive(
        count(Some(u.input_tokens())),
        count(u.cache_read_input_tokens()),
        writes.saturating_sub(hour),
        hour.min(writes),
        count(Some(u.output_tokens())),
    )
}

/// Converse's redacted reasoning: its bytes, kept as base64 (as the wire carries them),
/// marked as Bedrock's so it goes back only there.
pub(super) fn redacted(bytes: &aws_smithy_types::Blob) -> Block {
    Block::RedactedThinking {
        data: aws_smithy_types::base64::encode(bytes.as_ref()),
        origin: Some("bedrock".to_owned()),
    }
}

fn decode_block(block: &ContentBlock) -> Result<Option<Block>> {
    Ok(Some(match block {
        ContentBlock::Text(text) => Block::Text {
            text: text.clone(),
            cache: None,
        },
        ContentBlock::ToolUse(t) => Block::ToolUse {
            id: t.tool_use_id().to_owned(),
            name: t.name().to_owned(),
            input: Json::new(to_json(t.input())),
            cache: None,
        },
        ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(r)) => {
            Block::Thinking {
                text: r.text().to_owned(),
                signature: r.signature().map(str::to_owned),
                origin: r.signature().map(|_| "bedrock".to_owned()),
                cache: None,
            }
        }
        ContentBlock::ReasoningContent(ReasoningContentBlock::RedactedContent(bytes)) => {
            redacted(bytes)
        }
        // Kinds tollgate has no neutral form for (citations, …).
        _ => return Ok(None),
    }))
}

/// Decodes a Converse answer. A content-filter stop is a refused
/// answer ([`filter_category`] its category) with the usage Bedrock billed.
pub(crate) fn decode(
    model: &str,
    message: Option<&WireMessage>,
    stop: &WireStop,
    wire_usage: Option<&TokenUsage>,
) -> Result<LlmResponse> {
    let message = message.ok_or_else(|| undecodable("no output message"))?;
    let mut content = Vec::new();
    for block in message.content() {
        content.extend(decode_block(block)?);
    }
    LlmResponse::new(ResponseBody {
        model: model.to_owned(),
        content,
        stop_reason: stop_reason(stop)?,
        usage: usage(wire_usage),
        refusal: filter_category(stop).map(Refusal::new),
    })
}
