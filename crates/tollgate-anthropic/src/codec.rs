//! The Anthropic Messages wire format: request bodies, response bodies, stream events
//! and error bodies, to and from tollgate's neutral types. No I/O here, so that
//! `tollgate-bedrock` reuses it for Claude on Bedrock (whose body is the same, minus
//! `model` and `stream`, plus its own `anthropic_version`).
//!
//! - [`encode_request`] turns an [`LlmRequest`] into the JSON body: system messages go
//!   to the top-level `system` field, [`CacheMark`]s become `cache_control` (at most
//!   [`MAX_CACHE_MARKS`], checked before anything is sent), a response shape becomes
//!   `output_config.format`.
//! - [`decode_response`] turns a response body into an [`LlmResponse`], with usage in
//!   tollgate's convention ([`Usage::from_cache_exclusive`]: Anthropic's `input_tokens`
//!   already excludes cache reads and writes; 5-minute and 1-hour writes are kept apart).
//!   A `refusal` stop with `stop_details` is [`Error::ProviderRefusal`].
//! - [`StreamDecoder`] turns stream events (`message_start` … `message_stop`) into
//!   [`StreamEvent`]s. Nothing is emitted before the first content, so that an error
//!   event before it fails the stream before its first event (and the pipeline retries).
//! - [`classify_error`] maps an error status and body to tollgate's error types by
//!   status and `error.type` (never by message text).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tollgate::{
    Block, CacheMark, Error, ImageSource, Json, LlmRequest, LlmResponse, ProviderError,
    ProviderRequestError, ResponseBody, Result, Role, StopReason, StreamEvent, Usage,
};

/// The provider key errors are reported under.
pub const PROVIDER: &str = "anthropic-direct";

/// The `anthropic-version` header value this codec speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The most prompt-cache breakpoints Anthropic accepts in one request.
pub const MAX_CACHE_MARKS: usize = 4;

/// Anthropic's sampling temperature ceiling (tollgate's neutral range goes to 2).
pub const MAX_TEMPERATURE: f64 = 1.0;

/// `max_tokens` when neither the request nor the catalog sets an output limit.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The `error.details.error_code` of a 429 that means the tier's monthly spend cap.
const SPEND_LIMIT_CODE: &str = "enforced_spend_limit_reached";

/// `tool_choice`: how the model may use the request's tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (Anthropic's default; nothing is sent).
    #[default]
    Auto,
    /// The model must use some tool.
    Any,
    /// The model must not use tools.
    None,
    /// The model must use this tool.
    Tool(String),
}

