//! Request bodies: [`encode_request`] and its options.

use serde_json::{Map, Value, json};
use tollgate::provider::folded_turns;
use tollgate::provider::{
    Block, CacheMark, DocumentSource, Error, ImageSource, LlmRequest, ReasoningEffort,
    ReasoningSummary, Result, Role, SamplingParams, Thinking,
};
use tollgate::provider::{Setting, ToolChoice, refuse_unwritten};

/// The `anthropic-version` header value this codec speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The most prompt-cache breakpoints Anthropic accepts in one request.
pub const MAX_CACHE_MARKS: usize = 4;

/// Anthropic's sampling temperature ceiling (tollgate's neutral range goes to 2).
pub const MAX_TEMPERATURE: f64 = 1.0;

/// `max_tokens` when neither the request nor the catalog sets an output limit.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The wire form of `tool_choice`; `None` for the default (nothing sent).
fn tool_choice_json(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(json!({"type": "any"})),
        ToolChoice::None => Some(json!({"type": "none"})),
        ToolChoice::Tool(name) => Some(json!({"type": "tool", "name": name})),
    }
}

/// The request settings the Messages API writes; any other (JSON without a schema, a
/// loose schema, a seed, a summary style) is refused, never dropped.
const WRITES: &[Setting] = &[
    Setting::Tools,
    Setting::Shape,
    Setting::ToolChoice,
    Setting::ParallelToolCalls,
    Setting::ReasoningEffort,
    Setting::ThinkingMode,
    Setting::ThinkingBudget,
    Setting::ReasoningSummary,
    Setting::ToolStrict,
];

/// Signature families a Claude model takes back, wherever it runs: Anthropic documents
/// thinking signatures as valid across its API, Bedrock and Vertex ("values generated on
/// one platform will be compatible with another"). Thinking signed by any other provider
/// is left out.
const CLAUDE_SIGNERS: &[&str] = &["anthropic", "bedrock", "anthropic-vertex"];

/// Where a Messages body goes: the provider key a refusal names, and the signer a decoded
/// answer's thinking is marked with (its [`Block::Thinking`] `origin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Host {
    /// Anthropic's own Messages API (`anthropic`).
    #[default]
    Anthropic,
    /// Claude on Amazon Bedrock over InvokeModel (`bedrock`): the model is named in the
    /// URL, so the body has no `model` (the options' `model` names it in refusals only).
    Bedrock,
    /// Claude on Google's Vertex AI over `rawPredict` (`anthropic-vertex`): as for
    /// Bedrock, the model is named in the URL and the body has no `model`.
    Vertex,
}

impl Host {
    /// The provider key: `anthropic`, `bedrock` or `anthropic-vertex` (not `vertex`,
    /// which is Gemini's key: thinking marked so would look signed by Gemini).
    pub fn key(self) -> &'static str {
        match self {
            Host::Anthropic => "anthropic",
            Host::Bedrock => "bedrock",
            Host::Vertex => "anthropic-vertex",
        }
    }
}

/// Whether `block` goes to a Claude model: thinking signed elsewhere does not (the
/// API ignores thinking of finished turns, and refuses a foreign signature).
fn sendable(block: &Block) -> bool {
    match block {
        Block::Thinking {
            origin, signature, ..
        } => {
            signature.is_some()
                && origin
                    .as_deref()
                    .is_none_or(|o| CLAUDE_SIGNERS.contains(&o))
        }
        Block::RedactedThinking { origin, .. } => origin
            .as_deref()
            .is_none_or(|o| CLAUDE_SIGNERS.contains(&o)),
        _ => true,
    }
}

/// What the body needs besides the request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncodeOptions {
    /// The provider's model name, sent as `model` (not to [`Host::Bedrock`] or
    /// [`Host::Vertex`], which name it in the URL) and named in refusals; `None` leaves
    /// the field out.
    pub model: Option<String>,
    /// `max_tokens`: the output limit (the pipeline fills the request's in; this is used
    /// when the request has none).
    pub max_tokens: u64,
    /// Sends `"stream": true`.
    pub stream: bool,
    /// `top_k`, when set.
    pub top_k: Option<u64>,
    /// `tool_choice` (only sent when the request has tools).
    pub tool_choice: ToolChoice,
    /// Where the body goes: refusals name its provider key, and a Bedrock or Vertex body
    /// has no `model`.
    pub host: Host,
    /// Sends a system message after the first turn as `role: "system"` in `messages`, at
    /// its position (the model takes mid-conversation system messages); otherwise it is
    /// folded into the user turn there as a `<system-reminder>`.
    pub mid_conversation_system: bool,
}

