//! The OpenAI Chat Completions and Embeddings wire format: request bodies, response
//! bodies, stream chunks, error bodies and rate-limit header values, to and from
//! tollgate's neutral types. No I/O here.
//!
//! - [`encode_request`] turns an [`LlmRequest`] into a Chat Completions body: system
//!   messages stay `system` messages, tool results become `tool` messages, tool uses
//!   become `tool_calls`, a response shape becomes `response_format` with a JSON schema.
//!   Cache marks are dropped (OpenAI caches prompts automatically); thinking blocks are
//!   dropped (Chat Completions takes no reasoning input).
//! - [`decode_response`] turns a response body into an [`LlmResponse`], with usage in
//!   tollgate's convention ([`Usage::from_cache_inclusive`]: `prompt_tokens` includes
//!   `cached_tokens`). A non-empty `message.refusal` is [`Error::ProviderRefusal`], and
//!   so is `finish_reason: "refusal"` (not OpenAI's, but sent by some compatible servers).
//! - [`StreamDecoder`] turns `chat.completion.chunk`s into [`StreamEvent`]s. Nothing is
//!   emitted before the first content, so an error before it fails the stream before
//!   its first event (and the pipeline retries).
//! - [`classify_error`] maps an error status and body to tollgate's error types by
//!   status, `error.type` and `error.code` (never by message text).
//! - [`parse_go_duration`] reads `x-ratelimit-reset-*` values such as `6m0s`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tollgate::{
    Block, Error, ImageSource, Json, LlmRequest, LlmResponse, ProviderError, ProviderRequestError,
    ResponseBody, Result, Role, StopReason, StreamEvent, Usage,
};

use crate::options::OutputLimitField;

/// The provider key errors are reported under.
pub const PROVIDER: &str = "openai";

/// The error `type`/`code` values that mean the account is out of money or quota: never
/// retried.
pub const QUOTA_CODES: &[&str] = &[
    "insufficient_quota",
    "billing_hard_limit_reached",
    "credit_balance_exhausted",
    "organization_spend_limit_exceeded",
    "project_spend_limit_exceeded",
    "organization_usage_limit_exceeded",
];

/// `tool_choice`: how the model may use the request's tools.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model decides (OpenAI's default with tools; nothing is sent).
    #[default]
    Auto,
    /// The model must call some tool (`required`).
    Required,
    /// The model must not call tools.
    None,
    /// The model must call this function.
    Tool(String),
}

impl ToolChoice {
    /// Parses the catalog spelling: `auto`, `required`, `none` or `tool:NAME`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "auto" => Some(ToolChoice::Auto),
            "required" => Some(ToolChoice::Required),
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
            ToolChoice::Required => Some(json!("required")),
            ToolChoice::None => Some(json!("none")),
            ToolChoice::Tool(name) => Some(json!({"type": "function", "function": {"name": name}})),
        }
    }
}

/// What the body needs besides the request.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

fn invalid(field: String, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        field,
        reason: reason.into(),
    }
}

fn image_url(source: &ImageSource) -> String {
    match source {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    }
}

/// Text of a block that must be text (system prompts, tool results).
fn text_parts(blocks: &[Block], field: &str, what: &str) -> Result<String> {
    let mut out = String::new();
    for (k, block) in blocks.iter().enumerate() {
        match block {
            Block::Text { text, .. } => out.push_str(text),
            _ => {
                return Err(invalid(
                    format!("{field}[{k}]"),
                    format!("must be text: OpenAI's {what} holds text only"),
                ));
            }
        }
    }
    Ok(out)
}

