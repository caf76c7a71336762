//! Anthropic messages requests, decoded into tollgate's neutral [`LlmRequest`]:
//! `tool_choice` (with `disable_parallel_tool_use`), `thinking`, `output_config.effort`,
//! `system` messages at any position, `redacted_thinking` and `document` blocks, and
//! server tools (with their result blocks) are carried to the provider, or refused there
//! by type. Fields that tune only Anthropic's service (`metadata`, `top_k`, …) are
//! accepted and ignored.

use serde::Deserialize;
use serde_json::Value;
use tollgate::{
    Block, CacheMark, DocumentSource, ImageSource, Json, LlmRequest, Message, NativeTool,
    Reasoning, ReasoningEffort, ReasoningSummary, ResponseShape, Role, SamplingParams, Thinking,
    ToolChoice, ToolDefinition,
};

use crate::error::GatewayError;
use crate::params::client_params;

/// `POST /v1/messages`'s body, as far as the gateway reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct MessagesRequest {
    pub(crate) model: String,
    messages: Vec<InMessage>,
    #[serde(default)]
    system: Option<Content>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    tools: Vec<Tool>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    #[serde(default)]
    output_config: Option<OutputConfig>,
    #[serde(default)]
    tool_choice: Option<InToolChoice>,
    #[serde(default)]
    thinking: Option<InThinking>,
    #[serde(default)]
    pub(crate) stream: bool,
}

#[derive(Debug, Deserialize)]
struct InToolChoice {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    disable_parallel_tool_use: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct InThinking {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    budget_tokens: Option<u64>,
    #[serde(default)]
    display: Option<String>,
}

#[derive(Debug, Deserialize)]
struct InMessage {
    role: String,
    content: Content,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Debug, Deserialize)]
