//! Anthropic messages requests, decoded into tollgate's neutral [`LlmRequest`]. Fields
//! tollgate has no place for (`metadata`, `tool_choice`, `top_k`, `thinking`, …) are
//! accepted and ignored.

use serde::Deserialize;
use serde_json::Value;
use tollgate::{
    Block, CacheMark, ImageSource, Json, LlmRequest, Message, ResponseShape, Role, SamplingParams,
    ToolDefinition,
};

use crate::error::GatewayError;

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
    pub(crate) stream: bool,
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
    Blocks(Vec<InBlock>),
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
    input_schema: Value,
}

#[derive(Debug, Deserialize)]
struct OutputConfig {
    #[serde(default)]
    format: Option<OutputFormat>,
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

fn blocks(content: &Content) -> Vec<Block> {
    match content {
        Content::Text(text) => vec![Block::text(text.clone())],
        Content::Blocks(all) => all.iter().map(block).collect(),
    }
}

fn block(b: &InBlock) -> Block {
    match b {
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
            content: content.as_ref().map(blocks).unwrap_or_default(),
            is_error: *is_error,
            cache: cache(cache_control.as_ref()),
        },
        InBlock::Thinking {
            thinking,
            signature,
        } => Block::Thinking {
            text: thinking.clone(),
            signature: signature.clone(),
            cache: None,
        },
    }
}

impl MessagesRequest {
    /// The neutral request for catalog model `self.model`.
    pub(crate) fn to_llm_request(&self) -> Result<LlmRequest, GatewayError> {
        // As the provider's own API would: a cut-off answer comes back as it is
        // (`length` / `max_tokens`) after one send, never re-run at the model's ceiling.
        let mut params = SamplingParams::new().with_truncated_answers();
        if let Some(t) = self.temperature {
            params = params.with_temperature(t)?;
        }
        if let Some(p) = self.top_p {
            params = params.with_top_p(p)?;
        }
        if let Some(max) = self.max_tokens {
            params = params.with_max_output_tokens(max)?;
        }
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
            params = params.with_response_shape(ResponseShape {
                name: "response".into(),
                schema: Json::new(schema),
            });
        }
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        if let Some(system) = &self.system {
            messages.push(Message {
                role: Role::System,
                content: blocks(system),
            });
        }
        for (i, m) in self.messages.iter().enumerate() {
            let role = match m.role.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(GatewayError::BadBody(format!(
                        "messages[{i}].role `{other}` is not user or assistant"
                    )));
                }
            };
            messages.push(Message {
                role,
                content: blocks(&m.content),
            });
        }
        let tools = self
            .tools
            .iter()
            .map(|t| ToolDefinition {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: Json::new(t.input_schema.clone()),
            })
            .collect();
        Ok(LlmRequest::new(
            self.model.clone(),
            messages,
            tools,
            params,
        )?)
    }
}

impl crate::auth::ForModel for MessagesRequest {
    fn model(&self) -> &str {
        &self.model
    }
}