/// Encodes `request` as a Chat Completions body. Fails with [`Error::InvalidRequest`],
/// before anything is sent, on non-text system blocks, images in assistant turns, or
/// non-text tool results.
pub fn encode_request(request: &LlmRequest, options: &EncodeOptions) -> Result<Value> {
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    let mut messages = Vec::new();
    for (i, message) in request.messages().iter().enumerate() {
        let field = format!("messages[{i}].content");
        match message.role {
            Role::System => {
                let text = text_parts(&message.content, &field, "system message")?;
                messages.push(json!({"role": "system", "content": text}));
            }
            Role::User => encode_user(&message.content, &field, &mut messages)?,
            Role::Assistant => messages.push(encode_assistant(&message.content, &field)?),
        }
    }
    body.insert("messages".into(), Value::Array(messages));

    if !request.tools_schema().is_empty() {
        let tools: Vec<Value> = request
            .tools_schema()
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema.value(),
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = options.tool_choice.to_json() {
            body.insert("tool_choice".into(), choice);
        }
    }
    let sampling = request.sampling_params();
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
                "strict": true,
            }}),
        );
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
        if options.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    Ok(Value::Object(body))
}

/// OpenAI's schema names allow `a-zA-Z0-9_-`, at most 64 characters.
fn shape_name(name: &str) -> String {
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

/// A user turn: tool results become `tool` messages (first, in order), the rest one
/// `user` message of parts.
fn encode_user(content: &[Block], field: &str, messages: &mut Vec<Value>) -> Result<()> {
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
                let mut text = text_parts(content, &format!("{field}.content"), "tool message")?;
                if *is_error && !text.starts_with("Error") {
                    text = format!("Error: {text}");
                }
                messages
                    .push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
            }
            Block::ToolUse { .. } => {
                return Err(invalid(field, "a tool use belongs in an assistant turn"));
            }
            Block::Thinking { .. } => {
                return Err(invalid(
                    field,
                    "a thinking block belongs in an assistant turn",
                ));
            }
        }
    }
    if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

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
            // Chat Completions takes no reasoning input; the model re-reasons.
            Block::Thinking { .. } => {}
            _ => {
                return Err(invalid(
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

/// The wire `usage` object. Every field optional: compatible servers leave some out.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

impl WireUsage {
    /// In tollgate's convention: `prompt_tokens` includes cache reads and writes, which
    /// are taken out; `completion_tokens` includes reasoning tokens.
    pub fn neutral(&self) -> Usage {
        let details = self.prompt_tokens_details.unwrap_or_default();
        Usage::from_cache_inclusive(
            self.prompt_tokens.unwrap_or(0),
            details.cached_tokens.unwrap_or(0),
            details.cache_write_tokens.unwrap_or(0),
            self.completion_tokens.unwrap_or(0),
        )
    }

    /// The prompt tokens as sent (embeddings report only these).
    pub fn prompt_tokens(&self) -> u64 {
        self.prompt_tokens.unwrap_or(0)
    }
}

/// Maps a wire `finish_reason`. `function_call` is the deprecated form of `tool_calls`;
/// `eos` is what some compatible servers send for a natural end.
pub fn stop_reason(wire: &str) -> Option<StopReason> {
    Some(match wire {
        "stop" | "eos" | "end_turn" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::ContentFilter,
        _ => return None,
    })
}

/// Reads `null` as the default: compatible servers (and OpenAI's own examples) send
/// `"tool_calls": null` where a list is empty.
fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn malformed(what: impl Into<String>) -> Error {
    ProviderRequestError::new(
        200,
        format!("the server sent a malformed answer: {}", what.into()),
    )
    .into()
}

fn refusal(text: &str) -> Error {
    Error::ProviderRefusal {
        category: "refusal".into(),
        explanation: text.to_owned(),
    }
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(default)]
    model: String,
    #[serde(default, deserialize_with = "null_as_default")]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default, deserialize_with = "null_as_default")]
    message: WireMessage,
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<WireLogprobs>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    content: Option<String>,
    refusal: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    #[serde(default)]
    function: WireFunction,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

fn parse_arguments(text: &str, what: &str) -> Result<Json> {
    if text.trim().is_empty() {
        return Ok(Json::new(json!({})));
    }
    serde_json::from_str(text)
        .map(Json::new)
        .map_err(|e| malformed(format!("the arguments of {what} are not JSON: {e}")))
}

fn finish(
    model: String,
    content: Vec<Block>,
    stop: Option<&str>,
    usage: Usage,
) -> Result<LlmResponse> {
    let stop_reason = match stop {
        Some(s) => {
            stop_reason(s).ok_or_else(|| malformed(format!("unknown finish_reason `{s}`")))?
        }
        // Some compatible servers leave it out of a natural end.
        None => StopReason::EndTurn,
    };
    LlmResponse::new(ResponseBody {
        model,
        content,
        stop_reason,
        usage,
    })
}

/// Decodes a (non-streamed) Chat Completions body: the first choice.
pub fn decode_response(body: &[u8]) -> Result<LlmResponse> {
    let response: WireResponse =
        serde_json::from_slice(body).map_err(|e| malformed(format!("{e}")))?;
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| malformed("no choices"))?;
    let message = choice.message;
    if let Some(text) = message.refusal.as_deref().filter(|r| !r.is_empty()) {
        return Err(refusal(text));
    }
    // Not an OpenAI value, but some compatible servers (and mocks) end a refusal so.
    if choice.finish_reason.as_deref() == Some("refusal") {
        return Err(refusal(message.content.as_deref().unwrap_or_default()));
    }
    let mut content = Vec::new();
    if let Some(text) = message.content.filter(|t| !t.is_empty()) {
        content.push(Block::text(text));
    }
    for call in message.tool_calls {
        let input = parse_arguments(
            &call.function.arguments,
            &format!("tool call `{}`", call.id),
        )?;
        content.push(Block::ToolUse {
            id: call.id,
            name: call.function.name,
            input,
            cache: None,
        });
    }
    finish(
        response.model,
        content,
        choice.finish_reason.as_deref(),
        response.usage.unwrap_or_default().neutral(),
    )
}

#[derive(Debug, Default, Deserialize)]
struct WireLogprobs {
    #[serde(default)]
    content: Option<Vec<WireTokenLogprob>>,
}

#[derive(Debug, Deserialize)]
struct WireTokenLogprob {
    #[serde(default)]
    token: String,
    #[serde(default)]
    logprob: f64,
    #[serde(default, deserialize_with = "null_as_default")]
    top_logprobs: Vec<WireTopLogprob>,
}

#[derive(Debug, Deserialize)]
struct WireTopLogprob {
    #[serde(default)]
    token: String,
    #[serde(default)]
    logprob: f64,
}

/// OpenAI's "not among the top logprobs" value.
const NOT_IN_TOP: f64 = -9999.0;

/// Encodes one decision question as a Chat Completions body asking for one token with
/// its top 20 logprobs, at temperature 0.
pub fn encode_decision(
    model: &str,
    output_limit_field: OutputLimitField,
    state: &str,
    prompt: &str,
    labels: &[(String, String)],
) -> Value {
    let listed: Vec<String> = labels
        .iter()
        .map(|(label, option)| {
            if label == option {
                format!("- {label}")
            } else {
                format!("- {label}: {option}")
            }
        })
        .collect();
    let system = "You answer a question about a state with exactly one option label \
                  from the list given, and nothing else.";
    let user = format!(
        "State:\n{state}\n\nQuestion: {prompt}\n\nOptions:\n{}\n\nAnswer with one label only.",
        listed.join("\n")
    );
    let mut body = json!({
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        "logprobs": true,
        "top_logprobs": 20,
        "temperature": 0,
    });
    body[output_limit_field.field()] = json!(1);
    body
}

/// Decodes a decision answer: the first generated token's top logprobs, as a weight per
/// label (`exp(logprob)` summed over the tokens that read as the label, ignoring case
/// and surrounding spaces). Returns the weights and the usage. A label no top token
/// matches has weight 0; an answer where no label matches at all is an error.
pub fn decode_decision(body: &[u8], labels: &[String]) -> Result<(BTreeMap<String, f64>, Usage)> {
    let response: WireResponse =
        serde_json::from_slice(body).map_err(|e| malformed(format!("{e}")))?;
    let usage = response.usage.unwrap_or_default().neutral();
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| malformed("no choices"))?;
    let first = choice
        .logprobs
        .and_then(|l| l.content)
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| {
            malformed("no logprobs: the server does not return them (set `options.logprobs = false` for this model)")
        })?;
    let mut candidates: Vec<(String, f64)> = first
        .top_logprobs
        .into_iter()
        .map(|t| (t.token, t.logprob))
        .collect();
    if candidates.is_empty() {
        candidates.push((first.token, first.logprob));
    }
    let mut weights: BTreeMap<String, f64> = labels.iter().map(|l| (l.clone(), 0.0)).collect();
    for (token, logprob) in candidates {
        if logprob <= NOT_IN_TOP || !logprob.is_finite() {
            continue;
        }
        let token = token.trim();
        if let Some(label) = labels.iter().find(|l| l.eq_ignore_ascii_case(token)) {
            *weights.entry(label.clone()).or_default() += logprob.exp();
        }
    }
    if weights.values().all(|w| *w <= 0.0) {
        return Err(malformed(
            "none of the first token's top logprobs is an option label",
        ));
    }
    Ok((weights, usage))
}

