//! Request bodies: [`encode_request`] and its options.
//!
//! Gemini has two roles, `user` and `model`: system text is lifted into
//! `systemInstruction`, tool results travel in a `user` turn as `functionResponse` parts
//! (named after the call they answer, found in an earlier assistant turn), and every
//! turn's `role` is set explicitly (Vertex rejects a turn without one).
//!
//! Thought signatures ride on [`Block::Thinking`]: a thought part is a thinking block with
//! its text; a signature that Gemini put on a text or `functionCall` part comes back as a
//! thinking block with **empty text** placed just before that part's block, and is put
//! back on the part that follows it here (see [`super::decode_response`]).

use serde_json::{Map, Value, json};
use tollgate::provider::{
    Block, Error, ImageSource, LlmRequest, Message, ReasoningEffort, Result, Role,
};
use tollgate::provider::{ToolChoice, text_only};

/// The `thoughtSignature` value Gemini documents-by-usage as "skip validation": sent on
/// a function call that has no signature of its own (a turn written by another provider)
/// when [`MissingSignature::SkipValidator`] is chosen.
pub const SKIP_SIGNATURE_VALIDATOR: &str = "skip_thought_signature_validator";

/// The prefix of tool-use ids tollgate made up for calls Gemini sent without an `id`;
/// such ids are not sent back (Gemini matches those calls by name and order).
pub const SYNTHETIC_ID_PREFIX: &str = "gemini-call-";

/// What to send for a function call in an assistant turn that carries no thought
/// signature (the turn came from another provider, or from an older model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingSignature {
    /// Send none (older models need none; Gemini 3 answers 400).
    #[default]
    Omit,
    /// Send [`SKIP_SIGNATURE_VALIDATOR`] (an escape hatch seen in use, not a documented
    /// contract).
    SkipValidator,
}

/// `thinkingConfig`, from the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThinkingConfig {
    /// `thinkingBudget`: tokens (0 off, -1 automatic).
    pub budget: Option<i64>,
    /// `thinkingLevel`: `MINIMAL`, `LOW`, `MEDIUM` or `HIGH` (Gemini 3).
    pub level: Option<String>,
    /// `includeThoughts`: thought summaries come back as thinking blocks.
    pub include_thoughts: Option<bool>,
}

impl ThinkingConfig {
    /// The `thinkingConfig` object; `None` when nothing is set.
    pub fn to_json(&self) -> Option<Value> {
        if self.budget.is_none() && self.level.is_none() && self.include_thoughts.is_none() {
            return None;
        }
        let mut t = Map::new();
        if let Some(budget) = self.budget {
            t.insert("thinkingBudget".into(), json!(budget));
        }
        if let Some(level) = &self.level {
            t.insert("thinkingLevel".into(), json!(level));
        }
        if let Some(include) = self.include_thoughts {
            t.insert("includeThoughts".into(), json!(include));
        }
        Some(Value::Object(t))
    }
}

/// The request settings `generateContent` writes; any other (parallel calls off, an
/// effort level, a summary style, a tool's `strict`) is refused, never dropped.
const WRITES: &[tollgate::provider::Setting] = {
    use tollgate::provider::Setting::*;
    &[
        Tools,
        Shape,
        ToolChoice,
        JsonObject,
        // No `LooseShape`: Gemini always holds an answer to its schema, so a shape with
        // `strict: false` is refused rather than sent as a strict one.
        Seed,
        ThinkingMode,
        ThinkingBudget,
        ReasoningEffort,
    ]
};

/// What the body needs besides the request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncodeOptions {
    /// The provider's model name, for error messages (Gemini names it in the URL).
    pub model: String,
    /// The output limit when the request has none (the pipeline normally fills it in).
    pub max_output_tokens: Option<u64>,
    /// `toolConfig.functionCallingConfig` (only sent when the request has tools).
    pub tool_choice: ToolChoice,
    /// `generationConfig.topK`.
    pub top_k: Option<u64>,
    /// `generationConfig.thinkingConfig`.
    pub thinking: ThinkingConfig,
    /// `cachedContent`: an explicit cache by name (`cachedContents/…`). Gemini forbids
    /// `systemInstruction`, `tools` and `toolConfig` beside it: a request that has them
    /// fails before sending.
    pub cached_content: Option<String>,
    /// What to send for an unsigned function call.
    pub missing_signature: MissingSignature,
}