struct CacheControl {
    #[serde(default)]
    ttl: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InBlock {
    Text {
        text: String,
        #[serde(default)]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: InImageSource,
        #[serde(default)]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
        #[serde(default)]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        is_error: bool,
        #[serde(default)]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    Document {
        source: InDocumentSource,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        cache_control: Option<CacheControl>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InDocumentSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
    Text { data: String },
}

/// The block types decoded into neutral blocks; server tools' blocks pass as they are.
const KNOWN_BLOCKS: &[&str] = &[
    "text",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "document",
];

/// Server tools' call and result blocks, kept whole for `anthropic` models.
fn is_server_block(kind: &str) -> bool {
    kind == "server_tool_use" || kind.ends_with("_tool_result")
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InImageSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

#[derive(Debug, Deserialize)]
struct Tool {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    strict: Option<bool>,
    /// The rest of a server tool's definition (`max_uses`, `allowed_domains`, …).
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

impl Tool {
    /// The tool as the client wrote it.
    fn raw(&self) -> Value {
        let mut out = self.rest.clone();
        out.insert("name".into(), Value::from(self.name.clone()));
        if let Some(kind) = &self.kind {
            out.insert("type".into(), Value::from(kind.clone()));
        }
        if let Some(strict) = self.strict {
            out.insert("strict".into(), Value::from(strict));
        }
        Value::Object(out)
    }
}

#[derive(Debug, Deserialize)]
struct OutputConfig {
    #[serde(default)]
    format: Option<OutputFormat>,
    #[serde(default)]
    effort: Option<String>,
}

#[derive(Debug, Deserialize)]
struct OutputFormat {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    schema: Option<Value>,
}

fn cache(control: Option<&CacheControl>) -> Option<CacheMark> {
    control.map(|c| match c.ttl.as_deref() {
        Some("1h") => CacheMark::OneHour,
        _ => CacheMark::FiveMinutes,
    })
}

fn blocks(content: &Content, field: &str) -> Result<Vec<Block>, GatewayError> {
    match content {
        Content::Text(text) => Ok(vec![Block::text(text.clone())]),
        Content::Blocks(all) => all
            .iter()
            .enumerate()
            .map(|(j, value)| decode_block(value, &format!("{field}[{j}]")))
            .collect(),
    }
}

/// One content block: a known type decoded (a bad one named with its field), a server
/// tool's block kept whole, anything else refused naming the accepted types.
fn decode_block(value: &Value, field: &str) -> Result<Block, GatewayError> {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    if is_server_block(kind) {
        return Ok(Block::Native {
            provider: "anthropic".into(),
            value: Json::new(value.clone()),
        });
    }
    if !KNOWN_BLOCKS.contains(&kind) {
        return Err(GatewayError::BadBody(format!(
            "{field}.type `{kind}` is not one of {}, server_tool_use or a server tool's result",
            KNOWN_BLOCKS.join(", ")
        )));
    }
    let parsed: InBlock = serde_json::from_value(value.clone()).map_err(|e| {
        GatewayError::BadBody(format!("{field} is not a valid `{kind}` block: {e}"))
    })?;
    block(&parsed, field)
}

fn block(b: &InBlock, field: &str) -> Result<Block, GatewayError> {
    Ok(match b {
        InBlock::Text {
            text,
            cache_control,
        } => Block::Text {
            text: text.clone(),
            cache: cache(cache_control.as_ref()),
        },
        InBlock::Image {
            source,
            cache_control,
        } => Block::Image {
            source: match source {
                InImageSource::Base64 { media_type, data } => ImageSource::Base64 {
                    media_type: media_type.clone(),
                    data: data.clone(),
                },
                InImageSource::Url { url } => ImageSource::Url { url: url.clone() },
            },
            cache: cache(cache_control.as_ref()),
        },
        InBlock::ToolUse {
            id,
            name,
            input,
            cache_control,
        } => Block::ToolUse {
            id: id.clone(),
            name: name.clone(),
            input: Json::new(input.clone()),
            cache: cache(cache_control.as_ref()),
        },
        InBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            cache_control,
        } => Block::ToolResult {
            tool_use_id: tool_use_id.clone(),
            content: match content {
                Some(c) => blocks(c, &format!("{field}.content"))?,
                None => Vec::new(),
            },
            is_error: *is_error,
            cache: cache(cache_control.as_ref()),
        },
        InBlock::Thinking {
            thinking,
            signature,
        } => Block::Thinking {
            text: thinking.clone(),
            signature: signature.clone(),
            origin: None,
            cache: None,
        },
        InBlock::RedactedThinking { data } => Block::RedactedThinking {
            data: data.clone(),
            origin: None,
        },
        InBlock::Document {
            source,
            title,
            cache_control,
        } => Block::Document {
            source: match source {
                InDocumentSource::Base64 { media_type, data } => DocumentSource::Base64 {
                    media_type: media_type.clone(),
                    data: data.clone(),
                },
                InDocumentSource::Url { url } => DocumentSource::Url { url: url.clone() },
                InDocumentSource::Text { data } => DocumentSource::Text { text: data.clone() },
            },
            name: title.clone(),
            cache: cache(cache_control.as_ref()),
        },
    })
}

/// Anthropic's `tool_choice`: `auto`, `any`, `tool` (with `name`) or `none`, and
/// `disable_parallel_tool_use`.
fn apply_tool_choice(
    choice: &InToolChoice,
    params: SamplingParams,
) -> Result<SamplingParams, GatewayError> {
    let neutral = match (choice.kind.as_str(), &choice.name) {
        ("auto", _) => ToolChoice::Auto,
        ("any", _) => ToolChoice::Required,
        ("none", _) => ToolChoice::None,
        ("tool", Some(name)) => ToolChoice::Tool(name.clone()),
        ("tool", None) => {
            return Err(GatewayError::BadBody(
                "tool_choice of type `tool` needs `name`".into(),
            ));
        }
        (other, _) => {
            return Err(GatewayError::BadBody(format!(
                "tool_choice.type `{other}` is not one of auto, any, tool, none"
            )));
        }
    };
    let mut params = params.with_tool_choice(neutral);
    if let Some(disable) = choice.disable_parallel_tool_use {
        params = params.with_parallel_tool_calls(!disable);
    }
    Ok(params)
}

/// `thinking` and `output_config.effort` as neutral reasoning.
fn reasoning(
    thinking: Option<&InThinking>,
    effort: Option<&str>,
) -> Result<Reasoning, GatewayError> {
    let mut out = Reasoning::default();
    if let Some(t) = thinking {
        out.thinking = Some(match (t.kind.as_str(), t.budget_tokens) {
            ("enabled", Some(tokens)) => Thinking::Budget { tokens },
            ("enabled", None) => {
                return Err(GatewayError::BadBody(
                    "thinking of type `enabled` needs `budget_tokens`".into(),
                ));
            }
            ("adaptive", _) => Thinking::Adaptive,
            ("disabled", _) => Thinking::Off,
            (other, _) => {
                return Err(GatewayError::BadBody(format!(
                    "thinking.type `{other}` is not one of enabled, adaptive, disabled"
                )));
            }
        });
        out.summary = match t.display.as_deref() {
            None => None,
            Some("summarized") => Some(ReasoningSummary::Auto),
            Some("omitted") => Some(ReasoningSummary::Omitted),
            Some(other) => {
                return Err(GatewayError::BadBody(format!(
                    "thinking.display `{other}` is not one of summarized, omitted"
                )));
            }
        };
    }
    if let Some(effort) = effort {
        out.effort = Some(ReasoningEffort::parse(effort).ok_or_else(|| {
            GatewayError::BadBody(format!(
                "output_config.effort `{effort}` is not one of low, medium, high, xhigh, max"
            ))
        })?);
    }
    Ok(out)
}

impl MessagesRequest {
    /// The neutral request for catalog model `self.model`.
    pub(crate) fn to_llm_request(&self) -> Result<LlmRequest, GatewayError> {
        let mut params = client_params(self.temperature, self.top_p, self.max_tokens)?;
        for s in &self.stop_sequences {
            params = params.with_stop(s.clone());
        }
        if let Some(format) = self.output_config.as_ref().and_then(|o| o.format.as_ref()) {
            if format.kind != "json_schema" {
                return Err(GatewayError::BadBody(format!(
                    "output_config.format.type `{}` is not json_schema",
                    format.kind
                )));
            }
            let schema = format.schema.clone().ok_or_else(|| {
                GatewayError::BadBody("output_config.format.schema is required".into())
            })?;
            // Anthropic constrains output to the schema whenever one is given.
            params = params.with_response_shape(ResponseShape::new("response", Json::new(schema)));
        }
        if let Some(choice) = &self.tool_choice {
            params = apply_tool_choice(choice, params)?;
        }
        let effort = self
            .output_config
            .as_ref()
            .and_then(|o| o.effort.as_deref());
        let reasoning = reasoning(self.thinking.as_ref(), effort)?;
        if !reasoning.is_empty() {
            params = params.with_reasoning(reasoning)?;
        }
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = &self.system {
            messages.push(Message {
                role: Role::System,
                content: blocks(system, "system")?,
            });
        }
        for (i, m) in self.messages.iter().enumerate() {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                // Mid-conversation system messages (Claude Code sends one at `messages[1]`).
                "system" => Role::System,
                other => {
                    return Err(GatewayError::BadBody(format!(
                        "messages[{i}].role `{other}` is not one of user, assistant, system"
                    )));
                }
            };
            messages.push(Message {
                role,
                content: blocks(&m.content, &format!("messages[{i}].content"))?,
            });
        }
        let tools = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| tool(t, i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LlmRequest::new(
            self.model.clone(),
            messages,
            tools,
            params,
        )?)
    }
}

/// A client tool, or a server tool (a dated `type` and no `input_schema`) kept as
/// Anthropic defines it.
fn tool(t: &Tool, i: usize) -> Result<ToolDefinition, GatewayError> {
    match (t.kind.as_deref(), &t.input_schema) {
        (None | Some("custom"), Some(schema)) => {
            let mut tool = ToolDefinition::new(
                t.name.clone(),
                t.description.clone(),
                Json::new(schema.clone()),
            )
            .with_strict(t.strict)
            .with_defer_loading(t.rest.get("defer_loading") == Some(&Value::Bool(true)));
            // The client's cache breakpoint after the tool, carried to the provider.
            if let Some(control) = t.rest.get("cache_control") {
                let control: CacheControl = serde_json::from_value(control.clone())
                    .map_err(|e| GatewayError::BadBody(format!("tools[{i}].cache_control: {e}")))?;
                if let Some(mark) = cache(Some(&control)) {
                    tool = tool.with_cache(mark);
                }
            }
            Ok(tool)
        }
        (None | Some("custom"), None) => Err(GatewayError::BadBody(format!(
            "tools[{i}] (`{}`) needs `input_schema`, or a server tool's `type`",
            t.name
        ))),
        (Some(_), _) => {
            let definition = t.raw();
            Ok(ToolDefinition {
                native: Some(NativeTool {
                    provider: "anthropic".into(),
                    definition: Json::new(definition),
                }),
                ..ToolDefinition::new(
                    t.name.clone(),
                    t.description.clone(),
                    Json::new(serde_json::json!({})),
                )
            })
        }
    }
}

impl crate::auth::ForModel for MessagesRequest {
    type Error = crate::failure::AnthropicError;

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
