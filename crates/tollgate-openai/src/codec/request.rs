//! Request bodies: [`encode_request`] and its options.

use serde_json::{Map, Value, json};
use tollgate::provider::{Block, DocumentSource, Error, ImageSource, LlmRequest, Result, Role};
use tollgate::provider::{Setting, ToolChoice, refuse_unwritten, text_only};

use crate::dialect::Dialect;
use crate::dialect::OutputLimitField;

/// The wire form of `tool_choice` in `dialect` (its word for "call some tool"); `None`
/// for the default (nothing sent). A forced tool where the dialect cannot force one is
/// refused.
fn tool_choice_json(choice: &ToolChoice, options: &EncodeOptions) -> Result<Option<Value>> {
    let dialect = &options.dialect;
    Ok(match choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(json!(dialect.required_tool_choice)),
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Tool(name) if dialect.forced_tool => {
            Some(json!({"type": "function", "function": {"name": name}}))
        }
        ToolChoice::Tool(name) => {
            return Err(Error::unsupported_setting(
                format!(
                    "tool_choice forcing tool `{name}` ({} can only be asked to call some tool: `{}`)",
                    dialect.provider, dialect.required_tool_choice
                ),
                dialect.provider,
                &options.model,
            ));
        }
    })
}

/// The request settings Chat Completions writes; any other is refused, never dropped.
const WRITES: &[Setting] = &[
    Setting::Tools,
    Setting::Shape,
    Setting::ToolChoice,
    Setting::ParallelToolCalls,
    Setting::ReasoningEffort,
    Setting::JsonObject,
    Setting::LooseShape,
    Setting::ToolStrict,
    Setting::Seed,
    Setting::Verbosity,
];

/// What the body needs besides the request.
#[derive(Debug, Clone)]
pub struct EncodeOptions {
    /// The provider's model name, sent as `model`.
    pub model: String,
    /// The output limit when the request has none (the pipeline normally fills it in);
    /// `None` sends no limit.
    pub max_tokens: Option<u64>,
    /// Which field carries the output limit.
    pub output_limit_field: OutputLimitField,
    /// Sends `"stream": true`.
    pub stream: bool,
    /// With `stream`, also sends `stream_options: {include_usage: true}`.
    pub stream_usage: bool,
    /// `tool_choice` (only sent when the request has tools).
    pub tool_choice: ToolChoice,
    /// How the API's wire format differs from OpenAI's ([`Dialect::OPENAI`] for
    /// OpenAI's own).
    pub dialect: Dialect,
    /// Fields added as they are (the catalog's `extra_body`), after the encoded ones; a
    /// field the codec wrote is refused, not overwritten.
    pub extra_body: Map<String, Value>,
}

impl EncodeOptions {
    /// The options for model `model` (its provider's name for it) in OpenAI's own
    /// dialect: no output limit, not streamed, `tool_choice` auto, nothing extra.
    pub fn new(model: impl Into<String>, output_limit_field: OutputLimitField) -> Self {
        EncodeOptions {
            model: model.into(),
            max_tokens: None,
            output_limit_field,
            stream: false,
            stream_usage: false,
            tool_choice: ToolChoice::Auto,
            dialect: Dialect::OPENAI,
            extra_body: Map::new(),
        }
    }
}