/// Encodes `request` as a Messages API body. Fails with [`Error::InvalidRequest`], before
/// anything is sent, on more than [`MAX_CACHE_MARKS`] cache marks, a temperature above
/// [`MAX_TEMPERATURE`], non-text system blocks, or a cache mark on a thinking block.
pub fn encode_request(request: &LlmRequest, options: &EncodeOptions) -> Result<Value> {
    let model = options.model.as_deref().unwrap_or("(named in the URL)");
    let provider = options.host.key();
    refuse_unwritten(request, provider, model, WRITES)?;
    let mut marks = 0usize;
    let mut body = Map::new();
    if let Some(model) = options
        .model
        .as_ref()
        .filter(|_| options.host == Host::Anthropic)
    {
        body.insert("model".into(), json!(model));
    }
    let sampling = request.sampling_params();
    let max_tokens = sampling.max_output_tokens().unwrap_or(options.max_tokens);
    body.insert("max_tokens".into(), json!(max_tokens));

    let mut system = Vec::new();
    for (i, message) in request.system().enumerate() {
        for (j, block) in message.content.iter().enumerate() {
            let field = format!("messages[{i}].content[{j}]");
            let Block::Text { text, cache } = block else {
                return Err(Error::invalid_request(
                    field,
                    "must be text: Anthropic's system prompt holds text blocks only",
                ));
            };
            let mut out = json!({"type": "text", "text": text});
            mark(&mut out, *cache, &field, &mut marks)?;
            system.push(out);
        }
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }

    let offset = request.system().count();
    // Later system messages passed through where the model takes them, else folded into
    // the user turns (their positions kept).
    let turns = if options.mid_conversation_system {
        request.turns().to_vec()
    } else {
        folded_turns(request)
    };
    let mut messages = Vec::with_capacity(turns.len());
    for (i, message) in turns.iter().enumerate() {
        let role = match message.role {
            Role::Assistant => "assistant",
            Role::User => "user",
            Role::System => "system",
        };
        let mut content = Vec::with_capacity(message.content.len());
        for (j, block) in message.content.iter().enumerate() {
            if !sendable(block) {
                continue;
            }
            let field = format!("messages[{}].content[{j}]", i + offset);
            content.push(encode_block(block, &field, &mut marks)?);
        }
        messages.push(json!({"role": role, "content": content}));
    }
    body.insert("messages".into(), Value::Array(messages));

    if !request.tools_schema().is_empty() {
        let tools: Vec<Value> = request
            .tools_schema()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                // A server tool goes as Anthropic defines it.
                if let Some(native) = &t.native {
                    if native.provider != "anthropic" {
                        return Err(Error::unsupported_setting(
                            format!("`{}` tool `{}`", native.provider, t.name),
                            provider,
                            model,
                        ));
                    }
                    return Ok(native.definition.value().clone());
                }
                let mut tool = json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema.value(),
                });
                if let Some(strict) = t.strict {
                    tool["strict"] = json!(strict);
                }
                if t.defer_loading {
                    tool["defer_loading"] = json!(true);
                }
                mark(&mut tool, t.cache, &format!("tools[{i}]"), &mut marks)?;
                Ok(tool)
            })
            .collect::<Result<Vec<Value>>>()?;
        body.insert("tools".into(), Value::Array(tools));
        let choice = match sampling.tool_choice() {
            Some(ToolChoice::Auto) => Some(json!({"type": "auto"})),
            Some(choice) => tool_choice_json(choice),
            None => tool_choice_json(&options.tool_choice),
        };
        let choice = match (choice, sampling.parallel_tool_calls()) {
            (Some(mut c), Some(false)) if c["type"] != "none" => {
                c["disable_parallel_tool_use"] = json!(true);
                Some(c)
            }
            (None, Some(false)) => Some(json!({"type": "auto", "disable_parallel_tool_use": true})),
            (c, _) => c,
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
    }
    write_reasoning(&mut body, sampling, max_tokens, (provider, model))?;
    if let Some(t) = sampling.temperature() {
        if t > MAX_TEMPERATURE {
            return Err(Error::invalid_request(
                "sampling_params.temperature",
                format!("is {t}; Anthropic accepts 0 to {MAX_TEMPERATURE}"),
            ));
        }
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p() {
        body.insert("top_p".into(), json!(p));
    }
    if let Some(k) = options.top_k {
        body.insert("top_k".into(), json!(k));
    }
    if !sampling.stop().is_empty() {
        body.insert("stop_sequences".into(), json!(sampling.stop()));
    }
    if let Some(shape) = sampling.response_shape() {
        body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": shape.schema.value()}}),
        );
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

/// Adds `cache_control` for `cache` to `out`, counting marks against the limit.
fn mark(out: &mut Value, cache: Option<CacheMark>, field: &str, marks: &mut usize) -> Result<()> {
    let Some(cache) = cache else {
        return Ok(());
    };
    *marks += 1;
    if *marks > MAX_CACHE_MARKS {
        return Err(Error::invalid_request(
            format!("{field}.cache"),
            format!(
                "is prompt-cache mark number {marks}; Anthropic accepts at most {MAX_CACHE_MARKS} \
                 per request: remove marks (the last mark before the part that changes is enough)"
            ),
        ));
    }
    let control = match cache {
        CacheMark::FiveMinutes => json!({"type": "ephemeral"}),
        CacheMark::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    };
    out["cache_control"] = control;
    Ok(())
}

fn encode_image(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        ImageSource::Url { url } => json!({"type": "url", "url": url}),
    }
}

