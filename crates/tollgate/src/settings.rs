//! Request settings the providers share beyond sampling: how tools may be used, how the
//! model reasons, and what shape the answer takes. Each codec writes them in its own wire
//! form, or refuses the request with [`crate::Error::Unsupported`]; none is ever dropped.

use serde::{Deserialize, Serialize};

use crate::json::Json;

/// How the model may use the request's tools (`tool_choice`).
///
/// Per request in [`crate::SamplingParams::with_tool_choice`]; a catalog entry may also set
/// a default (the `tool_choice` option), which a request's own choice overrides.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the providers' default with tools).
    #[default]
    Auto,
    /// The model must use some tool (Anthropic's `any`, OpenAI's `required`).
    Required,
    /// The model must not use tools.
    None,
    /// The model must use this tool.
    Tool(String),
}

impl ToolChoice {
    /// Parses the catalog spelling: `auto`, `none`, `tool:NAME`, or `required`, the
    /// provider's own word for "some tool" (`any` for Anthropic, `required` for OpenAI).
    pub fn parse(text: &str, required: &str) -> Option<Self> {
        match text {
            "auto" => Some(ToolChoice::Auto),
            "none" => Some(ToolChoice::None),
            _ if text == required => Some(ToolChoice::Required),
            _ => text
                .strip_prefix("tool:")
                .filter(|name| !name.is_empty())
                .map(|name| ToolChoice::Tool(name.to_owned())),
        }
    }

    /// The neutral spelling, for messages: `auto`, `none`, `required`, `tool:NAME`.
    pub fn describe(&self) -> String {
        match self {
            ToolChoice::Auto => "auto".into(),
            ToolChoice::Required => "required".into(),
            ToolChoice::None => "none".into(),
            ToolChoice::Tool(name) => format!("tool:{name}"),
        }
    }
}

/// How hard the model reasons: OpenAI's `reasoning_effort` / `reasoning.effort`,
/// Anthropic's and Bedrock's `output_config.effort`, Gemini 3's `thinkingLevel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    /// No reasoning (OpenAI `none`; Anthropic: thinking disabled).
    None,
    /// The least reasoning a model does (OpenAI `minimal`).
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Higher than high (OpenAI and Anthropic `xhigh`).
    #[serde(rename = "xhigh")]
    XHigh,
    /// The most (`max`).
    Max,
}

impl ReasoningEffort {
    /// The wire spelling shared by OpenAI and Anthropic: `none` … `max`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::XHigh => "xhigh",
            ReasoningEffort::Max => "max",
        }
    }

    /// Parses the wire spelling; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "none" => ReasoningEffort::None,
            "minimal" => ReasoningEffort::Minimal,
            "low" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" => ReasoningEffort::High,
            "xhigh" => ReasoningEffort::XHigh,
            "max" => ReasoningEffort::Max,
            _ => return Option::None,
        })
    }

    /// Every value's wire spelling, for error messages.
    pub const ACCEPTED: &'static str = "none, minimal, low, medium, high, xhigh, max";
}

/// Whether and how the model thinks before answering: Anthropic's `thinking`, Gemini's
/// `thinkingBudget`, Bedrock Claude's `thinking` in `additionalModelRequestFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Thinking {
    /// No thinking (Anthropic `disabled`, Gemini budget 0).
    Off,
    /// The model decides how much to think (Anthropic `adaptive`, Gemini budget -1).
    Adaptive,
    /// Think with at most this many tokens (Anthropic `enabled` + `budget_tokens`).
    Budget {
        /// The thinking budget in tokens (Anthropic: at least 1024, below the output limit).
        tokens: u64,
    },
}

/// Whether the model's reasoning is shown, and how (OpenAI `reasoning.summary`,
/// Anthropic `thinking.display`, Gemini `includeThoughts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningSummary {
    /// The provider's choice of summary (OpenAI `auto`, Anthropic `summarized`).
    Auto,
    /// A short summary (OpenAI `concise`).
    Concise,
    /// A detailed summary (OpenAI `detailed`).
    Detailed,
    /// No reasoning text; signatures still come back (Anthropic `omitted`).
    Omitted,
}

