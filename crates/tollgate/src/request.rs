//! The provider-neutral request: exactly four components, immutable once built.

use serde::{Deserialize, Serialize};

use crate::conversation::{Conversation, Message, Role, ToolDefinition};
use crate::error::{Error, Result};
use crate::json::Float;
pub use crate::settings::ResponseShape;
use crate::settings::{Reasoning, Thinking, ToolChoice, Verbosity};

/// How to sample: temperature, top_p, stop sequences, output limit, response shape.
///
/// Built with the `with_*` methods, which check each value (`temperature` in 0..=2,
/// `top_p` in (0, 1], a positive output limit).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    temperature: Option<Float>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    top_p: Option<Float>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    stop: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response_shape: Option<ResponseShape>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    keep_truncated: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    keep_refusals: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    keep_shape_misses: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    drop_hints: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    json_object: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Reasoning::is_empty")]
    reasoning: Reasoning,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    verbosity: Option<Verbosity>,
}

impl SamplingParams {
    /// No parameters set: the provider's defaults and the catalog's `default_output_tokens`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the temperature (0 to 2).
    pub fn with_temperature(mut self, temperature: f64) -> Result<Self> {
        self.temperature = Some(check_range(
            "sampling_params.temperature",
            temperature,
            0.0,
            2.0,
            true,
        )?);
        Ok(self)
    }

    /// Sets nucleus sampling (above 0, at most 1).
    pub fn with_top_p(mut self, top_p: f64) -> Result<Self> {
        self.top_p = Some(check_range(
            "sampling_params.top_p",
            top_p,
            0.0,
            1.0,
            false,
        )?);
        Ok(self)
    }

    /// Adds a stop sequence.
    pub fn with_stop(mut self, stop: impl Into<String>) -> Self {
        self.stop.push(stop.into());
        self
    }

    /// Sets the output limit in tokens (at least 1).
    pub fn with_max_output_tokens(mut self, tokens: u64) -> Result<Self> {
        if tokens == 0 {
            return Err(Error::InvalidRequest {
                field: "sampling_params.max_output_tokens".into(),
                reason: "must be at least 1".into(),
            });
        }
        self.max_output_tokens = Some(tokens);
        self.check_reasoning()?;
        Ok(self)
    }

    /// Declares a JSON Schema the answer must satisfy.
    pub fn with_response_shape(mut self, shape: ResponseShape) -> Self {
        self.response_shape = Some(shape);
        self
    }

    /// Returns an answer cut off at the output limit as it is (stop reason
    /// [`crate::StopReason::MaxTokens`]), rather than sending it again at the model's
    /// ceiling or failing with [`crate::Error::OutputTruncated`]: for callers that chose
    /// the limit and want what fits in it, as a gateway's clients do. One send, one bill.
    pub fn with_truncated_answers(mut self) -> Self {
        self.keep_truncated = true;
        self
    }

    /// Whether a cut-off answer is returned as it is ([`SamplingParams::with_truncated_answers`]).
    pub fn keeps_truncated(&self) -> bool {
        self.keep_truncated
    }

    /// Returns a refused or filtered answer as an answer (stop reason
    /// [`crate::StopReason::Refusal`] or [`crate::StopReason::ContentFilter`], the
    /// provider's explanation as its text, its usage), rather than failing with
    /// [`crate::Error::ProviderRefusal`]: for a caller that relays answers to a client
    /// that reads refusals itself, as a gateway's clients do. Costed the same either way.
    pub fn with_refusals_as_answers(mut self) -> Self {
        self.keep_refusals = true;
        self
    }

    /// Whether a refusal is returned as an answer ([`SamplingParams::with_refusals_as_answers`]).
    pub fn keeps_refusals(&self) -> bool {
        self.keep_refusals
    }

    /// Lets a provider leave out a hint it has no field for (today `verbosity`, which
    /// only tunes length) instead of refusing the request with
    /// [`crate::Error::UnsupportedSetting`]: for a gateway whose clients send OpenAI's
    /// hints to every model. Settings that change what comes back are still refused.
    pub fn with_droppable_hints(mut self) -> Self {
        self.drop_hints = true;
        self
    }

    /// Whether hints may be left out ([`SamplingParams::with_droppable_hints`]).
    pub fn drops_hints(&self) -> bool {
        self.drop_hints
    }

    /// Returns an answer that misses its response shape as the provider gave it, rather
    /// than asking again with the errors (the correction loop) or failing with
    /// [`crate::Error::ShapeInvalid`]: for a caller whose client checks the shape itself.
    /// One send, one bill.
    pub fn with_shape_misses(mut self) -> Self {
        self.keep_shape_misses = true;
        self
    }

