//! OpenAI chat-completion and embeddings requests, decoded into tollgate's neutral
//! [`LlmRequest`]. `tool_choice`, `parallel_tool_calls`, `reasoning_effort`, `seed`,
//! `verbosity` (a hint, left out where the provider has no field for it), a
//! tool's and a schema's `strict`, and PDF `file` parts are carried to the provider (or
//! refused there by type); fields that only tune OpenAI's own service (`user`,
//! `metadata`, `service_tier`, …) are accepted and ignored; `n` above 1 is refused.

use serde::Deserialize;
use serde_json::Value;
use tollgate::{
    Block, DocumentSource, ImageSource, Json, LlmRequest, Message, Reasoning, ReasoningEffort,
    ResponseShape, Role, SamplingParams, ToolChoice, ToolDefinition,
};

use crate::error::GatewayError;
use crate::params::{gateway_answers, sampling};

/// `POST /v1/chat/completions`'s body, as far as the gateway reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    pub(crate) model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    tools: Vec<Tool>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    stop: Option<Stop>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    response_format: Option<ResponseFormat>,
    #[serde(default)]
    pub(crate) stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    reasoning_effort: Option<String>,
    #[serde(default)]
    seed: Option<i64>,
    #[serde(default)]
    verbosity: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    File { file: FilePart },
}

#[derive(Debug, Deserialize)]
struct FilePart {
    #[serde(default)]
    file_data: Option<String>,
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    filename: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ImageUrl {
    url: String,
}

#[derive(Debug, Deserialize)]
struct ToolCall {
    id: String,
    function: FunctionCall,
}

#[derive(Debug, Deserialize)]
struct FunctionCall {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Debug, Deserialize)]
struct Tool {
    function: FunctionDef,
}

#[derive(Debug, Deserialize)]
struct FunctionDef {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Deserialize)]
struct JsonSchemaFormat {
    name: String,
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

impl ChatRequest {
    /// Whether a stream should end with a usage chunk.
    pub(crate) fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }

    /// The neutral request for catalog model `self.model`, answered as the gateway
    /// answers ([`gateway_answers`]).
    pub(crate) fn to_llm_request(&self) -> Result<LlmRequest, GatewayError> {
        self.llm_request(gateway_answers(SamplingParams::new()))
    }

    /// The neutral request for catalog model `self.model`, its sampling laid over
    /// `base` (which says how failures are answered).
    pub(crate) fn llm_request(&self, base: SamplingParams) -> Result<LlmRequest, GatewayError> {
        match self.n {
            Some(0) => {
                return Err(GatewayError::BadBody(
                    "`n` must be at least 1 (it is the number of choices)".into(),
                ));
            }
            Some(n) if n > 1 => {
                return Err(GatewayError::BadBody(
                    "`n` above 1 is not supported; send one request per choice".into(),
                ));
            }
            _ => {}
        }
        let max = self.max_completion_tokens.or(self.max_tokens);
        let mut params = sampling(base, self.temperature, self.top_p, max)?;
        match &self.stop {
            Some(Stop::One(s)) => params = params.with_stop(s.clone()),
            Some(Stop::Many(all)) => {
                for s in all {
                    params = params.with_stop(s.clone());
                }
            }
            None => {}
        }
        match &self.response_format {
            Some(ResponseFormat::JsonSchema { json_schema }) => {
                let schema = json_schema.schema.clone().unwrap_or_else(any_object);
                params = params.with_response_shape(ResponseShape {
                    name: json_schema.name.clone(),
                    schema: Json::new(schema),
                    strict: json_schema.strict,
                });
            }
            // Any JSON object, no schema: never a made-up `{"type": "object"}` schema,
            // which a strict provider fills with `{}`.
            Some(ResponseFormat::JsonObject) => params = params.with_json_object(),
            Some(ResponseFormat::Text) | None => {}
        }
        if let Some(choice) = &self.tool_choice {
            params = params.with_tool_choice(tool_choice(choice)?);
        }
        if let Some(parallel) = self.parallel_tool_calls {
            params = params.with_parallel_tool_calls(parallel);
        }
        if let Some(effort) = &self.reasoning_effort {
            let effort = ReasoningEffort::parse(effort).ok_or_else(|| {
                GatewayError::BadBody(format!(
                    "reasoning_effort `{effort}` is not one of {}",
                    ReasoningEffort::ACCEPTED
                ))
            })?;
            params = params.with_reasoning(Reasoning::effort(effort))?;
        }
        if let Some(seed) = self.seed {
            params = params.with_seed(seed);
        }
        if let Some(v) = &self.verbosity {
            params = params.with_verbosity(crate::params::verbosity(v, "verbosity")?);
        }
        let tools = self
            .tools
            .iter()
            .map(|t| ToolDefinition {
                defer_loading: false,
                cache: None,
                name: t.function.name.clone(),
                description: t.function.description.clone(),
                input_schema: Json::new(t.function.parameters.clone().unwrap_or_else(any_object)),
                strict: t.function.strict,
                native: None,
            })
            .collect();
        Ok(LlmRequest::new(
            self.model.clone(),
            messages(&self.messages)?,
            tools,
            params,
        )?)
    }
}