/// An image as a part: inline bytes, or a file URI (`gs://…`, a Files API URI, https).
fn image_part(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { media_type, data } => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        ImageSource::Url { url } => {
            let mut file = json!({"fileUri": url});
            if let Some(mime) = mime_of(url) {
                file["mimeType"] = json!(mime);
            }
            json!({ "fileData": file })
        }
    }
}

/// The image MIME type a URL's extension names, if any.
fn mime_of(url: &str) -> Option<&'static str> {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let ext = path.rsplit('.').next()?;
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        "heif" => "image/heif",
        _ => return None,
    })
}

/// The name of the tool call `id` answers: the nearest earlier assistant turn's call with
/// that id (Gemini's `functionResponse` must name the function).
fn call_name<'a>(earlier: &'a [Message], id: &str) -> Option<&'a str> {
    earlier
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.content.iter())
        .find_map(|b| match b {
            Block::ToolUse { id: i, name, .. } if i == id => Some(name.as_str()),
            _ => None,
        })
}

/// The id to send for a tool use (none for one tollgate made up).
fn wire_id(id: &str) -> Option<&str> {
    (!id.is_empty() && !id.starts_with(SYNTHETIC_ID_PREFIX)).then_some(id)
}

/// Encodes `request` as a `GenerateContentRequest` body (the same for `generateContent`
/// and `streamGenerateContent`). Fails with [`Error::InvalidRequest`], before anything
/// is sent, on non-text system blocks, a tool result whose call is not in the
/// conversation, an image or tool result in an assistant turn, or a request that
/// carries a system prompt or tools beside an explicit `cachedContent`.
pub fn encode_request(request: &LlmRequest, options: &EncodeOptions) -> Result<Value> {
    tollgate::provider::refuse_unwritten(request, "gemini", &options.model, WRITES)?;
    let mut body = Map::new();
    // `systemInstruction` holds the leading system messages; later ones are folded into
    // the user turns in place, so the instruction (and a cached prefix) stays the same.
    let mut messages: Vec<_> = request.system().cloned().collect();
    messages.extend(tollgate::provider::folded_turns(request));
    let mut system = Vec::new();
    let mut contents = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let field = format!("messages[{i}].content");
        match message.role {
            Role::System => {
                let text = text_only(&message.content, &field, "Gemini's systemInstruction")?;
                system.push(json!({ "text": text }));
            }
            Role::User => {
                let parts = encode_user(&message.content, &messages[..i], &field)?;
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
            Role::Assistant => {
                let parts = encode_model(&message.content, &field, options.missing_signature)?;
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
        }
    }
    if let Some(name) = &options.cached_content {
        let beside = if !system.is_empty() {
            Some("a system prompt")
        } else if !request.tools_schema().is_empty() {
            Some("tools")
        } else {
            None
        };
        if let Some(what) = beside {
            return Err(Error::invalid_request(
                "options.cached_content",
                format!(
                    "names `{name}`, and Gemini forbids {what} beside an explicit cache: \
                     put them in the cached content, or drop the cache for this request"
                ),
            ));
        }
        body.insert("cachedContent".into(), json!(name));
    }
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({ "parts": system }));
    }
    body.insert("contents".into(), Value::Array(contents));
    if !request.tools_schema().is_empty() {
        // Another provider's own tool (a server tool) has no Gemini form: refused by type,
        // never sent as an empty function.
        if let Some(t) = request.tools_schema().iter().find(|t| t.native.is_some()) {
            let provider = t.native.as_ref().map_or("", |n| n.provider.as_str());
            return Err(tollgate::provider::Error::unsupported_setting(
                format!("`{provider}` tool `{}`", t.name),
                "gemini",
                &options.model,
            ));
        }
        let declarations: Vec<Value> = request
            .tools_schema()
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "parametersJsonSchema": t.input_schema.value(),
                })
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
        let choice = request
            .sampling_params()
            .tool_choice()
            .unwrap_or(&options.tool_choice);
        if let Some(config) = tool_config(choice) {
            body.insert("toolConfig".into(), config);
        }
    }
    if let Some(effort @ (ReasoningEffort::XHigh | ReasoningEffort::Max)) =
        request.sampling_params().reasoning().effort
    {
        return Err(tollgate::provider::Error::unsupported_setting(
            format!(
                "reasoning.effort: {} (Gemini's thinkingLevel goes up to HIGH)",
                effort.as_str()
            ),
            "gemini",
            &options.model,
        ));
    }
    let config = generation_config(request, options);
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    Ok(Value::Object(body))
}