/// How the model reasons: an effort level, a thinking mode or budget, and whether the
/// reasoning is shown. Every part is optional; an empty one is the provider's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reasoning {
    /// The effort level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// Thinking off, adaptive, or with a token budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Whether and how reasoning text is returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ReasoningSummary>,
}

impl Reasoning {
    /// Reasoning at an effort level.
    pub fn effort(effort: ReasoningEffort) -> Self {
        Reasoning {
            effort: Some(effort),
            ..Reasoning::default()
        }
    }

    /// Thinking in a mode.
    pub fn thinking(thinking: Thinking) -> Self {
        Reasoning {
            thinking: Some(thinking),
            ..Reasoning::default()
        }
    }

    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.effort.is_none() && self.thinking.is_none() && self.summary.is_none()
    }
}

/// A JSON Schema the answer must satisfy (checked by the call pipeline).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResponseShape {
    /// A short name for the shape, sent to providers that want one.
    pub name: String,
    /// The JSON Schema.
    pub schema: Json,
    /// Whether the provider must constrain its output to the schema (OpenAI's `strict`):
    /// `None` leaves it to the provider's default. [`ResponseShape::new`] sets `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

impl ResponseShape {
    /// A strict shape: providers that can constrain output to the schema are asked to.
    pub fn new(name: impl Into<String>, schema: Json) -> Self {
        ResponseShape {
            name: name.into(),
            schema,
            strict: Some(true),
        }
    }

    /// This shape with `strict` as given (`None`: the provider's default).
    pub fn with_strict(mut self, strict: Option<bool>) -> Self {
        self.strict = strict;
        self
    }
}

/// How long an answer the model writes: OpenAI's `verbosity` (chat) and
/// `text.verbosity` (Responses). Providers without the field refuse it by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verbosity {
    /// Short answers.
    Low,
    /// The default.
    Medium,
    /// Long answers.
    High,
}