/// Chat's `tool_choice`: `auto`, `none`, `required`, or `{"type": "function",
/// "function": {"name": …}}`.
fn tool_choice(value: &Value) -> Result<ToolChoice, GatewayError> {
    let named = value
        .get("function")
        .and_then(|f| f.get("name"))
        .and_then(Value::as_str)
        .filter(|_| value.get("type").and_then(Value::as_str) == Some("function"));
    match (value.as_str(), named) {
        (Some("auto"), _) => Ok(ToolChoice::Auto),
        (Some("none"), _) => Ok(ToolChoice::None),
        (Some("required"), _) => Ok(ToolChoice::Required),
        (_, Some(name)) => Ok(ToolChoice::Tool(name.to_owned())),
        _ => Err(GatewayError::BadBody(format!(
            "tool_choice {value} is not one of \"auto\", \"none\", \"required\" or \
             {{\"type\": \"function\", \"function\": {{\"name\": …}}}}"
        ))),
    }
}

/// `{"type":"object"}`: any JSON object.
fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

/// The messages in tollgate's form: `system`/`developer` lead as system messages,
/// `tool` results join one user message per run of them.
fn messages(input: &[ChatMessage]) -> Result<Vec<Message>, GatewayError> {
    let mut out: Vec<Message> = Vec::with_capacity(input.len());
    for (i, m) in input.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => Role::System,
            "user" | "tool" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(GatewayError::BadBody(format!(
                    "messages[{i}].role `{other}` is not one of system, developer, user, assistant, tool"
                )));
            }
        };
        let mut content = match &m.content {
            Some(c) => blocks(c, i)?,
            None => Vec::new(),
        };
        if m.role == "tool" {
            let tool_use_id = m.tool_call_id.clone().ok_or_else(|| {
                GatewayError::BadBody(format!("messages[{i}].tool_call_id is required"))
            })?;
            let result = Block::ToolResult {
                tool_use_id,
                content: std::mem::take(&mut content),
                is_error: false,
                cache: None,
            };
            match out.last_mut() {
                Some(last)
                    if last.role == Role::User
                        && last
                            .content
                            .iter()
                            .all(|b| matches!(b, Block::ToolResult { .. })) =>
                {
                    last.content.push(result);
                }
                _ => out.push(Message {
                    role: Role::User,
                    content: vec![result],
                }),
            }
            continue;
        }
        for call in &m.tool_calls {
            let input: Value = if call.function.arguments.trim().is_empty() {
                serde_json::json!({})
            } else {
                serde_json::from_str(&call.function.arguments).map_err(|e| {
                    GatewayError::BadBody(format!(
                        "messages[{i}].tool_calls: arguments of `{}` are not JSON: {e}",
                        call.function.name
                    ))
                })?
            };
            content.push(Block::ToolUse {
                id: call.id.clone(),
                name: call.function.name.clone(),
                input: Json::new(input),
                cache: None,
            });
        }
        out.push(Message { role, content });
    }
    Ok(out)
}