#[derive(Debug, Deserialize)]
struct WireEmbeddings {
    #[serde(default, deserialize_with = "null_as_default")]
    data: Vec<WireEmbedding>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireEmbedding {
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// Encodes an embeddings request body.
pub fn encode_embeddings(model: &str, texts: &[String], dimensions: Option<u64>) -> Value {
    let mut body = json!({"model": model, "input": texts, "encoding_format": "float"});
    if let Some(d) = dimensions {
        body["dimensions"] = json!(d);
    }
    body
}

/// Decodes an embeddings body for `expected` inputs: the vectors in input order (by
/// each item's `index`, or list order where a server leaves it out) and the prompt
/// tokens.
pub fn decode_embeddings(body: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64)> {
    let response: WireEmbeddings =
        serde_json::from_slice(body).map_err(|e| malformed(format!("{e}")))?;
    if response.data.len() != expected {
        return Err(malformed(format!(
            "{} embeddings for {expected} inputs",
            response.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in response.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| malformed(format!("embedding index {index} out of range")))?;
        if slot.replace(item.embedding).is_some() {
            return Err(malformed(format!("embedding index {index} given twice")));
        }
    }
    let vectors = slots
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| malformed("an embedding index is missing"))?;
    Ok((
        vectors,
        response.usage.map(|u| u.prompt_tokens()).unwrap_or(0),
    ))
}

/// The error object, wherever the server put it: OpenAI's `{"error":{…}}`, vLLM's
/// top-level `{"object":"error","message",…}`, or `{"error":"text"}`.
#[derive(Debug, Default)]
struct WireError {
    kind: String,
    code: String,
    message: String,
}

fn string_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn parse_error(text: &str) -> WireError {
    let fallback = || WireError {
        message: text.chars().take(500).collect(),
        ..WireError::default()
    };
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return fallback();
    };
    let object = match value.get("error") {
        Some(inner @ Value::Object(_)) => inner,
        Some(Value::String(message)) => {
            return WireError {
                message: message.clone(),
                ..WireError::default()
            };
        }
        _ if value.get("message").is_some() => &value,
        _ => return fallback(),
    };
    WireError {
        kind: string_of(object.get("type")),
        code: string_of(object.get("code")),
        message: string_of(object.get("message")),
    }
}

/// Maps an error answer (HTTP `status`, its body, and its parsed `retry-after`) to
/// tollgate's error types, by status, `error.type` and `error.code`:
///
/// | answer | error |
/// |---|---|
/// | `type` or `code` `insufficient_quota` (or another [`QUOTA_CODES`] value), or 402 | `QuotaExhausted` (never retried) |
/// | other 429 (`rate_limit_exceeded`, `slow_down`) | `ProviderError::RateLimited { retry_after }` |
/// | 408 | `ProviderError::Timeout` |
/// | 5xx | `ProviderError::Server { status, retry_after }` (`retry-after` honoured on a 503 too) |
/// | other 4xx (400, 401, 403, 404, 409, 413, 422, …) | `ProviderRequestError { status }` |
pub fn classify_error(status: u16, body: &[u8], retry_after: Option<Duration>) -> Error {
    classify(
        Some(status),
        parse_error(&String::from_utf8_lossy(body)),
        retry_after,
    )
}

/// Maps a mid-stream error chunk (`{"error":{…}}`) by its `type` and `code`, as the
/// same error sent as an HTTP answer would be.
pub fn classify_stream_error(data: &str) -> Error {
    classify(None, parse_error(data), None)
}

fn classify(status: Option<u16>, error: WireError, retry_after: Option<Duration>) -> Error {
    let quota =
        QUOTA_CODES.contains(&error.kind.as_str()) || QUOTA_CODES.contains(&error.code.as_str());
    let label = [error.kind.as_str(), error.code.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("/");
    let message = if label.is_empty() {
        error.message
    } else {
        format!("{label}: {}", error.message)
    };
    if quota || status == Some(402) {
        return Error::QuotaExhausted {
            provider: PROVIDER.into(),
            message,
        };
    }
    // The input does not fit the model's context window (a 400 with this code): typed,
    // so a fallback chain can move the call to a model with a larger window.
    if error.code == "context_length_exceeded" {
        return Error::provider_context_overflow();
    }
    // A stream error has no status: its type and code stand for one.
    let status = status.unwrap_or(match (error.kind.as_str(), error.code.as_str()) {
        (_, "rate_limit_exceeded" | "slow_down")
        | ("rate_limit_exceeded" | "rate_limit_error", _) => 429,
        ("invalid_request_error", _) => 400,
        ("authentication_error", _) => 401,
        ("permission_error", _) => 403,
        ("not_found_error", _) => 404,
        _ => 500,
    });
    match status {
        429 => ProviderError::RateLimited { retry_after }.into(),
        408 => ProviderError::Timeout { after: None }.into(),
        500..=599 => ProviderError::Server {
            status,
            retry_after,
        }
        .into(),
        _ => ProviderRequestError::new(status, message).into(),
    }
}

/// Parses a Go duration string as OpenAI's `x-ratelimit-reset-*` headers carry them:
/// `1s`, `6m0s`, `12ms`, `1.5s`, `1h2m3.5s`, `250us`. `None` for anything else.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// A content block being streamed, in order of first appearance.
#[derive(Debug)]
enum Building {
    Text(String),
    ToolUse {
        wire_index: u64,
        id: String,
        name: String,
        json: String,
    },
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    choices: Vec<WireChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    index: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    delta: WireDelta,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireDelta {
    content: Option<String>,
    refusal: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    tool_calls: Vec<WireToolCallDelta>,
}

#[derive(Debug, Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: u64,
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

/// Turns `chat.completion.chunk`s into [`StreamEvent`]s and, at `data: [DONE]` (or at
/// the end of the body, where [`StreamDecoder::end`] allows it), the whole
/// [`LlmResponse`].
///
/// Content blocks are numbered in order of first appearance (text, then each tool call
/// as its first fragment arrives). Role-only chunks emit nothing, so the first event
/// comes with the first content. A refusal (`delta.refusal`) is collected and, at the
/// finish reason, becomes [`Error::ProviderRefusal`].
#[derive(Debug, Default)]
pub struct StreamDecoder {
    model: String,
    blocks: Vec<Building>,
    refusal: String,
    usage: Option<WireUsage>,
    stop: Option<String>,
    finished: bool,
}

impl StreamDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the answer is complete (`[DONE]` seen, or [`StreamDecoder::end`]
    /// accepted the end of the body).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Decodes one event's `data`; returns the events it produces (often none). An
    /// error chunk, a refusal, or malformed data is an `Err`.
    pub fn event(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        if data.trim_start().starts_with("[DONE]") {
            return self.complete();
        }
        let chunk: WireChunk =
            serde_json::from_str(data).map_err(|e| malformed(format!("stream chunk: {e}")))?;
        if chunk.error.as_ref().is_some_and(|e| !e.is_null()) {
            return Err(classify_stream_error(data));
        }
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        let mut out = Vec::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            let delta = choice.delta;
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                let index = match self
                    .blocks
                    .iter()
                    .position(|b| matches!(b, Building::Text(_)))
                {
                    Some(i) => i,
                    None => {
                        self.blocks.push(Building::Text(String::new()));
                        self.blocks.len() - 1
                    }
                };
                if let Building::Text(all) = &mut self.blocks[index] {
                    all.push_str(&text);
                }
                out.push(StreamEvent::TextDelta { index, text });
            }
            if let Some(r) = delta.refusal {
                self.refusal.push_str(&r);
            }
            for call in delta.tool_calls {
                let function = call.function.unwrap_or_default();
                let arguments = function.arguments.unwrap_or_default();
                let existing = self.blocks.iter().position(
                    |b| matches!(b, Building::ToolUse { wire_index, .. } if *wire_index == call.index),
                );
                match existing {
                    Some(index) => {
                        if let Building::ToolUse { json, .. } = &mut self.blocks[index] {
                            json.push_str(&arguments);
                        }
                        if !arguments.is_empty() {
                            out.push(StreamEvent::ToolUseDelta {
                                index,
                                id: None,
                                name: None,
                                input_json: arguments,
                            });
                        }
                    }
                    None => {
                        let id = call.id.unwrap_or_default();
                        let name = function.name.unwrap_or_default();
                        self.blocks.push(Building::ToolUse {
                            wire_index: call.index,
                            id: id.clone(),
                            name: name.clone(),
                            json: arguments.clone(),
                        });
                        out.push(StreamEvent::ToolUseDelta {
                            index: self.blocks.len() - 1,
                            id: Some(id),
                            name: Some(name),
                            input_json: arguments,
                        });
                    }
                }
            }
            if let Some(stop) = choice.finish_reason {
                if !self.refusal.is_empty() {
                    return Err(refusal(&self.refusal));
                }
                if stop == "refusal" {
                    return Err(refusal(&self.text()));
                }
                let reason = stop_reason(&stop)
                    .ok_or_else(|| malformed(format!("unknown finish_reason `{stop}`")))?;
                self.stop = Some(stop);
                out.push(StreamEvent::Stop(reason));
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
            out.push(StreamEvent::Usage(usage.neutral()));
        }
        Ok(out)
    }

    /// The body ended. With `done_required` (OpenAI) a stream without `[DONE]` was cut;
    /// otherwise (compatible servers, where `[DONE]` is optional) a stream that gave a
    /// finish reason is complete. A cut stream is a bad gateway (`Server { 502 }`).
    pub fn end(&mut self, done_required: bool) -> Result<Vec<StreamEvent>> {
        if self.finished {
            return Ok(Vec::new());
        }
        if done_required || self.stop.is_none() {
            return Err(ProviderError::server(502).into());
        }
        self.complete()
    }

    /// The text streamed so far.
    fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Building::Text(t) => Some(t.as_str()),
                Building::ToolUse { .. } => None,
            })
            .collect()
    }

    fn complete(&mut self) -> Result<Vec<StreamEvent>> {
        if self.finished {
            return Ok(Vec::new());
        }
        if !self.refusal.is_empty() {
            return Err(refusal(&self.refusal));
        }
        if self.stop.is_none() {
            return Err(ProviderError::server(502).into());
        }
        self.finished = true;
        let mut content = Vec::with_capacity(self.blocks.len());
        for building in std::mem::take(&mut self.blocks) {
            content.push(match building {
                Building::Text(text) => Block::text(text),
                Building::ToolUse { id, name, json, .. } => {
                    let input = parse_arguments(&json, &format!("tool call `{id}`"))?;
                    Block::ToolUse {
                        id,
                        name,
                        input,
                        cache: None,
                    }
                }
            });
        }
        let response = finish(
            std::mem::take(&mut self.model),
            content,
            self.stop.as_deref(),
            self.usage.unwrap_or_default().neutral(),
        )?;
        Ok(vec![StreamEvent::Completed(response)])
    }
}
