//! `bedrock-converse` encoding and decoding between tollgate's neutral types and the
//! SDK's Converse types.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, CacheTtl, ContentBlock, ContentBlockDelta, ContentBlockStart,
    ConversationRole, ConverseStreamOutput, ImageBlock, ImageFormat, ImageSource as WireImage,
    InferenceConfiguration, JsonSchemaDefinition, Message as WireMessage, OutputConfig,
    OutputFormat, OutputFormatStructure, OutputFormatType, ReasoningContentBlock,
    ReasoningContentBlockDelta, ReasoningTextBlock, StopReason as WireStop, SystemContentBlock,
    TokenUsage, Tool, ToolConfiguration, ToolInputSchema, ToolResultBlock, ToolResultContentBlock,
    ToolResultStatus, ToolSpecification, ToolUseBlock,
};
use aws_smithy_types::{Document, Number};
use serde_json::Value;
use tollgate::wire::EventDecoder;
use tollgate::{
    Block, CacheMark, Error, ImageSource, Json, LlmRequest, LlmResponse, ResponseBody, Result,
    Role, StopReason, StreamEvent, Usage,
};

/// What a Converse call sends besides the model id.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    pub(crate) messages: Vec<WireMessage>,
    pub(crate) system: Vec<SystemContentBlock>,
    pub(crate) tools: Option<ToolConfiguration>,
    pub(crate) inference: Option<InferenceConfiguration>,
    pub(crate) output: Option<OutputConfig>,
}

fn invalid(field: String, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        field,
        reason: reason.into(),
    }
}

fn built<T>(
    field: &str,
    r: std::result::Result<T, aws_smithy_types::error::operation::BuildError>,
) -> Result<T> {
    r.map_err(|e| {
        invalid(
            field.to_owned(),
            format!("could not be encoded for Converse: {e}"),
        )
    })
}

