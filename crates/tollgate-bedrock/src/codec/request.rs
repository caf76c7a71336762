//! Request encoding: an [`LlmRequest`] as the SDK's Converse input ([`encode`]); the
//! settings beyond sampling are written by [`super::settings`].
//!
//! Documents go as `document` blocks: PDF, Word, Excel, CSV, HTML, Markdown or plain text
//! by bytes, plain text as `source.text`; a document by URL is refused (Converse reads
//! bytes or S3 locations only). Their `name` is required and may hold only letters,
//! digits, single spaces, hyphens, parentheses and square brackets: other characters
//! become hyphens, an empty or missing name is `document-N`, and a repeated name gets a
//! ` (K)` suffix. Thinking and redacted thinking go back only when signed by `bedrock`
//! (or of unknown origin); thinking signed by another provider is left out.

use std::collections::HashSet;

use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, CacheTtl, ContentBlock, ConversationRole, DocumentBlock,
    DocumentFormat, DocumentSource as WireDocument, ImageBlock, ImageFormat,
    ImageSource as WireImage, InferenceConfiguration, JsonSchemaDefinition, Message as WireMessage,
    OutputConfig, OutputFormat, OutputFormatStructure, OutputFormatType, ReasoningContentBlock,
    ReasoningTextBlock, SystemContentBlock, Tool, ToolConfiguration, ToolInputSchema,
    ToolResultBlock, ToolResultContentBlock, ToolResultStatus, ToolSpecification, ToolUseBlock,
};
use aws_smithy_types::Document;
use tollgate::provider::refuse_unwritten;
use tollgate::provider::{
    Block, CacheMark, DocumentSource, Error, ImageSource, LlmRequest, Result, Role,
};

use super::document::to_document;
use super::settings::{self, Choice, WRITES};

/// The signer whose thinking Converse takes back.
const SIGNER: &str = "bedrock";

/// What a Converse call sends besides the model id.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    pub(crate) messages: Vec<WireMessage>,
    pub(crate) system: Vec<SystemContentBlock>,
    pub(crate) tools: Option<ToolConfiguration>,
    pub(crate) inference: Option<InferenceConfiguration>,
    pub(crate) output: Option<OutputConfig>,
    /// `additionalModelRequestFields` (Claude's `thinking`).
    pub(crate) additional: Option<Document>,
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

/// Whether `origin` is one Converse takes thinking back from: `bedrock`, or unknown.
fn own(origin: Option<&str>) -> bool {
    origin.is_none_or(|o| o == SIGNER)
}

/// The document format of `media_type`.
fn document_format(media_type: &str, field: &str) -> Result<DocumentFormat> {
    Ok(match media_type {
        "application/pdf" => DocumentFormat::Pdf,
        "text/plain" => DocumentFormat::Txt,
        "text/csv" => DocumentFormat::Csv,
        "text/html" => DocumentFormat::Html,
        "text/markdown" => DocumentFormat::Md,
        "application/msword" => DocumentFormat::Doc,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => {
            DocumentFormat::Docx
        }
        "application/vnd.ms-excel" => DocumentFormat::Xls,
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => DocumentFormat::Xlsx,
        other => {
            return Err(Error::invalid_request(
                field,
                format!(
                    "is a document of media type `{other}`; Converse takes pdf, txt, csv, html, \
                     md, doc, docx, xls or xlsx"
                ),
            ));
        }
    })
}

/// `name` in the characters Converse allows in a document name: ASCII letters and
/// digits, single spaces, hyphens, parentheses and square brackets (any other character
/// becomes a hyphen, any run of whitespace one space).
fn document_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = match c {
            c if c.is_whitespace() => ' ',
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') => c,
            _ => '-',
        };
        if !(c == ' ' && (out.is_empty() || out.ends_with(' '))) {
            out.push(c);
        }
    }
    out.trim_end().to_owned()
}

/// Encodes a request's blocks for one model: refusals name it, document names are
/// unique across the request.
struct Blocks<'a> {
    model: &'a str,
    names: HashSet<String>,
}