/// An image as a URL: a `data:` URL for inline bytes.
pub(super) fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// Encodes `request` as a Chat Completions body. Fails with [`Error::InvalidRequest`],
/// before anything is sent, on non-text system blocks, images in assistant turns, or
/// non-text tool results.
///
/// The dialect's differences apply: its refused settings are refused, its `tool_choice`
/// word is written, its request hook runs last; then `extra_body`'s fields are added.
pub fn encode_request(request: &LlmRequest, options: &EncodeOptions) -> Result<Value> {
    let dialect = &options.dialect;
    // OpenAI's own dialect refuses nothing: no list is built on its (the gateway's) path.
    let writes: std::borrow::Cow<'_, [Setting]> = if dialect.refuses.is_empty() {
        WRITES.into()
    } else {
        let kept = WRITES.iter().filter(|s| !dialect.refuses.contains(s));
        kept.copied().collect::<Vec<_>>().into()
    };
    refuse_unwritten(request, dialect.provider, &options.model, &writes)?;
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    let mut messages = Vec::new();
    for (i, message) in request.messages().iter().enumerate() {
        let field = format!("messages[{i}].content");
        match message.role {
            Role::System => {
                let text = text_only(&message.content, &field, "OpenAI's system message")?;
                messages.push(json!({"role": "system", "content": text}));
            }
            Role::User => encode_user(&message.content, &field, &mut messages, options)?,
            Role::Assistant => messages.push(encode_assistant(&message.content, &field, dialect)?),
        }
    }
    body.insert("messages".into(), Value::Array(messages));

    if !request.tools_schema().is_empty() {
        let tools: Vec<Value> = request
            .tools_schema()
            .iter()
            .map(|t| {
                if t.native.is_some() {
                    return Err(Error::unsupported_setting(
                        format!("provider-native tool `{}`", t.name),
                        dialect.provider,
                        &options.model,
                    ));
                }
                let mut tool = json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema.value(),
                }});
                if let Some(strict) = t.strict {
                    tool["function"]["strict"] = json!(strict);
                }
                Ok(tool)
            })
            .collect::<Result<_>>()?;
        body.insert("tools".into(), Value::Array(tools));
        let sampling = request.sampling_params();
        // The request's own choice wins over the catalog's default; an explicit `auto`
        // is sent as asked.
        let choice = match sampling.tool_choice() {
            Some(ToolChoice::Auto) => Some(json!("auto")),
            Some(choice) => tool_choice_json(choice, options)?,
            None => tool_choice_json(&options.tool_choice, options)?,
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        if let Some(parallel) = sampling.parallel_tool_calls() {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    let sampling = request.sampling_params();
    if let Some(effort) = sampling.reasoning().effort {
        if let Some(taken) = dialect.reasoning_efforts
            && !taken.contains(&effort)
        {
            let names: Vec<&str> = taken.iter().map(|e| e.as_str()).collect();
            return Err(Error::unsupported_setting(
                format!(
                    "reasoning.effort: {} ({} takes {})",
                    effort.as_str(),
                    dialect.provider,
                    names.join(", ")
                ),
                dialect.provider,
                &options.model,
            ));
        }
        body.insert("reasoning_effort".into(), json!(effort.as_str()));
    }
    if let Some(seed) = sampling.seed() {
        body.insert("seed".into(), json!(seed));
    }
    if let Some(verbosity) = sampling.verbosity() {
        body.insert("verbosity".into(), json!(verbosity.as_str()));
    }
    if let Some(limit) = sampling.max_output_tokens().or(options.max_tokens) {
        body.insert(options.output_limit_field.field().into(), json!(limit));
    }
    if let Some(t) = sampling.temperature() {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p() {
        body.insert("top_p".into(), json!(p));
    }
    if !sampling.stop().is_empty() {
        body.insert("stop".into(), json!(sampling.stop()));
    }
    if let Some(shape) = sampling.response_shape() {
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {
                "name": shape_name(&shape.name),
                "schema": shape.schema.value(),
            }}),
        );
        if let Some(strict) = shape.strict {
            body["response_format"]["json_schema"]["strict"] = json!(strict);
        }
    } else if sampling.json_object() {
        body.insert("response_format".into(), json!({"type": "json_object"}));
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
        if options.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    if let Some(hook) = dialect.request {
        hook(request, &mut body)?;
    }
    add_extra_body(&mut body, &options.extra_body)?;
    Ok(Value::Object(body))
}

/// Adds the catalog's `extra_body` fields; one the body already has is refused (the
/// request's own setting, or the codec's, would be lost), naming the field.
pub(super) fn add_extra_body(
    body: &mut Map<String, Value>,
    extra: &Map<String, Value>,
) -> Result<()> {
    for (name, value) in extra {
        if body.contains_key(name) {
            return Err(Error::invalid_request(
                format!("options.extra_body.{name}"),
                "is a field tollgate writes from the request itself: set it on the request \
                 (or leave it out of extra_body)",
            ));
        }
        body.insert(name.clone(), value.clone());
    }
    Ok(())
}

