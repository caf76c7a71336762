//! Request bodies: [`encode_request`] and its options.

use serde_json::{Map, Value, json};
use tollgate::provider::{
    Block, DocumentSource, Error, ImageSource, LlmRequest, Result, Role, Thinking, ToolDefinition,
};
use tollgate::provider::{Setting, ToolChoice, folded_turns, refuse_unwritten, text_only};

use crate::KEY;

/// The most stop sequences Cohere takes.
pub const MAX_STOP_SEQUENCES: usize = 5;

/// The smallest `p` (top-p) Cohere takes.
pub const MIN_P: f64 = 0.01;

/// The largest `p` (top-p) Cohere takes.
pub const MAX_P: f64 = 0.99;

/// The request settings `/v2/chat` writes; any other is refused, never dropped.
/// `tool_choice` naming one tool is refused too (Cohere can require some tool, not a
/// named one), and so is a mix of strict and unstrict tools (`strict_tools` is one flag).
const WRITES: &[Setting] = &[
    Setting::Tools,
    Setting::Shape,
    Setting::ToolChoice,
    Setting::JsonObject,
    Setting::ToolStrict,
    Setting::Seed,
    Setting::ThinkingMode,
    Setting::ThinkingBudget,
];

/// What the body needs besides the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeOptions {
    /// The provider's model name, sent as `model`.
    pub model: String,
    /// The output limit when the request has none (the pipeline normally fills it in);
    /// `None` sends no `max_tokens` (Cohere then uses the model's maximum).
    pub max_tokens: Option<u64>,
    /// Sends `"stream": true`.
    pub stream: bool,
    /// The catalog's `tool_choice` (only sent when the request has tools and no choice
    /// of its own).
    pub tool_choice: ToolChoice,
}

/// Encodes `request` as a `/v2/chat` body. Fails before anything is sent with
/// [`Error::UnsupportedSetting`] for a setting Cohere cannot carry, and with
/// [`Error::InvalidRequest`] naming the field for content it cannot carry (a PDF, a
/// non-text tool result), more than [`MAX_STOP_SEQUENCES`] stop sequences, or a `top_p`
/// outside [`MIN_P`]..=[`MAX_P`].
pub fn encode_request(request: &LlmRequest, options: &EncodeOptions) -> Result<Value> {
    let model = options.model.as_str();
    refuse_unwritten(request, KEY, model, WRITES)?;
    let sampling = request.sampling_params();
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages(request)?));
    if !request.tools_schema().is_empty() {
        body.insert("tools".into(), tools(request.tools_schema(), model)?);
        if let Some(strict) = strict_tools(request.tools_schema(), model)? {
            body.insert("strict_tools".into(), json!(strict));
        }
        let choice = sampling.tool_choice().unwrap_or(&options.tool_choice);
        if let Some(choice) = tool_choice(choice, model)? {
            body.insert("tool_choice".into(), json!(choice));
        }
    }
    match sampling.reasoning().thinking {
        Some(Thinking::Off) => {
            body.insert("thinking".into(), json!({"type": "disabled"}));
        }
        Some(Thinking::Adaptive) => {
            body.insert("thinking".into(), json!({"type": "enabled"}));
        }
        Some(Thinking::Budget { tokens }) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "token_budget": tokens}),
            );
        }
        None => {}
    }
    if let Some(limit) = sampling.max_output_tokens().or(options.max_tokens) {
        body.insert("max_tokens".into(), json!(limit));
    }
    if let Some(t) = sampling.temperature() {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p() {
        if !(MIN_P..=MAX_P).contains(&p) {
            return Err(Error::invalid_request(
                "top_p",
                format!("is {p}; Cohere takes `p` from {MIN_P} to {MAX_P}"),
            ));
        }
        body.insert("p".into(), json!(p));
    }
    let stop = sampling.stop();
    if stop.len() > MAX_STOP_SEQUENCES {
        return Err(Error::invalid_request(
            "stop",
            format!(
                "holds {} stop sequences; Cohere takes at most {MAX_STOP_SEQUENCES}",
                stop.len()
            ),
        ));
    }
    if !stop.is_empty() {
        body.insert("stop_sequences".into(), json!(stop));
    }
    if let Some(seed) = sampling.seed() {
        body.insert("seed".into(), json!(seed));
    }
    if let Some(shape) = sampling.response_shape() {
        body.insert(
            "response_format".into(),
            json!({"type": "json_object", "json_schema": shape.schema.value()}),
        );
    } else if sampling.json_object() {
        body.insert("response_format".into(), json!({"type": "json_object"}));
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

/// The wire `tool_choice`: `REQUIRED`, `NONE`, or nothing for auto. A named tool is
/// refused: Cohere has no way to force one tool.
fn tool_choice(choice: &ToolChoice, model: &str) -> Result<Option<&'static str>> {
    match choice {
        ToolChoice::Auto => Ok(None),
        ToolChoice::Required => Ok(Some("REQUIRED")),
        ToolChoice::None => Ok(Some("NONE")),
        ToolChoice::Tool(name) => Err(Error::unsupported_setting(
            format!(
                "tool_choice: the tool `{name}` (Cohere can require some tool, \
                 `tool_choice: required`, but not a named one)"
            ),
            KEY,
            model,
        )),
    }
}

fn tools(tools: &[ToolDefinition], model: &str) -> Result<Value> {
    let tools = tools
        .iter()
        .map(|t| {
            if t.native.is_some() {
                return Err(Error::unsupported_setting(
                    format!("provider-native tool `{}`", t.name),
                    KEY,
                    model,
                ));
            }
            Ok(json!({"type": "function", "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema.value(),
            }}))
        })
        .collect::<Result<_>>()?;
    Ok(Value::Array(tools))
}