impl ToolChoice {
    /// Parses the catalog spelling: `auto`, `any`, `none` or `tool:NAME`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "auto" => Some(ToolChoice::Auto),
            "any" => Some(ToolChoice::Any),
            "none" => Some(ToolChoice::None),
            _ => text
                .strip_prefix("tool:")
                .filter(|name| !name.is_empty())
                .map(|name| ToolChoice::Tool(name.to_owned())),
        }
    }

    fn to_json(&self) -> Option<Value> {
        match self {
            ToolChoice::Auto => None,
            ToolChoice::Any => Some(json!({"type": "any"})),
            ToolChoice::None => Some(json!({"type": "none"})),
            ToolChoice::Tool(name) => Some(json!({"type": "tool", "name": name})),
        }
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

fn invalid(field: String, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        field,
        reason: reason.into(),
    }
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
                return Err(invalid(
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
        if let Some(choice) = options.tool_choice.to_json() {
            body.insert("tool_choice".into(), choice);
        }
    }
    if let Some(t) = sampling.temperature() {
        if t > MAX_TEMPERATURE {
            return Err(invalid(
                "sampling_params.temperature".into(),
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
        return Err(invalid(
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
                    return Err(invalid(
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
                return Err(invalid(
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

/// The wire `usage` object (response, `message_start` and `message_delta`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation: Option<WireCacheCreation>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct WireCacheCreation {
    #[serde(default)]
    ephemeral_5m_input_tokens: u64,
    #[serde(default)]
    ephemeral_1h_input_tokens: u64,
}

impl WireUsage {
    /// Cumulative values: each field present replaces the one before.
    fn merge(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation = later.cache_creation.or(self.cache_creation);
    }

    /// In tollgate's convention. Cache writes are split by lifetime where the breakdown
    /// is given; writes the breakdown does not account for count as 5-minute writes.
    fn neutral(&self) -> Usage {
        let writes = self.cache_creation_input_tokens.unwrap_or(0);
        let (five, hour) = match self.cache_creation {
            Some(c) => {
                let hour = c.ephemeral_1h_input_tokens;
                (
                    c.ephemeral_5m_input_tokens.max(writes.saturating_sub(hour)),
                    hour,
                )
            }
            None => (writes, 0),
        };
        Usage::from_cache_exclusive(
            self.input_tokens.unwrap_or(0),
            self.cache_read_input_tokens.unwrap_or(0),
            five,
            hour,
            self.output_tokens.unwrap_or(0),
        )
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
struct StopDetails {
    category: Option<String>,
    explanation: Option<String>,
}

impl StopDetails {
    fn refusal(self) -> Error {
        Error::ProviderRefusal {
            category: self.category.unwrap_or_else(|| "unspecified".into()),
            explanation: self.explanation.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    model: String,
    #[serde(default)]
    content: Vec<Value>,
    stop_reason: Option<String>,
    stop_details: Option<StopDetails>,
    #[serde(default)]
    usage: WireUsage,
}

/// Maps a wire `stop_reason`. `pause_turn` (a server tool paused; send the answer back
/// to go on) ends the turn; `model_context_window_exceeded` is an overflow (the window is
/// full), not a truncation that a larger output limit would fix.
pub fn stop_reason(wire: &str) -> Option<StopReason> {
    Some(match wire {
        "end_turn" | "pause_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::Refusal,
        _ => return None,
    })
}

fn malformed(what: impl Into<String>) -> Error {
    ProviderRequestError::new(
        200,
        format!("Anthropic sent a malformed answer: {}", what.into()),
    )
    .into()
}

/// Decodes one content block of a response. Block types tollgate has no neutral form
/// for (`redacted_thinking`, server-tool blocks) are left out.
fn decode_block(block: &Value) -> Result<Option<Block>> {
    let get = |key: &str| block.get(key).and_then(Value::as_str);
    let kind = get("type").ok_or_else(|| malformed("a content block has no type"))?;
    Ok(Some(match kind {
        "text" => Block::text(get("text").unwrap_or_default()),
        "tool_use" => Block::ToolUse {
            id: get("id").unwrap_or_default().to_owned(),
            name: get("name").unwrap_or_default().to_owned(),
            input: Json::new(block.get("input").cloned().unwrap_or_else(|| json!({}))),
            cache: None,
        },
        "thinking" => Block::Thinking {
            text: get("thinking").unwrap_or_default().to_owned(),
            signature: get("signature").map(str::to_owned),
            cache: None,
        },
        _ => {
            tracing::debug!(block_type = kind, "anthropic: content block type left out");
            return Ok(None);
        }
    }))
}

fn finish(
    model: String,
    content: Vec<Block>,
    stop: Option<&str>,
    details: Option<StopDetails>,
    usage: Usage,
) -> Result<LlmResponse> {
    let stop = stop.ok_or_else(|| malformed("no stop_reason"))?;
    let stop_reason =
        stop_reason(stop).ok_or_else(|| malformed(format!("unknown stop_reason `{stop}`")))?;
    if stop_reason == StopReason::Refusal
        && let Some(details) = details
    {
        return Err(details.refusal());
    }
    LlmResponse::new(ResponseBody {
        model,
        content,
        stop_reason,
        usage,
    })
}

/// Decodes a (non-streamed) Messages response body.
pub fn decode_response(body: &[u8]) -> Result<LlmResponse> {
    let message: WireMessage =
        serde_json::from_slice(body).map_err(|e| malformed(format!("{e}")))?;
    let mut content = Vec::with_capacity(message.content.len());
    for block in &message.content {
        content.extend(decode_block(block)?);
    }
    finish(
        message.model,
        content,
        message.stop_reason.as_deref(),
        message.stop_details,
        message.usage.neutral(),
    )
}

#[derive(Debug, Default, Deserialize)]
struct WireErrorBody {
    #[serde(default)]
    error: WireError,
}

#[derive(Debug, Default, Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<WireErrorDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct WireErrorDetails {
    error_code: Option<String>,
}

/// Maps an error answer (HTTP `status`, its body, and its parsed `retry-after`) to
/// tollgate's error types, by status and `error.type`:
///
/// | answer | error |
/// |---|---|
/// | 429 with `details.error_code = enforced_spend_limit_reached`, or 402 / `billing_error` | `QuotaExhausted` |
/// | other 429 / `rate_limit_error` | `ProviderError::RateLimited { retry_after }` |
/// | 529 / `overloaded_error` | `ProviderError::Overloaded { status, retry_after }` (the wire's status) |
/// | 408 | `ProviderError::Timeout` |
/// | other 5xx (`api_error`, 504 `timeout_error`) | `ProviderError::Server { status, retry_after }` |
/// | other 4xx (400, 401, 403, 404, 409, 413, …) | `ProviderRequestError { status }` |
pub fn classify_error(status: u16, body: &[u8], retry_after: Option<Duration>) -> Error {
    let error = serde_json::from_slice::<WireErrorBody>(body)
        .map(|b| b.error)
        .unwrap_or_else(|_| WireError {
            message: String::from_utf8_lossy(body).chars().take(500).collect(),
            ..WireError::default()
        });
    classify(Some(status), error, retry_after)
}

/// Maps a mid-stream `error` event's data (`{"type":"error","error":{…}}`) by its
/// `error.type`, as the same error sent as an HTTP answer would be.
pub fn classify_stream_error(data: &str) -> Error {
    let error = serde_json::from_str::<WireErrorBody>(data)
        .map(|b| b.error)
        .unwrap_or_else(|_| WireError {
            message: data.chars().take(500).collect(),
            ..WireError::default()
        });
    classify(None, error, None)
}

fn classify(status: Option<u16>, error: WireError, retry_after: Option<Duration>) -> Error {
    let spend_limit =
        error.details.as_ref().and_then(|d| d.error_code.as_deref()) == Some(SPEND_LIMIT_CODE);
    let message = if error.kind.is_empty() {
        error.message
    } else {
        format!("{}: {}", error.kind, error.message)
    };
    let quota = || Error::QuotaExhausted {
        provider: PROVIDER.into(),
        message: message.clone(),
    };
    // The status decides where there is one; a stream error has only its type.
    let status = status.unwrap_or(match error.kind.as_str() {
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        "billing_error" => 402,
        "api_error" => 500,
        "timeout_error" => 504,
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        _ => 500,
    });
    match status {
        429 if spend_limit => quota(),
        402 => quota(),
        _ if error.kind == "billing_error" => quota(),
        429 => ProviderError::RateLimited { retry_after }.into(),
        // Overloaded keeps the status the wire said (529, or e.g. a 503 whose body says
        // `overloaded_error`).
        529 => ProviderError::Overloaded {
            status,
            retry_after,
        }
        .into(),
        _ if error.kind == "overloaded_error" => ProviderError::Overloaded {
            status,
            retry_after,
        }
        .into(),
        408 => ProviderError::Timeout { after: None }.into(),
        500..=599 => ProviderError::Server {
            status,
            retry_after,
        }
        .into(),
        _ => ProviderRequestError::new(status, message).into(),
    }
}

/// A content block being streamed.
#[derive(Debug)]
enum Building {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// A block type tollgate has no neutral form for; left out of the answer.
    Skipped,
}

/// Turns Anthropic stream events into [`StreamEvent`]s and, at `message_stop`, the
/// whole [`LlmResponse`].
///
/// Feed each event's JSON data (its `type` names the event) to [`StreamDecoder::event`].
/// Nothing is emitted for `message_start`, `ping` or a text block's start, so the first
/// event comes with the first content.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    model: String,
    blocks: Vec<(usize, Building)>,
    usage: WireUsage,
    stop: Option<String>,
    stop_details: Option<StopDetails>,
    finished: bool,
}

#[derive(Debug, Deserialize)]
struct WireStreamEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: usize,
    message: Option<WireMessage>,
    content_block: Option<Value>,
    delta: Option<Value>,
    usage: Option<WireUsage>,
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `message_stop` has been seen.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Decodes one event's JSON `data`; returns the events it produces (often none).
    /// An `error` event, a refusal with `stop_details`, or malformed data is an `Err`.
    pub fn event(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        let event: WireStreamEvent =
            serde_json::from_str(data).map_err(|e| malformed(format!("stream event: {e}")))?;
        let mut out = Vec::new();
        match event.kind.as_str() {
            "message_start" => {
                let message = event
                    .message
                    .ok_or_else(|| malformed("message_start without a message"))?;
                self.model = message.model;
                self.usage.merge(message.usage);
            }
            "content_block_start" => {
                let block = event.content_block.unwrap_or_default();
                let get = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
                let index = event.index;
                let building = match get("type") {
                    "text" => {
                        let text = get("text").to_owned();
                        if !text.is_empty() {
                            out.push(StreamEvent::TextDelta {
                                index,
                                text: text.clone(),
                            });
                        }
                        Building::Text(text)
                    }
                    "thinking" => {
                        let text = get("thinking").to_owned();
                        if !text.is_empty() {
                            out.push(StreamEvent::ThinkingDelta {
                                index,
                                text: text.clone(),
                            });
                        }
                        Building::Thinking {
                            text,
                            signature: block
                                .get("signature")
                                .and_then(Value::as_str)
                                .filter(|s| !s.is_empty())
                                .map(str::to_owned),
                        }
                    }
                    "tool_use" => {
                        let (id, name) = (get("id").to_owned(), get("name").to_owned());
                        out.push(StreamEvent::ToolUseDelta {
                            index,
                            id: Some(id.clone()),
                            name: Some(name.clone()),
                            input_json: String::new(),
                        });
                        Building::ToolUse {
                            id,
                            name,
                            json: String::new(),
                        }
                    }
                    other => {
                        tracing::debug!(
                            block_type = other,
                            "anthropic: streamed block type left out"
                        );
                        Building::Skipped
                    }
                };
                self.blocks.push((index, building));
            }
            "content_block_delta" => {
                let delta = event.delta.unwrap_or_default();
                let get = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                let index = event.index;
                let Some((_, building)) = self.blocks.iter_mut().rev().find(|(i, _)| *i == index)
                else {
                    return Err(malformed(format!(
                        "a delta for block {index}, which was not started"
                    )));
                };
                match (get("type"), building) {
                    ("text_delta", Building::Text(text)) => {
                        text.push_str(get("text"));
                        out.push(StreamEvent::TextDelta {
                            index,
                            text: get("text").to_owned(),
                        });
                    }
                    ("thinking_delta", Building::Thinking { text, .. }) => {
                        text.push_str(get("thinking"));
                        out.push(StreamEvent::ThinkingDelta {
                            index,
                            text: get("thinking").to_owned(),
                        });
                    }
                    ("signature_delta", Building::Thinking { signature, .. }) => {
                        signature
                            .get_or_insert_with(String::new)
                            .push_str(get("signature"));
                    }
                    ("input_json_delta", Building::ToolUse { json, .. }) => {
                        json.push_str(get("partial_json"));
                        out.push(StreamEvent::ToolUseDelta {
                            index,
                            id: None,
                            name: None,
                            input_json: get("partial_json").to_owned(),
                        });
                    }
                    // citations_delta and deltas of left-out blocks carry nothing we keep.
                    _ => {}
                }
            }
            "content_block_stop" => {
                // Tool input is parsed once, when its block is complete.
                if let Some((_, Building::ToolUse { json, .. })) =
                    self.blocks.iter().rev().find(|(i, _)| *i == event.index)
                    && !json.trim().is_empty()
                    && serde_json::from_str::<Value>(json).is_err()
                {
                    return Err(malformed(format!(
                        "the input of tool-use block {} is not JSON",
                        event.index
                    )));
                }
            }
            "message_delta" => {
                let delta = event.delta.unwrap_or_default();
                if let Some(stop) = delta.get("stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop.to_owned());
                }
                if let Some(details) = delta.get("stop_details").filter(|d| !d.is_null()) {
                    self.stop_details = serde_json::from_value(details.clone()).ok();
                }
                if let Some(usage) = event.usage {
                    self.usage.merge(usage);
                }
                out.push(StreamEvent::Usage(self.usage.neutral()));
                if let Some(reason) = self.stop.as_deref().and_then(stop_reason) {
                    if reason == StopReason::Refusal
                        && let Some(details) = self.stop_details.take()
                    {
                        return Err(details.refusal());
                    }
                    out.push(StreamEvent::Stop(reason));
                }
            }
            "message_stop" => {
                self.finished = true;
                let response = self.response()?;
                out.push(StreamEvent::Completed(response));
            }
            "ping" => {}
            "error" => return Err(classify_stream_error(data)),
            other => tracing::debug!(event = other, "anthropic: stream event ignored"),
        }
        Ok(out)
    }

    fn response(&mut self) -> Result<LlmResponse> {
        let mut blocks = std::mem::take(&mut self.blocks);
        blocks.sort_by_key(|(i, _)| *i);
        let mut content = Vec::with_capacity(blocks.len());
        for (_, building) in blocks {
            content.push(match building {
                Building::Text(text) => Block::text(text),
                Building::Thinking { text, signature } => Block::Thinking {
                    text,
                    signature,
                    cache: None,
                },
                Building::ToolUse { id, name, json } => {
                    let input = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json)
                            .map_err(|e| malformed(format!("tool input: {e}")))?
                    };
                    Block::ToolUse {
                        id,
                        name,
                        input: Json::new(input),
                        cache: None,
                    }
                }
                Building::Skipped => continue,
            });
        }
        finish(
            std::mem::take(&mut self.model),
            content,
            self.stop.as_deref(),
            self.stop_details.take(),
            self.usage.neutral(),
        )
    }
}