/// OpenAI's schema names allow `a-zA-Z0-9_-`, at most 64 characters.
pub(super) fn shape_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if clean.is_empty() {
        "response".into()
    } else {
        clean
    }
}

/// A tool result's text (OpenAI has no error flag for it: a failed tool's text says
/// `Error: …`), refusing content other than text.
pub(super) fn tool_result_text(
    content: &[Block],
    is_error: bool,
    field: &str,
    holder: &str,
) -> Result<String> {
    let text = text_only(content, &format!("{field}.content"), holder)?;
    Ok(if is_error && !text.starts_with("Error") {
        format!("Error: {text}")
    } else {
        text
    })
}

/// A user turn: tool results become `tool` messages (first, in order), the rest one
/// `user` message of parts.
fn encode_user(
    content: &[Block],
    field: &str,
    messages: &mut Vec<Value>,
    options: &EncodeOptions,
) -> Result<()> {
    let mut parts = Vec::new();
    for (j, block) in content.iter().enumerate() {
        let field = format!("{field}[{j}]");
        match block {
            Block::Text { text, .. } => parts.push(json!({"type": "text", "text": text})),
            Block::Image { source, .. } => {
                parts.push(json!({"type": "image_url", "image_url": {"url": image_url(source)}}))
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                let text = tool_result_text(content, *is_error, &field, "OpenAI's tool message")?;
                messages
                    .push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
            }
            Block::ToolUse { .. } => {
                return Err(Error::invalid_request(
                    field,
                    "a tool use belongs in an assistant turn",
                ));
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                return Err(Error::invalid_request(
                    field,
                    "a thinking block belongs in an assistant turn",
                ));
            }
            Block::Document { source, name, .. } => match source {
                DocumentSource::Base64 { media_type, .. } if !options.dialect.file_parts => {
                    let provider = options.dialect.provider;
                    return Err(Error::unsupported_setting(
                        format!(
                            "a `{media_type}` document by its bytes at {field} ({provider}'s chat \
                             API takes no file parts: send the document's text instead)"
                        ),
                        provider,
                        &options.model,
                    ));
                }
                DocumentSource::Base64 { media_type, data } => parts.push(json!({
                    "type": "file",
                    "file": {
                        "file_data": format!("data:{media_type};base64,{data}"),
                        "filename": name.as_deref().unwrap_or("document.pdf"),
                    },
                })),
                DocumentSource::Text { text } => parts.push(json!({"type": "text", "text": text})),
                DocumentSource::Url { .. } => {
                    return Err(Error::invalid_request(
                        field,
                        "is a document by URL, which OpenAI's chat format cannot take \
                         (`file_data` or `file_id` only): send the PDF's bytes instead",
                    ));
                }
            },
            Block::Native { provider, .. } => {
                return Err(Error::invalid_request(
                    field,
                    format!("is a `{provider}` block, which OpenAI's chat format cannot take"),
                ));
            }
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

fn encode_assistant(content: &[Block], field: &str, dialect: &Dialect) -> Result<Value> {
    let mut text = String::new();
    let mut calls = Vec::new();
    for (j, block) in content.iter().enumerate() {
        match block {
            Block::Text { text: t, .. } => text.push_str(t),
            Block::ToolUse {
                id, name, input, ..
            } => calls.push(json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": input.canonical()}})),
            // Chat Completions takes no reasoning input; the model re-reasons.
            Block::Thinking { .. } => {}
            // What the dialect kept from its own answers (citations) is not input.
            Block::Native { provider, .. }
                if provider == dialect.provider && !dialect.kept_fields.is_empty() => {}
            _ => {
                return Err(Error::invalid_request(
                    format!("{field}[{j}]"),
                    "must be text, a tool use or thinking in an assistant turn",
                ));
            }
        }
    }
    let mut out = json!({"role": "assistant"});
    out["content"] = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        json!(text)
    };
    if !calls.is_empty() {
        out["tool_calls"] = Value::Array(calls);
    }
    Ok(out)
}