/// `toolConfig`; `None` for the default (`AUTO`, nothing sent).
fn tool_config(choice: &ToolChoice) -> Option<Value> {
    let config = match choice {
        ToolChoice::Auto => return None,
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    };
    Some(json!({ "functionCallingConfig": config }))
}

fn generation_config(request: &LlmRequest, options: &EncodeOptions) -> Map<String, Value> {
    let sampling = request.sampling_params();
    let mut config = Map::new();
    if let Some(limit) = sampling.max_output_tokens().or(options.max_output_tokens) {
        config.insert("maxOutputTokens".into(), json!(limit));
    }
    if let Some(t) = sampling.temperature() {
        config.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p() {
        config.insert("topP".into(), json!(p));
    }
    if let Some(k) = options.top_k {
        config.insert("topK".into(), json!(k));
    }
    if !sampling.stop().is_empty() {
        config.insert("stopSequences".into(), json!(sampling.stop()));
    }
    if let Some(shape) = sampling.response_shape() {
        config.insert("responseMimeType".into(), json!("application/json"));
        config.insert("responseJsonSchema".into(), shape.schema.value().clone());
    }
    if sampling.json_object() {
        // Any JSON, no schema.
        config.insert("responseMimeType".into(), json!("application/json"));
    }
    if let Some(seed) = sampling.seed() {
        config.insert("seed".into(), json!(seed));
    }
    // The request's thinking overrides the catalog's budget: 0 is off, -1 is dynamic.
    // An effort is Gemini 3's `thinkingLevel`; effort `none` is thinking off.
    let reasoning = sampling.reasoning();
    let budget = match reasoning.thinking {
        Some(tollgate::provider::Thinking::Off) => Some(0),
        Some(tollgate::provider::Thinking::Adaptive) => Some(-1),
        Some(tollgate::provider::Thinking::Budget { tokens }) => Some(tokens as i64),
        None if reasoning.effort == Some(ReasoningEffort::None) => Some(0),
        None => None,
    };
    let level = match reasoning.effort {
        Some(ReasoningEffort::Minimal) => Some("MINIMAL"),
        Some(ReasoningEffort::Low) => Some("LOW"),
        Some(ReasoningEffort::Medium) => Some("MEDIUM"),
        Some(ReasoningEffort::High) => Some("HIGH"),
        // `none` is a budget of 0 above; above HIGH is refused before this.
        _ => None,
    };
    let mut thinking = options.thinking.to_json();
    if budget.is_some() || level.is_some() {
        let thinking = thinking.get_or_insert_with(|| json!({}));
        if let Some(budget) = budget {
            thinking["thinkingBudget"] = json!(budget);
        }
        if let Some(level) = level {
            thinking["thinkingLevel"] = json!(level);
        }
    }
    if let Some(thinking) = thinking {
        config.insert("thinkingConfig".into(), thinking);
    }
    config
}

/// A user turn: text, images, and tool results as `functionResponse` parts.
fn encode_user(content: &[Block], earlier: &[Message], field: &str) -> Result<Vec<Value>> {
    let mut parts = Vec::new();
    for (j, block) in content.iter().enumerate() {
        let field = format!("{field}[{j}]");
        match block {
            Block::Text { text, .. } => parts.push(json!({ "text": text })),
            Block::Image { source, .. } => parts.push(image_part(source)),
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                let name = call_name(earlier, tool_use_id).ok_or_else(|| {
                    Error::invalid_request(
                        field.clone(),
                        format!(
                            "answers tool use `{tool_use_id}`, which no earlier assistant turn \
                             holds: Gemini's functionResponse must name the function it answers"
                        ),
                    )
                })?;
                let text = text_only(
                    content,
                    &format!("{field}.content"),
                    "Gemini's functionResponse",
                )?;
                // Gemini reads `output` as the result and `error` as a failure.
                let key = if *is_error { "error" } else { "output" };
                let mut response = json!({"name": name, "response": { key: text }});
                if let Some(id) = wire_id(tool_use_id) {
                    response["id"] = json!(id);
                }
                parts.push(json!({ "functionResponse": response }));
            }
            Block::ToolUse { .. } => {
                return Err(Error::invalid_request(
                    field,
                    "a tool use belongs in an assistant turn",
                ));
            }
            Block::Document { source, .. } => match source {
                tollgate::provider::DocumentSource::Base64 { media_type, data } => {
                    parts.push(json!({"inlineData": {"mimeType": media_type, "data": data}}))
                }
                tollgate::provider::DocumentSource::Text { text } => {
                    parts.push(json!({ "text": text }))
                }
                tollgate::provider::DocumentSource::Url { .. } => {
                    return Err(Error::invalid_request(
                        field,
                        "is a document by URL, which Gemini reads only from its File API or \
                         storage (`fileData`): send the PDF's bytes instead",
                    ));
                }
            },
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                return Err(Error::invalid_request(
                    field,
                    "a thinking block belongs in an assistant turn",
                ));
            }
            Block::Native { provider, .. } => {
                return Err(Error::invalid_request(
                    field,
                    format!("is a `{provider}` block, which Gemini cannot take"),
                ));
            }
        }
    }
    Ok(parts)
}

