//! Request bodies: [`encode_request`] and its options.

use serde_json::{Map, Value, json};
use tollgate::provider::ToolChoice;
use tollgate::{Block, CacheMark, Error, ImageSource, LlmRequest, Result, Role};

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

/// What the body needs besides the request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncodeOptions {
    /// The provider's model name, sent as `model`; `None` leaves the field out (Bedrock
    /// names the model in the URL).
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
}

/// Encodes `request` as a Messages API body. Fails with [`Error::InvalidRequest`], before
/// anything is sent, on more than [`MAX_CACHE_MARKS`] cache marks, a temperature above
/// [`MAX_TEMPERATURE`], non-text system blocks, or a cache mark on a thinking block.
pub fn encode_request(request: &LlmRequest, options: &EncodeOptions) -> Result<Value> {
    let mut marks = 0usize;
    let mut body = Map::new();
    if let Some(model) = &options.model {
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
    let mut messages = Vec::with_capacity(request.turns().len());
    for (i, message) in request.turns().iter().enumerate() {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => unreachable!("LlmRequest keeps system messages at the start"),
        };
        let mut content = Vec::with_capacity(message.content.len());
        for (j, block) in message.content.iter().enumerate() {
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
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema.value(),
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tool_choice_json(&options.tool_choice) {
            body.insert("tool_choice".into(), choice);
        }
    }
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
    };
    mark(&mut out, cache, field, marks)?;
    Ok(out)
}