/// A JSON value as a Smithy document.
pub(crate) fn to_document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(0.0))
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_document(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// A Smithy document as a JSON value.
pub(crate) fn to_json(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => Value::from(*f),
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Document::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

fn cache_point(mark: CacheMark, field: &str) -> Result<CachePointBlock> {
    let ttl = match mark {
        CacheMark::FiveMinutes => CacheTtl::FiveMinutes,
        CacheMark::OneHour => CacheTtl::OneHour,
    };
    built(
        field,
        CachePointBlock::builder()
            .r#type(CachePointType::Default)
            .ttl(ttl)
            .build(),
    )
}

fn image(source: &ImageSource, field: &str) -> Result<ImageBlock> {
    let ImageSource::Base64 { media_type, data } = source else {
        return Err(invalid(
            field.to_owned(),
            "is an image by URL; Converse takes image bytes only: send base64 data",
        ));
    };
    let format = match media_type.as_str() {
        "image/png" => ImageFormat::Png,
        "image/jpeg" | "image/jpg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::Webp,
        other => {
            return Err(invalid(
                field.to_owned(),
                format!("has media type `{other}`; Converse takes png, jpeg, gif or webp"),
            ));
        }
    };
    let bytes = aws_smithy_types::base64::decode(data)
        .map_err(|_| invalid(field.to_owned(), "is not valid base64 image data"))?;
    built(
        field,
        ImageBlock::builder()
            .format(format)
            .source(WireImage::Bytes(Blob::new(bytes)))
            .build(),
    )
}

/// Encodes one block; a cache mark adds a `cachePoint` block after it.
fn encode_block(block: &Block, field: &str, out: &mut Vec<ContentBlock>) -> Result<()> {
    let cache = match block {
        Block::Text { text, cache } => {
            out.push(ContentBlock::Text(text.clone()));
            *cache
        }
        Block::Image { source, cache } => {
            out.push(ContentBlock::Image(image(source, field)?));
            *cache
        }
        Block::ToolUse {
            id,
            name,
            input,
            cache,
        } => {
            out.push(ContentBlock::ToolUse(built(
                field,
                ToolUseBlock::builder()
                    .tool_use_id(id)
                    .name(name)
                    .input(to_document(input.value()))
                    .build(),
            )?));
            *cache
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
            cache,
        } => {
            let mut inner = Vec::with_capacity(content.len());
            for (k, b) in content.iter().enumerate() {
                let field = format!("{field}.content[{k}]");
                inner.push(match b {
                    Block::Text { text, .. } => ToolResultContentBlock::Text(text.clone()),
                    Block::Image { source, .. } => {
                        ToolResultContentBlock::Image(image(source, &field)?)
                    }
                    _ => {
                        return Err(invalid(
                            field,
                            "must be text or an image inside a tool result",
                        ));
                    }
                });
            }
            out.push(ContentBlock::ToolResult(built(
                field,
                ToolResultBlock::builder()
                    .tool_use_id(tool_use_id)
                    .set_content(Some(inner))
                    .status(if *is_error {
                        ToolResultStatus::Error
                    } else {
                        ToolResultStatus::Success
                    })
                    .build(),
            )?));
            *cache
        }
        Block::Thinking {
            text,
            signature,
            cache,
        } => {
            out.push(ContentBlock::ReasoningContent(
                ReasoningContentBlock::ReasoningText(built(
                    field,
                    ReasoningTextBlock::builder()
                        .text(text)
                        .set_signature(signature.clone())
                        .build(),
                )?),
            ));
            *cache
        }
    };
    if let Some(mark) = cache {
        out.push(ContentBlock::CachePoint(cache_point(mark, field)?));
    }
    Ok(())
}

/// Encodes `request`; `default_max_tokens` is used when the request sets no limit.
pub(crate) fn encode(request: &LlmRequest, default_max_tokens: u64) -> Result<Encoded> {
    let mut encoded = Encoded::default();
    for (i, message) in request.system().enumerate() {
        for (j, block) in message.content.iter().enumerate() {
            let field = format!("messages[{i}].content[{j}]");
            let Block::Text { text, cache } = block else {
                return Err(invalid(
                    field,
                    "must be text: a Converse system prompt holds text",
                ));
            };
            encoded.system.push(SystemContentBlock::Text(text.clone()));
            if let Some(mark) = cache {
                encoded
                    .system
                    .push(SystemContentBlock::CachePoint(cache_point(*mark, &field)?));
            }
        }
    }
    let offset = request.system().count();
    for (i, message) in request.turns().iter().enumerate() {
        let role = match message.role {
            Role::Assistant => ConversationRole::Assistant,
            _ => ConversationRole::User,
        };
        let mut content = Vec::with_capacity(message.content.len());
        for (j, block) in message.content.iter().enumerate() {
            encode_block(
                block,
                &format!("messages[{}].content[{j}]", i + offset),
                &mut content,
            )?;
        }
        encoded.messages.push(built(
            "messages",
            WireMessage::builder()
                .role(role)
                .set_content(Some(content))
                .build(),
        )?);
    }
    if !request.tools_schema().is_empty() {
        let mut tools = Vec::new();
        for t in request.tools_schema() {
            tools.push(Tool::ToolSpec(built(
                "tools",
                ToolSpecification::builder()
                    .name(&t.name)
                    .description(&t.description)
                    .input_schema(ToolInputSchema::Json(to_document(t.input_schema.value())))
                    .build(),
            )?));
        }
        encoded.tools = Some(built(
            "tools",
            ToolConfiguration::builder().set_tools(Some(tools)).build(),
        )?);
    }
    let sampling = request.sampling_params();
    let max_tokens = sampling.max_output_tokens().unwrap_or(default_max_tokens);
    let mut inference =
        InferenceConfiguration::builder().max_tokens(i32::try_from(max_tokens).unwrap_or(i32::MAX));
    if let Some(t) = sampling.temperature() {
        inference = inference.temperature(t as f32);
    }
    if let Some(p) = sampling.top_p() {
        inference = inference.top_p(p as f32);
    }
    if !sampling.stop().is_empty() {
        inference = inference.set_stop_sequences(Some(sampling.stop().to_vec()));
    }
    encoded.inference = Some(inference.build());
    if let Some(shape) = sampling.response_shape() {
        // Converse takes the schema as a JSON *string*.
        let definition = built(
            "sampling_params.response_shape",
            JsonSchemaDefinition::builder()
                .schema(shape.schema.value().to_string())
                .name(&shape.name)
                .build(),
        )?;
        let format = built(
            "sampling_params.response_shape",
            OutputFormat::builder()
                .r#type(OutputFormatType::JsonSchema)
                .structure(OutputFormatStructure::JsonSchema(definition))
                .build(),
        )?;
        encoded.output = Some(OutputConfig::builder().text_format(format).build());
    }
    Ok(encoded)
}

/// An answer that does not decode: retryable (`ProviderError::Malformed`). The SDK
/// has parsed the wire already, so there are no raw bytes to keep.
fn malformed(what: impl Into<String>) -> Error {
    tollgate::wire::malformed(format!("Bedrock: {}", what.into()), b"")
}

/// The refusal category of a content-filter stop: `guardrail_intervened` (a guardrail
/// stopped the answer) or `content_filtered` (the model's own filter); `None` for
/// every other stop.
pub(crate) fn filter_category(wire: &WireStop) -> Option<&'static str> {
    match wire {
        WireStop::GuardrailIntervened => Some("guardrail_intervened"),
        WireStop::ContentFiltered => Some("content_filtered"),
        _ => None,
    }
}

fn text_of(content: &[Block]) -> String {
    content.iter().filter_map(Block::as_text).collect()
}

/// Maps a Converse stop reason. `guardrail_intervened` and `content_filtered` are content
/// filters; `model_context_window_exceeded` is an overflow (the window is full), not a
/// truncation;
/// malformed model output is an error.
pub(crate) fn stop_reason(wire: &WireStop) -> Result<StopReason> {
    Ok(match wire {
        WireStop::EndTurn => StopReason::EndTurn,
        WireStop::ToolUse => StopReason::ToolUse,
        WireStop::MaxTokens => StopReason::MaxTokens,
        WireStop::ModelContextWindowExceeded => StopReason::ContextWindowExceeded,
        WireStop::StopSequence => StopReason::StopSequence,
        WireStop::GuardrailIntervened | WireStop::ContentFiltered => StopReason::ContentFilter,
        other => return Err(malformed(format!("stop reason `{}`", other.as_str()))),
    })
}

fn count(n: Option<i32>) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

/// Converse usage in tollgate's convention: `inputTokens` excludes cache reads and
/// writes; writes are split by TTL where `cacheDetails` gives it.
pub(crate) fn usage(wire: Option<&TokenUsage>) -> Usage {
    let Some(u) = wire else {
        return Usage::default();
    };
    let writes = count(u.cache_write_input_tokens());
    let hour: u64 = u
        .cache_details()
        .iter()
        .filter(|d| matches!(d.ttl(), CacheTtl::OneHour))
        .map(|d| count(Some(d.input_tokens())))
        .sum();
    Usage::from_cache_exclusive(
        count(Some(u.input_tokens())),
        count(u.cache_read_input_tokens()),
        writes.saturating_sub(hour),
        hour.min(writes),
        count(Some(u.output_tokens())),
    )
}

fn decode_block(block: &ContentBlock) -> Result<Option<Block>> {
    Ok(Some(match block {
        ContentBlock::Text(text) => Block::Text {
            text: text.clone(),
            cache: None,
        },
        ContentBlock::ToolUse(t) => Block::ToolUse {
            id: t.tool_use_id().to_owned(),
            name: t.name().to_owned(),
            input: Json::new(to_json(t.input())),
            cache: None,
        },
        ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(r)) => {
            Block::Thinking {
                text: r.text().to_owned(),
                signature: r.signature().map(str::to_owned),
                cache: None,
            }
        }
        // Kinds tollgate has no neutral form for (citations, redacted reasoning, …).
        _ => return Ok(None),
    }))
}

