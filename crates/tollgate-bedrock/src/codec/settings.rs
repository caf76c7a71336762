//! The request settings beyond sampling, as Converse writes them ([`WRITES`]): tool
//! choice as `toolConfig.toolChoice`, reasoning effort as `outputConfig.effort`, thinking
//! as Claude's `thinking` in `additionalModelRequestFields`. Every other setting is
//! refused by [`refuse_unwritten`](tollgate::provider::refuse_unwritten), never dropped.

use aws_sdk_bedrockruntime::types::{AnyToolChoice, SpecificToolChoice, ToolChoice as WireChoice};
use serde_json::{Map, Value, json};
use tollgate::provider::{
    Block, Error, LlmRequest, ReasoningEffort, Result, SamplingParams, Thinking,
};
use tollgate::provider::{Setting, ToolChoice};

/// The settings Converse writes. Refused: parallel tool calls (`ToolConfiguration` has
/// no such field), a reasoning summary style, JSON without a schema (`outputConfig`
/// takes `json_schema` only), a loose schema (always constrained) and a seed.
pub(super) const WRITES: &[Setting] = &[
    Setting::Tools,
    Setting::Shape,
    Setting::ToolChoice,
    Setting::ReasoningEffort,
    Setting::ThinkingMode,
    Setting::ThinkingBudget,
    Setting::ToolStrict,
];

/// What a request's tool choice makes of its `toolConfig`.
#[derive(Debug)]
pub(super) enum Choice {
    /// No `toolChoice`: the model decides (Converse's default).
    Default,
    /// `toolChoice` as given (`any`, or `tool` with a name).
    Wire(WireChoice),
    /// `none`: Converse has no such choice, so no `toolConfig` is sent and the model sees
    /// no tools.
    NoTools,
}

/// Whether any message holds a tool use or a tool result.
fn has_tool_history(request: &LlmRequest) -> bool {
    request.messages().iter().any(|m| {
        m.content
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. } | Block::ToolResult { .. }))
    })
}

/// The request's tool choice in Converse's terms. `none` leaves the tools out, which
/// Converse refuses once the conversation holds tool uses or results ("toolConfig must
/// be defined"): then it is refused here, naming the setting and `model`.
/// (A forcing choice with no tools to force never gets here: `LlmRequest::new` refuses it.)
pub(super) fn tool_choice(request: &LlmRequest, model: &str) -> Result<Choice> {
    let choice = request.sampling_params().tool_choice();
    Ok(match choice {
        None | Some(ToolChoice::Auto) => Choice::Default,
        Some(ToolChoice::Required) => {
            Choice::Wire(WireChoice::Any(AnyToolChoice::builder().build()))
        }
        Some(ToolChoice::Tool(name)) => Choice::Wire(WireChoice::Tool(
            SpecificToolChoice::builder()
                .name(name)
                .build()
                .map_err(|e| {
                    Error::invalid_request(
                        "sampling_params.tool_choice",
                        format!("could not be encoded for Converse: {e}"),
                    )
                })?,
        )),
        Some(ToolChoice::None) if has_tool_history(request) => {
            return Err(Error::unsupported_setting(
                "tool_choice: none with tool uses in the conversation (Converse has no `none` \
                 choice, and needs its tools while the history holds tool blocks)",
                "bedrock",
                model,
            ));
        }
        Some(ToolChoice::None) => Choice::NoTools,
    })
}

/// `outputConfig.effort`: as Anthropic spells it (`minimal` is `low`); `none` is written
/// as thinking disabled instead ([`additional_fields`]).
pub(super) fn effort(sampling: &SamplingParams) -> Option<&'static str> {
    match sampling.reasoning().effort? {
        ReasoningEffort::None => None,
        ReasoningEffort::Minimal => Some("low"),
        other => Some(other.as_str()),
    }
}

/// `additionalModelRequestFields`: Claude's `thinking` (disabled, adaptive, or enabled
/// with a budget of at least 1024 tokens and below `maxTokens`). Other model families
/// take no `thinking` field, and Bedrock refuses it for them (a `ValidationException`).
pub(super) fn additional_fields(
    sampling: &SamplingParams,
    max_tokens: u64,
) -> Result<Option<Value>> {
    let reasoning = sampling.reasoning();
    let thinking = match reasoning.thinking {
        Some(Thinking::Off) => json!({"type": "disabled"}),
        Some(Thinking::Adaptive) => json!({"type": "adaptive"}),
        Some(Thinking::Budget { tokens }) => {
            if tokens < 1024 || tokens >= max_tokens {
                return Err(Error::invalid_request(
                    "sampling_params.reasoning.thinking.tokens",
                    format!(
                        "is {tokens}; Claude on Bedrock takes a thinking budget of at least 1024 \
                         tokens and below maxTokens ({max_tokens})"
                    ),
                ));
            }
            json!({"type": "enabled", "budget_tokens": tokens})
        }
        None if reasoning.effort == Some(ReasoningEffort::None) => json!({"type": "disabled"}),
        None => return Ok(None),
    };
    let mut fields = Map::new();
    fields.insert("thinking".into(), thinking);
    Ok(Some(Value::Object(fields)))
}
