//! The rule that no request setting is dropped on the way to a provider: a codec names
//! the settings it writes, and [`refuse_unwritten`] refuses a request that carries any
//! other with [`Error::UnsupportedSetting`], before anything is sent.

use crate::error::{Error, Result};
use crate::request::LlmRequest;
use crate::settings::Thinking;

/// A request setting a codec may or may not write in its wire form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// Tools offered to the model (function tools; a provider's own tools are checked by
    /// its codec).
    Tools,
    /// A response shape (a JSON Schema the answer must match).
    Shape,
    /// A per-request `tool_choice` other than auto.
    ToolChoice,
    /// `parallel_tool_calls`.
    ParallelToolCalls,
    /// A reasoning effort level.
    ReasoningEffort,
    /// Thinking off or adaptive.
    ThinkingMode,
    /// A thinking token budget.
    ThinkingBudget,
    /// Whether and how reasoning text is shown.
    ReasoningSummary,
    /// Any JSON object, no schema.
    JsonObject,
    /// A response shape's own `strict` flag set to `false` (constrained decoding off).
    LooseShape,
    /// A tool's own `strict` flag.
    ToolStrict,
    /// A sampling seed.
    Seed,
    /// How long an answer the model writes (`verbosity`).
    Verbosity,
}

/// The settings `request` carries that are not in `writes`, each as the request says it.
pub fn unwritten(request: &LlmRequest, writes: &[Setting]) -> Vec<String> {
    let params = request.sampling_params();
    let reasoning = params.reasoning();
    let mut found = Vec::new();
    let mut check = |setting: Setting, present: bool, said: String| {
        if present && !writes.contains(&setting) {
            found.push(said);
        }
    };
    if let Some(choice) = params.tool_choice() {
        check(
            Setting::ToolChoice,
            *choice != crate::settings::ToolChoice::Auto,
            format!("tool_choice: {}", choice.describe()),
        );
    }
    if let Some(first) = request.tools_schema().first() {
        let count = request.tools_schema().len();
        check(
            Setting::Tools,
            true,
            format!("tools ({count}, the first `{}`)", first.name),
        );
    }
    if let Some(shape) = params.response_shape() {
        check(
            Setting::Shape,
            true,
            format!("response shape `{}` (a JSON Schema)", shape.name),
        );
    }
    if let Some(parallel) = params.parallel_tool_calls() {
        check(
            Setting::ParallelToolCalls,
            true,
            format!("parallel_tool_calls: {parallel}"),
        );
    }
    if let Some(effort) = reasoning.effort {
        check(
            Setting::ReasoningEffort,
            true,
            format!("reasoning.effort: {}", effort.as_str()),
        );
    }
    match reasoning.thinking {
        Some(Thinking::Budget { tokens }) => check(
            Setting::ThinkingBudget,
            true,
            format!("reasoning.thinking: budget of {tokens} tokens"),
        ),
        Some(Thinking::Off) => check(Setting::ThinkingMode, true, "thinking: off".into()),
        Some(Thinking::Adaptive) => check(Setting::ThinkingMode, true, "thinking: adaptive".into()),
        None => {}
    }
    if let Some(summary) = reasoning.summary {
        check(
            Setting::ReasoningSummary,
            true,
            format!("reasoning.summary: {summary:?}").to_lowercase(),
        );
    }
    check(
        Setting::JsonObject,
        params.json_object(),
        "JSON object output without a schema (json_object)".into(),
    );
    if let Some(shape) = params.response_shape() {
        check(
            Setting::LooseShape,
            shape.strict == Some(false),
            "response shape with strict: false".into(),
        );
    }
    for tool in request.tools_schema() {
        if let Some(strict) = tool.strict {
            check(
                Setting::ToolStrict,
                true,
                format!("tools[{}].strict: {strict}", tool.name),
            );
        }
    }
    if let Some(seed) = params.seed() {
        check(Setting::Seed, true, format!("seed: {seed}"));
    }
    if let Some(verbosity) = params.verbosity() {
        check(
            Setting::Verbosity,
            !params.drops_hints(),
            format!("verbosity: {}", verbosity.as_str()),
        );
    }
    found
}