/// A model turn: text, thoughts and function calls, each with the thought signature it
/// came with.
fn encode_model(content: &[Block], field: &str, missing: MissingSignature) -> Result<Vec<Value>> {
    let mut parts: Vec<Value> = Vec::new();
    let mut pending: Option<&str> = None;
    for (j, block) in content.iter().enumerate() {
        let mut part = match block {
            Block::Thinking {
                text, signature, ..
            } if text.is_empty() => {
                // A signature that belongs to the next part.
                if let Some(s) = signature.as_deref() {
                    pending = Some(s);
                }
                continue;
            }
            Block::Thinking {
                text, signature, ..
            } => {
                let mut part = json!({"text": text, "thought": true});
                if let Some(s) = signature {
                    part["thoughtSignature"] = json!(s);
                }
                parts.push(part);
                continue;
            }
            Block::Text { text, .. } => json!({ "text": text }),
            Block::ToolUse {
                id, name, input, ..
            } => {
                let mut call = json!({"name": name, "args": input.value()});
                if let Some(id) = wire_id(id) {
                    call["id"] = json!(id);
                }
                let mut part = json!({ "functionCall": call });
                if pending.is_none() && missing == MissingSignature::SkipValidator {
                    part["thoughtSignature"] = json!(SKIP_SIGNATURE_VALIDATOR);
                }
                part
            }
            Block::Image { .. }
            | Block::ToolResult { .. }
            | Block::RedactedThinking { .. }
            | Block::Document { .. }
            | Block::Native { .. } => {
                return Err(Error::invalid_request(
                    format!("{field}[{j}]"),
                    "must be text, a tool use or thinking in an assistant turn",
                ));
            }
        };
        if let Some(s) = pending.take() {
            part["thoughtSignature"] = json!(s);
        }
        parts.push(part);
    }
    // A signature on an empty last part (Gemini ends some streams so).
    if let Some(s) = pending {
        parts.push(json!({"text": "", "thoughtSignature": s}));
    }
    Ok(parts)
}