fn blocks(content: &Content, i: usize) -> Result<Vec<Block>, GatewayError> {
    match content {
        Content::Text(text) if text.is_empty() => Ok(Vec::new()),
        Content::Text(text) => Ok(vec![Block::text(text.clone())]),
        Content::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                Part::Text { text } => Ok(Block::text(text.clone())),
                Part::ImageUrl { image_url } => Ok(Block::Image {
                    source: image_source(&image_url.url, i)?,
                    cache: None,
                }),
                Part::File { file } => file_block(file, i),
            })
            .collect(),
    }
}

/// A `file` part: inline data as a document; a provider file id cannot move between
/// providers, so it is refused.
fn file_block(file: &FilePart, i: usize) -> Result<Block, GatewayError> {
    let Some(data) = &file.file_data else {
        return Err(GatewayError::BadBody(format!(
            "messages[{i}]: a `file` part needs `file_data` (a data URL); `file_id`{} names a \
             file stored at one provider, which the gateway cannot send elsewhere",
            file.file_id
                .as_deref()
                .map(|id| format!(" `{id}`"))
                .unwrap_or_default()
        )));
    };
    let source = match image_source(data, i)? {
        ImageSource::Base64 { media_type, data } => DocumentSource::Base64 { media_type, data },
        ImageSource::Url { url } => DocumentSource::Url { url },
    };
    Ok(Block::Document {
        source,
        name: file.filename.clone(),
        cache: None,
    })
}

/// A `data:<type>;base64,<data>` URL inline, any other URL by reference.
fn image_source(url: &str, i: usize) -> Result<ImageSource, GatewayError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(ImageSource::Url { url: url.into() });
    };
    let (media_type, data) = rest.split_once(";base64,").ok_or_else(|| {
        GatewayError::BadBody(format!("messages[{i}]: a data URL must be base64"))
    })?;
    Ok(ImageSource::Base64 {
        media_type: media_type.into(),
        data: data.into(),
    })
}

/// `POST /v1/embeddings`'s body.
#[derive(Debug, Deserialize)]
pub(crate) struct EmbeddingsRequest {
    pub(crate) model: String,
    input: EmbeddingsInput,
    #[serde(default)]
    pub(crate) encoding_format: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum EmbeddingsInput {
    One(String),
    Many(Vec<String>),
}

impl EmbeddingsRequest {
    /// The texts to embed (token-id inputs are not accepted: tollgate embeds text).
    pub(crate) fn texts(&self) -> Result<Vec<String>, GatewayError> {
        let texts = match &self.input {
            EmbeddingsInput::One(t) => vec![t.clone()],
            EmbeddingsInput::Many(all) => all.clone(),
        };
        if texts.is_empty() || texts.iter().any(String::is_empty) {
            return Err(GatewayError::BadBody(
                "`input` must be a non-empty string or array of non-empty strings".into(),
            ));
        }
        Ok(texts)
    }

    /// Whether vectors are sent as base64 (little-endian f32), as OpenAI's SDKs ask.
    pub(crate) fn base64(&self) -> Result<bool, GatewayError> {
        match self.encoding_format.as_deref() {
            None | Some("float") => Ok(false),
            Some("base64") => Ok(true),
            Some(other) => Err(GatewayError::BadBody(format!(
                "`encoding_format` `{other}` is not float or base64"
            ))),
        }
    }
}

impl crate::auth::ForModel for ChatRequest {
    type Error = crate::failure::OpenAiError;

    fn model(&self) -> &str {
        &self.model
    }
}

impl crate::auth::ForModel for EmbeddingsRequest {
    type Error = crate::failure::OpenAiError;

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