/// Refuses `request` with [`Error::UnsupportedSetting`] naming the first setting it
/// carries that the codec does not write (`writes`), for `provider`'s `model`.
pub fn refuse_unwritten(
    request: &LlmRequest,
    provider: &str,
    model: &str,
    writes: &[Setting],
) -> Result<()> {
    match unwritten(request, writes).into_iter().next() {
        Some(feature) => Err(Error::unsupported_setting(feature, provider, model)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Reasoning, ReasoningEffort, SamplingParams, ToolChoice};

    fn request(params: SamplingParams) -> LlmRequest {
        LlmRequest::new("m", vec![Message::user("hi")], vec![], params).unwrap()
    }

    #[test]
    fn a_setting_the_codec_does_not_write_is_refused_naming_it_the_provider_and_the_model() {
        let tool = crate::ToolDefinition::new("f", "", crate::Json::new(serde_json::json!({})));
        let params = SamplingParams::new().with_tool_choice(ToolChoice::Required);
        let r = LlmRequest::new("m", vec![Message::user("hi")], vec![tool], params).unwrap();
        let err = refuse_unwritten(&r, "bedrock", "mistral-7b", &[Setting::Tools]).unwrap_err();
        assert!(matches!(err, Error::UnsupportedSetting { .. }));
        let text = err.to_string();
        assert!(text.contains("tool_choice: required"), "{text}");
        assert!(
            text.contains("bedrock") && text.contains("mistral-7b"),
            "{text}"
        );
        let writes = [Setting::Tools, Setting::ToolChoice];
        assert!(refuse_unwritten(&r, "openai", "gpt", &writes).is_ok());
    }

    #[test]
    fn a_request_without_new_settings_passes_every_codec() {
        let r = request(SamplingParams::new().with_tool_choice(ToolChoice::Auto));
        assert!(unwritten(&r, &[]).is_empty());
    }

    #[test]
    fn every_carried_setting_is_listed() {
        let params = SamplingParams::new()
            .with_parallel_tool_calls(false)
            .with_seed(3)
            .with_json_object()
            .with_reasoning(Reasoning::effort(ReasoningEffort::Low))
            .unwrap();
        let found = unwritten(&request(params), &[Setting::Seed]);
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn verbosity_is_unwritten_unless_the_codec_writes_it_or_the_caller_drops_hints() {
        let params = SamplingParams::new().with_verbosity(crate::Verbosity::Low);
        assert_eq!(unwritten(&request(params.clone()), &[]), ["verbosity: low"]);
        assert!(unwritten(&request(params.clone()), &[Setting::Verbosity]).is_empty());
        // A hint the caller lets go is left out, not refused.
        assert!(unwritten(&request(params.with_droppable_hints()), &[]).is_empty());
    }

    #[test]
    fn tools_and_a_shape_are_refused_by_a_codec_that_writes_neither() {
        let tool = crate::ToolDefinition::new("f", "", crate::Json::new(serde_json::json!({})));
        let r = LlmRequest::new(
            "m",
            vec![Message::user("hi")],
            vec![tool],
            SamplingParams::new(),
        )
        .unwrap();
        let err = refuse_unwritten(&r, "ollama", "llama3", &[]).unwrap_err();
        assert!(
            err.to_string().contains("tools (1, the first `f`)"),
            "{err}"
        );
        assert!(refuse_unwritten(&r, "openai", "gpt", &[Setting::Tools]).is_ok());
        let schema = crate::Json::new(serde_json::json!({"type": "object"}));
        let shaped = request(
            SamplingParams::new().with_response_shape(crate::ResponseShape::new("out", schema)),
        );
        let err = refuse_unwritten(&shaped, "ollama", "llama3", &[]).unwrap_err();
        assert!(err.to_string().contains("response shape `out`"), "{err}");
    }
}