/// Decodes a Converse answer. A content-filter stop is a refusal
/// ([`filter_category`]) with the usage Bedrock billed.
pub(crate) fn decode(
    model: &str,
    message: Option<&WireMessage>,
    stop: &WireStop,
    wire_usage: Option<&TokenUsage>,
) -> Result<LlmResponse> {
    let message = message.ok_or_else(|| malformed("no output message"))?;
    let mut content = Vec::new();
    for block in message.content() {
        content.extend(decode_block(block)?);
    }
    if let Some(category) = filter_category(stop) {
        return Err(Error::refusal(
            category,
            text_of(&content),
            usage(wire_usage),
        ));
    }
    LlmResponse::new(ResponseBody {
        model: model.to_owned(),
        content,
        stop_reason: stop_reason(stop)?,
        usage: usage(wire_usage),
    })
}

#[derive(Debug)]
enum Building {
    Text(String),
    Thinking(String, Option<String>),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
}

/// Turns ConverseStream events into [`StreamEvent`]s and, at `metadata` (the last event,
/// with usage), the whole answer.
#[derive(Debug, Default)]
pub(crate) struct ConverseStreamDecoder {
    model: String,
    blocks: BTreeMap<i32, Building>,
    stop: Option<StopReason>,
    /// Set by a content-filter stop: the answer ends as a refusal at `metadata`.
    filter: Option<&'static str>,
    finished: bool,
}