impl Blocks<'_> {
    /// A name for a document: its own, made valid, or `document-N`; unique.
    fn name(&mut self, name: Option<&str>) -> String {
        let base = name.map(document_name).filter(|n| !n.is_empty());
        let base = base.unwrap_or_else(|| format!("document-{}", self.names.len() + 1));
        let mut name = base.clone();
        let mut k = 2;
        while self.names.contains(&name) {
            name = format!("{base} ({k})");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    fn document(
        &mut self,
        source: &DocumentSource,
        name: Option<&str>,
        field: &str,
    ) -> Result<DocumentBlock> {
        let (format, source) = match source {
            DocumentSource::Base64 { media_type, data } => {
                let bytes = aws_smithy_types::base64::decode(data).map_err(|_| {
                    Error::invalid_request(field, "is not valid base64 document data")
                })?;
                (
                    document_format(media_type, field)?,
                    WireDocument::Bytes(Blob::new(bytes)),
                )
            }
            DocumentSource::Text { text } => {
                (DocumentFormat::Txt, WireDocument::Text(text.clone()))
            }
            DocumentSource::Url { .. } => {
                return Err(Error::unsupported_setting(
                    format!(
                        "{field}: a document by URL (Converse reads document bytes or S3 \
                         locations only: send its bytes)"
                    ),
                    "bedrock",
                    self.model,
                ));
            }
        };
        built(
            field,
            DocumentBlock::builder()
                .format(format)
                .name(self.name(name))
                .source(source)
                .build(),
        )
    }

    /// Encodes one block; a cache mark adds a `cachePoint` block after it.
    fn encode(&mut self, block: &Block, field: &str, out: &mut Vec<ContentBlock>) -> Result<()> {
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
            // Thinking signed elsewhere is left out (Converse refuses a foreign signature).
            Block::Thinking { origin, .. } | Block::RedactedThinking { origin, .. }
                if !own(origin.as_deref()) =>
            {
                None
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
            // Kept as the base64 of Converse's `redactedContent` bytes ([`super::response`]).
            Block::RedactedThinking { data, .. } => {
                let bytes = aws_smithy_types::base64::decode(data).map_err(|_| {
                    Error::invalid_request(field, "is redacted thinking whose data is not base64")
                })?;
                out.push(ContentBlock::ReasoningContent(
                    ReasoningContentBlock::RedactedContent(Blob::new(bytes)),
                ));
                None
            }
            Block::Document {
                source,
                name,
                cache,
            } => {
                let document = self.document(source, name.as_deref(), field)?;
                out.push(ContentBlock::Document(document));
                *cache
            }
            Block::Native { provider, .. } => {
                return Err(Error::unsupported_setting(
                    format!("{field}: a `{provider}` block"),
                    "bedrock",
                    self.model,
                ));
            }
        };
        if let Some(mark) = cache {
            out.push(ContentBlock::CachePoint(cache_point(mark, field)?));
        }
        Ok(())
    }
}

/// Encodes `request` for `model`; `default_max_tokens` is used when the request sets no
/// limit. A setting Converse cannot write is refused before anything else
/// ([`settings::WRITES`]).
pub(crate) fn encode(
    request: &LlmRequest,
    model: &str,
    default_max_tokens: u64,
) -> Result<Encoded> {
    refuse_unwritten(request, SIGNER, model, WRITES)?;
    let choice = settings::tool_choice(request, model)?;
    let mut blocks = Blocks {
        model,
        names: HashSet::new(),
    };
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
            blocks.encode(
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
    if !request.tools_schema().is_empty() && !matches!(choice, Choice::NoTools) {
        let mut tools = Vec::new();
        for t in request.tools_schema() {
            // A provider's own tool (e.g. Anthropic's web search) has no Converse form.
            if let Some(native) = &t.native {
                return Err(Error::unsupported_setting(
                    format!("`{}` tool `{}`", native.provider, t.name),
                    SIGNER,
                    model,
                ));
            }
            tools.push(Tool::ToolSpec(built(
                "tools",
                ToolSpecification::builder()
                    .name(&t.name)
                    .description(&t.description)
                    .input_schema(ToolInputSchema::Json(to_document(t.input_schema.value())))
                    .set_strict(t.strict)
                    .build(),
            )?));
            // The tool list up to here may be cached.
            if let Some(mark) = t.cache {
                tools.push(Tool::CachePoint(cache_point(mark, "tools")?));
            }
        }
        let wire_choice = match choice {
            Choice::Wire(c) => Some(c),
            Choice::Default | Choice::NoTools => None,
        };
        encoded.tools = Some(built(
            "tools",
            ToolConfiguration::builder()
                .set_tools(Some(tools))
                .set_tool_choice(wire_choice)
                .build(),
        )?);
    }
    let sampling = request.sampling_params();
    let max_tokens = sampling.max_output_tokens().unwrap_or(default_max_tokens);
    encoded.additional = settings::additional_fields(sampling, max_tokens)?
        .as_ref()
        .map(to_document);
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
    if let Some(effort) = settings::effort(sampling) {
        let config = encoded
            .output
            .take()
            .map_or_else(OutputConfig::builder, |c| {
                OutputConfig::builder().set_text_format(c.text_format().cloned())
            });
        encoded.output = Some(config.effort(effort).build());
    }
    Ok(encoded)
}