/// `strict_tools`, one flag for every tool: `true` when every tool says `strict: true`,
/// `false` when some say `false` and none `true`, unset when none says. Strict and
/// unstrict tools in one request are refused.
fn strict_tools(tools: &[ToolDefinition], model: &str) -> Result<Option<bool>> {
    let strict = tools.iter().filter(|t| t.strict == Some(true)).count();
    if strict == 0 {
        return Ok(tools
            .iter()
            .any(|t| t.strict == Some(false))
            .then_some(false));
    }
    if strict == tools.len() {
        return Ok(Some(true));
    }
    Err(Error::unsupported_setting(
        format!(
            "strict on {strict} of {} tools (Cohere's `strict_tools` is one flag for \
             every tool: mark all strict or none)",
            tools.len()
        ),
        KEY,
        model,
    ))
}

/// The messages: the leading system messages as one `system` message, then the turns
/// (later system messages folded into them).
fn messages(request: &LlmRequest) -> Result<Vec<Value>> {
    let mut messages = Vec::new();
    let mut system = Vec::new();
    for (i, message) in request.system().enumerate() {
        let field = format!("messages[{i}].content");
        system.push(text_only(
            &message.content,
            &field,
            "Cohere's system message",
        )?);
    }
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    let offset = system.len();
    for (j, message) in folded_turns(request).iter().enumerate() {
        let field = format!("messages[{}].content", offset + j);
        match message.role {
            Role::Assistant => messages.push(encode_assistant(&message.content, &field)?),
            Role::User | Role::System => encode_user(&message.content, &field, &mut messages)?,
        }
    }
    Ok(messages)
}

fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// A user turn: tool results become `tool` messages (first, in order), the rest one
/// `user` message of text and image parts.
fn encode_user(content: &[Block], field: &str, messages: &mut Vec<Value>) -> Result<()> {
    let mut parts = Vec::new();
    for (j, block) in content.iter().enumerate() {
        let field = format!("{field}[{j}]");
        match block {
            Block::Text { text, .. } => parts.push(json!({"type": "text", "text": text})),
            Block::Image { source, .. } => {
                parts.push(json!({"type": "image_url", "image_url": {"url": image_url(source)}}))
            }
            Block::Document {
                source: DocumentSource::Text { text },
                ..
            } => parts.push(json!({"type": "text", "text": text})),
            Block::Document { .. } => {
                return Err(Error::invalid_request(
                    field,
                    "is a PDF document, which Cohere's chat cannot take: send its text \
                     (a text document) instead",
                ));
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                let text = text_only(
                    content,
                    &format!("{field}.content"),
                    "Cohere's tool message",
                )?;
                // Cohere has no error flag on a tool result: a failed tool's text says so.
                let text = if *is_error && !text.starts_with("Error") {
                    format!("Error: {text}")
                } else {
                    text
                };
                messages
                    .push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
            }
            _ => {
                return Err(Error::invalid_request(
                    field,
                    "must be text, an image, a text document or a tool result in a user \
                     turn (a tool use or thinking belongs in an assistant turn)",
                ));
            }
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

/// An assistant turn: its text, or, when it calls tools, its text as the `tool_plan`
/// and the calls as `tool_calls`. Thinking is not sent back (Cohere takes none; the
/// model reasons again).
fn encode_assistant(content: &[Block], field: &str) -> Result<Value> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for (j, block) in content.iter().enumerate() {
        match block {
            Block::Text { text: t, .. } => text.push_str(t),
            Block::ToolUse {
                id, name, input, ..
            } => calls.push(json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": input.canonical()}})),
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {}
            _ => {
                return Err(Error::invalid_request(
                    format!("{field}[{j}]"),
                    "must be text, a tool use or thinking in an assistant turn",
                ));
            }
        }
    }
    if calls.is_empty() {
        return Ok(json!({"role": "assistant", "content": [{"type": "text", "text": text}]}));
    }
    let mut out = json!({"role": "assistant", "tool_calls": calls});
    if !text.is_empty() {
        out["tool_plan"] = json!(text);
    }
    Ok(out)
}
