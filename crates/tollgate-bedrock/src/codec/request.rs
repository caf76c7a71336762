//! Request encoding: an [`LlmRequest`] as the SDK's Converse input ([`encode`]).

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, CacheTtl, ContentBlock, ConversationRole, ImageBlock,
    ImageFormat, ImageSource as WireImage, InferenceConfiguration, JsonSchemaDefinition,
    Message as WireMessage, OutputConfig, OutputFormat, OutputFormatStructure, OutputFormatType,
    ReasoningContentBlock, ReasoningTextBlock, SystemContentBlock, Tool, ToolConfiguration,
    ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolResultStatus, ToolSpecification,
    ToolUseBlock,
};
use tollgate::{Block, CacheMark, Error, ImageSource, LlmRequest, Result, Role};

use super::document::to_document;

/// What a Converse call sends besides the model id.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    pub(crate) messages: Vec<WireMessage>,
    pub(crate) system: Vec<SystemContentBlock>,
    pub(crate) tools: Option<ToolConfiguration>,
    pub(crate) inference: Option<InferenceConfiguration>,
    pub(crate) output: Option<OutputConfig>,
}

fn built<T>(
    field: &str,
    r: std::result::Result<T, aws_smithy_types::error::operation::BuildError>,
) -> Result<T> {
    r.map_err(|e| Error::invalid_request(field, format!("could not be encoded for Converse: {e}")))
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
        return Err(Error::invalid_request(
            field,
            "is an image by URL; Converse takes image bytes only: send base64 data",
        ));
    };
    let format = match media_type.as_str() {
        "image/png" => ImageFormat::Png,
        "image/jpeg" | "image/jpg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::Webp,
        other => {
            return Err(Error::invalid_request(
                field,
                format!("has media type `{other}`; Converse takes png, jpeg, gif or webp"),
            ));
        }
    };
    let bytes = aws_smithy_types::base64::decode(data)
        .map_err(|_| Error::invalid_request(field, "is not valid base64 image data"))?;
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
                        return Err(Error::invalid_request(
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
            ..
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
        Block::RedactedThinking { .. } | Block::Document { .. } | Block::Native { .. } => {
            return Err(Error::invalid_request(
                field,
                "this block is not yet written for Bedrock Converse",
            ));
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
                return Err(Error::invalid_request(
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
    // Converse has a leading `system` only: later system messages are folded into the
    // user turns in place.
    for (i, message) in tollgate::provider::folded_turns(request).iter().enumerate() {
        let role = match message.role {
            Role::Assistant => ConversationRole::Assistant,
            Role::User | Role::System => ConversationRole::User,
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