fn encode_block(block: &Block, field: &str, marks: &mut usize) -> Result<Value> {
    let (mut out, cache) = match block {
        Block::Text { text, cache } => (json!({"type": "text", "text": text}), *cache),
        Block::Image { source, cache } => (
            json!({"type": "image", "source": encode_image(source)}),
            *cache,
        ),
        Block::ToolUse {
            id,
            name,
            input,
            cache,
        } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": input.value()}),
            *cache,
        ),
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
            cache,
        } => {
            let mut inner = Vec::with_capacity(content.len());
            for (k, b) in content.iter().enumerate() {
                let field = format!("{field}.content[{k}]");
                if !matches!(b, Block::Text { .. } | Block::Image { .. }) {
                    return Err(Error::invalid_request(
                        field,
                        "must be text or an image inside a tool result",
                    ));
                }
                inner.push(encode_block(b, &field, marks)?);
            }
            let mut out =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": inner});
            if *is_error {
                out["is_error"] = json!(true);
            }
            (out, *cache)
        }
        Block::Thinking {
            text,
            signature,
            cache,
            ..
        } => {
            if cache.is_some() {
                return Err(Error::invalid_request(
                    format!("{field}.cache"),
                    "is set on a thinking block; Anthropic caches thinking only with the turn around it: mark another block",
                ));
            }
            let mut out = json!({"type": "thinking", "thinking": text});
            if let Some(signature) = signature {
                out["signature"] = json!(signature);
            }
            (out, None)
        }
        Block::RedactedThinking { data, .. } => {
            (json!({"type": "redacted_thinking", "data": data}), None)
        }
        Block::Document {
            source,
            name,
            cache,
        } => {
            let source = match source {
                DocumentSource::Base64 { media_type, data } => {
                    json!({"type": "base64", "media_type": media_type, "data": data})
                }
                DocumentSource::Url { url } => json!({"type": "url", "url": url}),
                DocumentSource::Text { text } => {
                    json!({"type": "text", "media_type": "text/plain", "data": text})
                }
            };
            let mut out = json!({"type": "document", "source": source});
            if let Some(name) = name {
                out["title"] = json!(name);
            }
            (out, *cache)
        }
        Block::Native { provider, value } => {
            if provider != "anthropic" {
                return Err(Error::invalid_request(
                    field,
                    format!("is a `{provider}` block, which Anthropic's API cannot take"),
                ));
            }
            (value.value().clone(), None)
        }
    };
    mark(&mut out, cache, field, marks)?;
    Ok(out)
}

/// `thinking` and `output_config.effort`: thinking off, adaptive, or with a budget
/// (at least 1024 tokens, below `max_tokens`); an effort level as Anthropic spells it
/// (`none` is thinking disabled, `minimal` is `low`).
fn write_reasoning(
    body: &mut Map<String, Value>,
    sampling: &SamplingParams,
    max_tokens: u64,
    (provider, model): (&str, &str),
) -> Result<()> {
    let reasoning = sampling.reasoning();
    let thinking = match reasoning.thinking {
        Some(Thinking::Off) => Some(json!({"type": "disabled"})),
        Some(Thinking::Adaptive) => Some(json!({"type": "adaptive"})),
        Some(Thinking::Budget { tokens }) => {
            if tokens < 1024 || tokens >= max_tokens {
                return Err(Error::invalid_request(
                    "sampling_params.reasoning.thinking.tokens",
                    format!(
                        "is {tokens}; Anthropic takes a thinking budget of at least 1024 tokens \
                         and below max_tokens ({max_tokens})"
                    ),
                ));
            }
            Some(json!({"type": "enabled", "budget_tokens": tokens}))
        }
        None if reasoning.effort == Some(ReasoningEffort::None) => {
            Some(json!({"type": "disabled"}))
        }
        None => None,
    };
    // `thinking.display`: summarized (the default) or omitted; OpenAI's other summary
    // styles have no Anthropic form.
    let display = match reasoning.summary {
        None => None,
        Some(ReasoningSummary::Auto) => Some("summarized"),
        Some(ReasoningSummary::Omitted) => Some("omitted"),
        // No Anthropic form: a setting the provider cannot do, refused by type.
        Some(other) => {
            return Err(Error::unsupported_setting(
                format!(
                    "reasoning summary `{}` (Anthropic shows thinking summarized or omitted only)",
                    format!("{other:?}").to_lowercase()
                ),
                provider,
                model,
            ));
        }
    };
    let thinking = match (thinking, display) {
        (Some(mut t), Some(display)) if t["type"] != "disabled" => {
            t["display"] = json!(display);
            Some(t)
        }
        (None, Some(display)) => Some(json!({"type": "adaptive", "display": display})),
        (t, _) => t,
    };
    if let Some(thinking) = thinking {
        body.insert("thinking".into(), thinking);
    }
    let effort = match reasoning.effort {
        None | Some(ReasoningEffort::None) => None,
        Some(ReasoningEffort::Minimal) => Some("low"),
        Some(other) => Some(other.as_str()),
    };
    if let Some(effort) = effort {
        body.entry("output_config")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|o| o.insert("effort".into(), json!(effort)));
    }
    Ok(())
}