impl ConverseStreamDecoder {
    pub(crate) fn new(model: &str) -> Self {
        ConverseStreamDecoder {
            model: model.to_owned(),
            ..Self::default()
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    pub(crate) fn event(&mut self, event: &ConverseStreamOutput) -> Result<Vec<StreamEvent>> {
        let mut out = Vec::new();
        match event {
            ConverseStreamOutput::ContentBlockStart(start) => {
                if let Some(ContentBlockStart::ToolUse(t)) = start.start() {
                    let index = start.content_block_index();
                    self.blocks.insert(
                        index,
                        Building::ToolUse {
                            id: t.tool_use_id().to_owned(),
                            name: t.name().to_owned(),
                            json: String::new(),
                        },
                    );
                    out.push(StreamEvent::ToolUseDelta {
                        index: usize::try_from(index).unwrap_or(0),
                        id: Some(t.tool_use_id().to_owned()),
                        name: Some(t.name().to_owned()),
                        input_json: String::new(),
                    });
                }
            }
            ConverseStreamOutput::ContentBlockDelta(delta) => {
                let index = delta.content_block_index();
                let position = usize::try_from(index).unwrap_or(0);
                match delta.delta() {
                    Some(ContentBlockDelta::Text(text)) => {
                        match self
                            .blocks
                            .entry(index)
                            .or_insert_with(|| Building::Text(String::new()))
                        {
                            Building::Text(t) => t.push_str(text),
                            _ => return Err(malformed("text delta for a non-text block")),
                        }
                        out.push(StreamEvent::TextDelta {
                            index: position,
                            text: text.clone(),
                        });
                    }
                    Some(ContentBlockDelta::ToolUse(t)) => {
                        match self.blocks.get_mut(&index) {
                            Some(Building::ToolUse { json, .. }) => json.push_str(t.input()),
                            _ => return Err(malformed("tool input before the tool use started")),
                        }
                        out.push(StreamEvent::ToolUseDelta {
                            index: position,
                            id: None,
                            name: None,
                            input_json: t.input().to_owned(),
                        });
                    }
                    Some(ContentBlockDelta::ReasoningContent(r)) => {
                        let entry = self
                            .blocks
                            .entry(index)
                            .or_insert_with(|| Building::Thinking(String::new(), None));
                        let Building::Thinking(text, signature) = entry else {
                            return Err(malformed("reasoning delta for another block"));
                        };
                        match r {
                            ReasoningContentBlockDelta::Text(t) => {
                                text.push_str(t);
                                out.push(StreamEvent::ThinkingDelta {
                                    index: position,
                                    text: t.clone(),
                                });
                            }
                            ReasoningContentBlockDelta::Signature(s) => {
                                *signature = Some(s.clone());
                            }
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            ConverseStreamOutput::MessageStop(stop) => {
                let reason = stop_reason(stop.stop_reason())?;
                self.stop = Some(reason);
                self.filter = filter_category(stop.stop_reason());
                // A filter's stop ends the stream as a refusal, at `metadata` (its usage).
                if self.filter.is_none() {
                    out.push(StreamEvent::Stop(reason));
                }
            }
            ConverseStreamOutput::Metadata(meta) => {
                let usage = usage(meta.usage());
                let stop = self
                    .stop
                    .ok_or_else(|| malformed("metadata before messageStop"))?;
                let mut content = Vec::new();
                for (_, building) in std::mem::take(&mut self.blocks) {
                    content.push(match building {
                        Building::Text(text) => Block::Text { text, cache: None },
                        Building::Thinking(text, signature) => Block::Thinking {
                            text,
                            signature,
                            cache: None,
                        },
                        Building::ToolUse { id, name, json } => {
                            let input: Value = if json.trim().is_empty() {
                                Value::Object(serde_json::Map::new())
                            } else {
                                serde_json::from_str(&json)
                                    .map_err(|e| malformed(format!("tool input JSON: {e}")))?
                            };
                            Block::ToolUse {
                                id,
                                name,
                                input: Json::new(input),
                                cache: None,
                            }
                        }
                    });
                }
                if let Some(category) = self.filter {
                    self.finished = true;
                    return Err(Error::refusal(category, text_of(&content), usage));
                }
                out.push(StreamEvent::Usage(usage));
                out.push(StreamEvent::Completed(LlmResponse::new(ResponseBody {
                    model: self.model.clone(),
                    content,
                    stop_reason: stop,
                    usage,
                })?));
                self.finished = true;
            }
            _ => {}
        }
        Ok(out)
    }
}

impl EventDecoder<ConverseStreamOutput> for ConverseStreamDecoder {
    fn event(&mut self, event: ConverseStreamOutput) -> Result<Vec<StreamEvent>> {
        ConverseStreamDecoder::event(self, &event)
    }

    fn is_finished(&self) -> bool {
        ConverseStreamDecoder::is_finished(self)
    }
}