    /// Whether an answer that misses its shape is returned as it is
    /// ([`SamplingParams::with_shape_misses`]).
    pub fn keeps_shape_misses(&self) -> bool {
        self.keep_shape_misses
    }

    /// Asks for any JSON object as the answer, with no schema (OpenAI's `json_object`
    /// mode): distinct from a [`ResponseShape`], and refused with one.
    pub fn with_json_object(mut self) -> Self {
        self.json_object = true;
        self
    }

    /// Whether the answer must be a JSON object ([`SamplingParams::with_json_object`]).
    pub fn json_object(&self) -> bool {
        self.json_object
    }

    /// How the model may use the tools, overriding the catalog's `tool_choice` option.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// The request's own tool choice, if any (otherwise the catalog's default applies).
    pub fn tool_choice(&self) -> Option<&ToolChoice> {
        self.tool_choice.as_ref()
    }

    /// Whether the model may call several tools in one turn (`false`: at most one).
    pub fn with_parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.parallel_tool_calls = Some(parallel);
        self
    }

    /// Parallel tool calls, if the request says.
    pub fn parallel_tool_calls(&self) -> Option<bool> {
        self.parallel_tool_calls
    }

    /// How the model reasons (effort, thinking mode or budget, summary). A budget must be
    /// at least 1 token and below the output limit when one is set.
    pub fn with_reasoning(mut self, reasoning: Reasoning) -> Result<Self> {
        self.reasoning = reasoning;
        self.check_reasoning()?;
        Ok(self)
    }

    /// The reasoning settings (empty: the provider's default).
    pub fn reasoning(&self) -> &Reasoning {
        &self.reasoning
    }

    /// A sampling seed, for providers that sample reproducibly on a best-effort basis.
    pub fn with_seed(mut self, seed: i64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The seed, if set.
    pub fn seed(&self) -> Option<i64> {
        self.seed
    }

    /// How long an answer the model writes (OpenAI's `verbosity` / `text.verbosity`).
    pub fn with_verbosity(mut self, verbosity: Verbosity) -> Self {
        self.verbosity = Some(verbosity);
        self
    }

    /// The verbosity, if set.
    pub fn verbosity(&self) -> Option<Verbosity> {
        self.verbosity
    }

    fn check_reasoning(&self) -> Result<()> {
        if let Some(Thinking::Budget { tokens }) = self.reasoning.thinking {
            if tokens == 0 {
                return Err(Error::InvalidRequest {
                    field: "sampling_params.reasoning.thinking.tokens".into(),
                    reason: "a thinking budget must be at least 1 token".into(),
                });
            }
            if let Some(limit) = self.max_output_tokens.filter(|limit| tokens >= *limit) {
                return Err(Error::InvalidRequest {
                    field: "sampling_params.reasoning.thinking.tokens".into(),
                    reason: format!(
                        "a thinking budget of {tokens} tokens must be below the output limit \
                         ({limit}); raise max_output_tokens or lower the budget"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Temperature, if set.
    pub fn temperature(&self) -> Option<f64> {
        self.temperature.map(Float::get)
    }

    /// top_p, if set.
    pub fn top_p(&self) -> Option<f64> {
        self.top_p.map(Float::get)
    }

    /// Stop sequences.
    pub fn stop(&self) -> &[String] {
        &self.stop
    }

    /// Output limit, if set (otherwise the catalog's `default_output_tokens` applies).
    pub fn max_output_tokens(&self) -> Option<u64> {
        self.max_output_tokens
    }

    /// Declared response shape, if any.
    pub fn response_shape(&self) -> Option<&ResponseShape> {
        self.response_shape.as_ref()
    }

    fn validate(&self) -> Result<()> {
        if let Some(t) = self.temperature {
            check_range("sampling_params.temperature", t.get(), 0.0, 2.0, true)?;
        }
        if let Some(p) = self.top_p {
            check_range("sampling_params.top_p", p.get(), 0.0, 1.0, false)?;
        }
        if self.max_output_tokens == Some(0) {
            return Err(Error::InvalidRequest {
                field: "sampling_params.max_output_tokens".into(),
                reason: "must be at least 1".into(),
            });
        }
        if self.json_object && self.response_shape.is_some() {
            return Err(Error::InvalidRequest {
                field: "sampling_params.json_object".into(),
                reason: "asks for any JSON object, but a response shape is also declared; \
                         keep one of the two"
                    .into(),
            });
        }
        self.check_reasoning()
    }
}

fn check_range(field: &str, value: f64, low: f64, high: f64, low_inclusive: bool) -> Result<Float> {
    let ok = value.is_finite()
        && (if low_inclusive {
            value >= low
        } else {
            value > low
        })
        && value <= high;
    match Float::new(value) {
        Some(f) if ok => Ok(f),
        _ => Err(Error::InvalidRequest {
            field: field.into(),
            reason: format!(
                "must be a number {}{low} and at most {high}, got {value}",
                if low_inclusive { "from " } else { "above " }
            ),
        }),
    }
}

/// A provider-neutral request: exactly `model_id`, `messages`, `tools_schema` and
/// `sampling_params`; no credentials, connection or transport state.
///
/// Immutable: the fields are private and there is no `&mut` method, so a request that
/// was priced, reserved and cache-keyed cannot change underneath. Derive a changed
/// copy with the `with_*` methods.
///
/// Build one from a [`Conversation`](crate::Conversation), or directly; it is checked
/// when built, so a malformed request fails before anything is priced or sent:
///
/// ```
/// use tollgate::{Error, LlmRequest, Message, SamplingParams};
///
/// let request = LlmRequest::new(
///     "assistant",
///     vec![Message::system("Be brief."), Message::user("Why reserve before sending?")],
///     vec![],
///     SamplingParams::new().with_temperature(0.2)?.with_max_output_tokens(200)?,
/// )?;
/// assert_eq!(request.turns().len(), 1); // the system message leads, outside the turns
///
/// // A changed copy; the original is untouched (and so is its cache key).
/// let longer = request.with_max_output_tokens(800)?;
/// assert_eq!(longer.sampling_params().max_output_tokens(), Some(800));
/// assert_eq!(request.sampling_params().max_output_tokens(), Some(200));
///
/// // Checked: a request with nothing but system text is rejected, naming the field.
/// let empty = LlmRequest::new("assistant", vec![Message::system("Be brief.")], vec![], SamplingParams::new());
/// assert!(matches!(empty, Err(Error::InvalidRequest { .. })));
/// # Ok::<(), tollgate::Error>(())
/// ```
///
/// ```compile_fail
/// # use tollgate::{LlmRequest, Message, SamplingParams};
/// let request = LlmRequest::new("m", vec![Message::user("hi")], vec![], SamplingParams::new()).unwrap();
/// request.model_id = "other".to_string(); // private field: does not compile
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawRequest", deny_unknown_fields)]
pub struct LlmRequest {
    model_id: String,
    messages: Vec<Message>,
    tools_schema: Vec<ToolDefinition>,
    sampling_params: SamplingParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    model_id: String,
    messages: Vec<Message>,
    #[serde(default)]
    tools_schema: Vec<ToolDefinition>,
    #[serde(default)]
    sampling_params: SamplingParams,
}

impl TryFrom<RawRequest> for LlmRequest {
    type Error = Error;

    fn try_from(raw: RawRequest) -> Result<Self> {
        LlmRequest::new(
            raw.model_id,
            raw.messages,
            raw.tools_schema,
            raw.sampling_params,
        )
    }
}

impl LlmRequest {
    /// Builds a request, checking it: a non-empty model id, at least one non-system
    /// message, no empty message, unique tool names, each tool's parameters an object
    /// schema (provider-native tools excepted). System messages may come anywhere: the
    /// leading ones are [`LlmRequest::system`], later ones stay in place in the turns.
    pub fn new(
        model_id: impl Into<String>,
        messages: Vec<Message>,
        tools_schema: Vec<ToolDefinition>,
        sampling_params: SamplingParams,
    ) -> Result<Self> {
        let model_id = model_id.into();
        if model_id.trim().is_empty() {
            return Err(invalid("model_id", "must name a catalog model"));
        }
        let mut seen_other = false;
        for (i, message) in messages.iter().enumerate() {
            if message.content.is_empty() {
                return Err(invalid(
                    &format!("messages[{i}].content"),
                    "must hold at least one block",
                ));
            }
            // A system message may also come later (Anthropic's mid-conversation system
            // messages, OpenAI's in-place system and developer messages); codecs pass it
            // through where the model takes it and fold it into the turns otherwise.
            if message.role != Role::System {
                seen_other = true;
            }
        }
        if !seen_other {
            return Err(invalid(
                "messages",
                "must hold at least one user or assistant message",
            ));
        }
        for (i, tool) in tools_schema.iter().enumerate() {
            if tool.name.is_empty() {
                return Err(invalid(
                    &format!("tools_schema[{i}].name"),
                    "must not be empty",
                ));
            }
            // Every provider takes a tool's parameters as an object schema; anything else
            // would be refused upstream after a reservation (or, worse, ignored).
            if tool.native.is_some() {
                // The provider's own tool (e.g. Anthropic's `web_search_20250305`): its
                // definition is the provider's, checked by the provider.
                if tools_schema[..i].iter().any(|t| t.name == tool.name) {
                    return Err(invalid(
                        &format!("tools_schema[{i}].name"),
                        &format!("`{}` is defined twice", tool.name),
                    ));
                }
                continue;
            }
            let schema = tool.input_schema.value();
            let object_type = schema.get("type").is_none_or(|t| t == "object");
            if !schema.is_object() || !object_type {
                return Err(invalid(
                    &format!("tools_schema[{i}].input_schema"),
                    &format!(
                        "of tool `{}` must be a JSON Schema for an object (`{{\"type\": \"object\", \
                         \"properties\": {{…}}}}`), got {}",
                        tool.name,
                        short_json(schema)
                    ),
                ));
            }
            if tools_schema[..i].iter().any(|t| t.name == tool.name) {
                return Err(invalid(
                    &format!("tools_schema[{i}].name"),
                    &format!("`{}` is defined twice", tool.name),
                ));
            }
        }
        // A choice that forces a tool needs a tool to force: no provider can answer it
        // (some would drop the choice with the absent tools).
        if let Some(forcing @ (ToolChoice::Required | ToolChoice::Tool(_))) =
            sampling_params.tool_choice()
            && tools_schema.is_empty()
        {
            return Err(invalid(
                "sampling_params.tool_choice",
                &format!(
                    "is `{}` but the request offers no tools; add the tool or drop the choice",
                    forcing.describe()
                ),
            ));
        }
        sampling_params.validate()?;
        Ok(LlmRequest {
            model_id,
            messages,
            tools_schema,
            sampling_params,
        })
    }

    /// The catalog model id.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The messages, a leading system message included.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The tools the model may call.
    pub fn tools_schema(&self) -> &[ToolDefinition] {
        &self.tools_schema
    }

    /// The sampling parameters.
    pub fn sampling_params(&self) -> &SamplingParams {
        &self.sampling_params
    }

    /// The system text blocks (the leading system messages), if any.
    pub fn system(&self) -> impl Iterator<Item = &Message> {
        self.messages.iter().take_while(|m| m.role == Role::System)
    }

    /// The messages after the leading system messages.
    pub fn turns(&self) -> &[Message] {
        let n = self.system().count();
        &self.messages[n..]
    }

    /// A copy of this request with a different output limit (e.g. the model's ceiling
    /// for a re-run after truncation).
    pub fn with_max_output_tokens(&self, tokens: u64) -> Result<Self> {
        let mut copy = self.clone();
        copy.sampling_params = copy.sampling_params.with_max_output_tokens(tokens)?;
        Ok(copy)
    }

    /// A copy of this request for another catalog model (e.g. a fallback).
    pub fn with_model_id(&self, model_id: impl Into<String>) -> Result<Self> {
        LlmRequest::new(
            model_id,
            self.messages.clone(),
            self.tools_schema.clone(),
            self.sampling_params.clone(),
        )
    }

    /// A copy of this request with more messages appended (e.g. a shape correction).
    pub fn with_appended(&self, more: impl IntoIterator<Item = Message>) -> Result<Self> {
        let mut messages = self.messages.clone();
        messages.extend(more);
        LlmRequest::new(
            self.model_id.clone(),
            messages,
            self.tools_schema.clone(),
            self.sampling_params.clone(),
        )
    }
}

/// `value` as JSON, cut to a short excerpt for an error message.
fn short_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn invalid(field: &str, reason: &str) -> Error {
    Error::InvalidRequest {
        field: field.into(),
        reason: reason.into(),
    }
}

// Defined here, not in `conversation.rs`, so that the conversation types need nothing of
// the request (which is built from them).
impl Conversation {
    /// The request for `model_id` with these sampling parameters.
    pub fn request(
        &self,
        model_id: impl Into<String>,
        sampling_params: SamplingParams,
    ) -> Result<LlmRequest> {
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if !self.system.is_empty() {
            messages.push(Message {
                role: Role::System,
                content: self.system.clone(),
            });
        }
        messages.extend(self.messages.iter().cloned());
        LlmRequest::new(model_id, messages, self.tools.clone(), sampling_params)
    }
}