impl Verbosity {
    /// The wire spelling: `low`, `medium`, `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verbosity::Low => "low",
            Verbosity::Medium => "medium",
            Verbosity::High => "high",
        }
    }

    /// Parses the wire spelling; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "low" => Verbosity::Low,
            "medium" => Verbosity::Medium,
            "high" => Verbosity::High,
            _ => return None,
        })
    }

    /// Every value's wire spelling, for error messages.
    pub const ACCEPTED: &'static str = "low, medium, high";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_parses_every_wire_spelling_it_writes() {
        for v in [Verbosity::Low, Verbosity::Medium, Verbosity::High] {
            assert_eq!(Verbosity::parse(v.as_str()), Some(v));
            assert!(Verbosity::ACCEPTED.contains(v.as_str()));
        }
        assert_eq!(Verbosity::parse("loud"), None);
    }

    #[test]
    fn reasoning_effort_parses_every_wire_spelling_it_writes() {
        for effort in [
            ReasoningEffort::None,
            ReasoningEffort::Minimal,
            ReasoningEffort::Low,
            ReasoningEffort::Medium,
            ReasoningEffort::High,
            ReasoningEffort::XHigh,
            ReasoningEffort::Max,
        ] {
            assert_eq!(ReasoningEffort::parse(effort.as_str()), Some(effort));
            assert!(ReasoningEffort::ACCEPTED.contains(effort.as_str()));
            let json = serde_json::to_string(&effort).unwrap();
            assert_eq!(json, format!("\"{}\"", effort.as_str()));
        }
        assert_eq!(ReasoningEffort::parse("extreme"), None);
    }

    #[test]
    fn tool_choice_round_trips_through_json() {
        for choice in [
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::None,
            ToolChoice::Tool("City".into()),
        ] {
            let json = serde_json::to_string(&choice).unwrap();
            assert_eq!(serde_json::from_str::<ToolChoice>(&json).unwrap(), choice);
        }
        assert_eq!(ToolChoice::Tool("f".into()).describe(), "tool:f");
    }

    #[test]
    fn thinking_budget_is_tagged_by_mode() {
        let json = serde_json::to_value(Thinking::Budget { tokens: 2048 }).unwrap();
        assert_eq!(json, serde_json::json!({"mode": "budget", "tokens": 2048}));
        let off: Thinking = serde_json::from_value(serde_json::json!({"mode": "off"})).unwrap();
        assert_eq!(off, Thinking::Off);
    }

    use crate::{LlmRequest, Message, ResponseShape, SamplingParams, compute_cache_key};

    fn key(params: SamplingParams) -> crate::CacheKey {
        // A tool, so that a forcing tool choice is a valid request.
        let tool = crate::ToolDefinition::new("f", "", crate::Json::new(serde_json::json!({})));
        let request = LlmRequest::new("m", vec![Message::user("hi")], vec![tool], params).unwrap();
        compute_cache_key(&request, "k", 0).unwrap()
    }

    #[test]
    fn the_cache_key_covers_every_new_request_setting() {
        let plain = key(SamplingParams::new());
        let variants = [
            SamplingParams::new().with_tool_choice(ToolChoice::Required),
            SamplingParams::new().with_parallel_tool_calls(false),
            SamplingParams::new()
                .with_reasoning(Reasoning::effort(ReasoningEffort::High))
                .unwrap(),
            SamplingParams::new()
                .with_reasoning(Reasoning::thinking(Thinking::Adaptive))
                .unwrap(),
            SamplingParams::new().with_json_object(),
            SamplingParams::new().with_seed(7),
            SamplingParams::new().with_verbosity(Verbosity::Low),
            SamplingParams::new().with_response_shape(
                ResponseShape::new("s", crate::Json::new(serde_json::json!({"type": "object"})))
                    .with_strict(Some(false)),
            ),
        ];
        let mut keys: Vec<_> = variants.into_iter().map(key).collect();
        keys.push(plain);
        let count = keys.len();
        keys.sort_by_key(|k| k.to_string());
        keys.dedup();
        assert_eq!(keys.len(), count, "every setting must change the cache key");
    }

    #[test]
    fn json_object_with_a_response_shape_is_refused_naming_the_field() {
        let params = SamplingParams::new()
            .with_json_object()
            .with_response_shape(ResponseShape::new(
                "s",
                crate::Json::new(serde_json::json!({"type": "object"})),
            ));
        let err = LlmRequest::new("m", vec![Message::user("hi")], vec![], params).unwrap_err();
        assert!(
            err.to_string().contains("sampling_params.json_object"),
            "{err}"
        );
    }

    #[test]
    fn a_thinking_budget_must_be_below_the_output_limit() {
        let err = SamplingParams::new()
            .with_max_output_tokens(1000)
            .unwrap()
            .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 2048 }))
            .unwrap_err();
        assert!(err.to_string().contains("below the output limit"), "{err}");
        let zero = SamplingParams::new()
            .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 0 }))
            .unwrap_err();
        assert!(zero.to_string().contains("at least 1 token"), "{zero}");
    }

    #[test]
    fn system_messages_may_come_later_in_the_request() {
        let request = LlmRequest::new(
            "m",
            vec![Message::user("hi"), Message::system("# Environment")],
            vec![],
            SamplingParams::new(),
        )
        .unwrap();
        assert_eq!(request.system().count(), 0);
        assert_eq!(request.turns().len(), 2);
    }

    #[test]
    fn a_forcing_tool_choice_without_tools_is_refused_by_the_request_naming_the_field() {
        use crate::{Error, LlmRequest, Message, SamplingParams};
        for choice in [ToolChoice::Required, ToolChoice::Tool("f".into())] {
            let params = SamplingParams::new().with_tool_choice(choice);
            let err = LlmRequest::new("m", vec![Message::user("hi")], vec![], params).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidRequest { field, .. } if field == "sampling_params.tool_choice"),
                "{err:?}"
            );
        }
        // `none` and `auto` with no tools mean what they say.
        for choice in [ToolChoice::None, ToolChoice::Auto] {
            let params = SamplingParams::new().with_tool_choice(choice);
            assert!(LlmRequest::new("m", vec![Message::user("hi")], vec![], params).is_ok());
        }
    }
}
