//! What is said: roles, messages, content blocks and prompt-cache marks.

use serde::{Deserialize, Serialize};

use crate::json::Json;

/// Who speaks a message.
///
/// System text is a leading [`Role::System`] message, so that a request holds exactly
/// four components (see [`crate::LlmRequest`]); codecs lift it into the provider's
/// `system` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions for the model; only at the start of a request.
    System,
    /// The user (or tool results sent back on the user's turn).
    User,
    /// The model.
    Assistant,
}

/// A prompt-cache breakpoint on a block: everything up to and including it may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheMark {
    /// The provider's default lifetime (5 minutes at Anthropic).
    #[default]
    FiveMinutes,
    /// A one-hour cache write, where the provider has it (priced apart in the catalog).
    OneHour,
}

/// Where an image's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline, base64-encoded.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// The base64 text.
        data: String,
    },
    /// A URL the provider fetches.
    Url {
        /// The address.
        url: String,
    },
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
    },
    /// An image.
    Image {
        /// Where the image is.
        source: ImageSource,
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
    },
    /// The model asks for a tool to be run.
    ToolUse {
        /// Id that the matching [`Block::ToolResult`] refers to.
        id: String,
        /// Tool name, as in the request's tool definitions.
        name: String,
        /// Arguments, a JSON object.
        input: Json,
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
    },
    /// The result of a tool run, sent back on the user's turn.
    ToolResult {
        /// The [`Block::ToolUse`] id this answers.
        tool_use_id: String,
        /// The result: text or image blocks.
        content: Vec<Block>,
        /// True when the tool failed.
        #[serde(default)]
        is_error: bool,
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
    },
    /// The model's visible reasoning.
    Thinking {
        /// The reasoning text.
        text: String,
        /// The provider's signature, which must be sent back unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// The provider key whose model signed it (`anthropic`, `bedrock`, `openai`,
        /// `gemini`); a codec sends a signature only back to its own provider, and drops
        /// a thinking block signed elsewhere. `None`: unknown, sent as it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
    },
    /// Reasoning the provider returned encrypted (Anthropic's `redacted_thinking`), which
    /// must be sent back unchanged within a tool cycle.
    RedactedThinking {
        /// The opaque data.
        data: String,
        /// The provider key that produced it, as for [`Block::Thinking`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
    },
    /// A document for the model to read: a PDF (inline or by URL) or plain text.
    Document {
        /// Where the document is.
        source: DocumentSource,
        /// A file name or title, where the provider takes one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
    },
    /// A block only one provider understands, kept as its wire JSON (e.g. Anthropic's
    /// `server_tool_use` and `web_search_tool_result`): sent back as it is to that
    /// provider, refused with [`crate::Error::Unsupported`] by every other.
    Native {
        /// The provider key the block belongs to, e.g. `anthropic`.
        provider: String,
        /// The block as the provider writes it.
        value: Json,
    },
}

/// Where a document's content is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DocumentSource {
    /// Inline, base64-encoded (a PDF: `application/pdf`).
    Base64 {
        /// MIME type, e.g. `application/pdf`.
        media_type: String,
        /// The base64 text.
        data: String,
    },
    /// A URL the provider fetches.
    Url {
        /// The address.
        url: String,
    },
    /// Plain text.
    Text {
        /// The document's text.
        text: String,
    },
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text {
            text: text.into(),
            cache: None,
        }
    }

    /// This block with a prompt-cache breakpoint.
    pub fn with_cache(mut self, mark: CacheMark) -> Self {
        match &mut self {
            Block::Text { cache, .. }
            | Block::Image { cache, .. }
            | Block::ToolUse { cache, .. }
            | Block::ToolResult { cache, .. }
            | Block::Thinking { cache, .. }
            | Block::Document { cache, .. } => *cache = Some(mark),
            // Opaque blocks carry their provider's own marks, if any.
            Block::RedactedThinking { .. } | Block::Native { .. } => {}
        }
        self
    }

    /// The block's text, for text blocks.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Block::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// One turn: a role and its blocks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: Vec<Block>,
}

impl Message {
    /// A message of one text block.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![Block::text(text)],
        }
    }

    /// A system message of one text block.
    pub fn system(text: impl Into<String>) -> Self {
        Message::new(Role::System, text)
    }

    /// A user message of one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, text)
    }

    /// An assistant message of one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, text)
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        self.content.iter().filter_map(Block::as_text).collect()
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Name the model uses to call it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Json,
    /// Whether the provider must hold the arguments to the schema (OpenAI's and
    /// Anthropic's `strict`); `None` leaves it to the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// A tool the provider runs itself (e.g. Anthropic's web search), as that provider
    /// defines it; `input_schema` is then unused. Refused by every other provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeTool>,
    /// Loaded only when the model searches for it (Anthropic's and OpenAI Responses'
    /// `defer_loading`, with a tool-search tool), so a large tool list costs no context
    /// until used. A provider without deferral sends the tool loaded: it stays callable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub defer_loading: bool,
    /// A prompt-cache breakpoint after this tool: the tool list up to it may be cached
    /// (Anthropic's `cache_control` on the tool, Bedrock Converse's `cachePoint` after
    /// it). Providers that cache prompts on their own (OpenAI, Gemini) send it unmarked,
    /// as they do a block's [`CacheMark`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheMark>,
}

impl ToolDefinition {
    /// A function tool: its name, what it does, and the JSON Schema of its arguments.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Json,
    ) -> Self {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            input_schema,
            strict: None,
            native: None,
            defer_loading: false,
            cache: None,
        }
    }

    /// This tool with `strict` as given.
    pub fn with_strict(mut self, strict: Option<bool>) -> Self {
        self.strict = strict;
        self
    }

    /// This tool, loaded only when the model searches for it (`true`), or up front.
    pub fn with_defer_loading(mut self, defer: bool) -> Self {
        self.defer_loading = defer;
        self
    }

    /// With a prompt-cache breakpoint after it (see [`ToolDefinition::cache`]).
    pub fn with_cache(mut self, cache: CacheMark) -> Self {
        self.cache = Some(cache);
        self
    }
}

/// A provider's own tool (a server tool), kept as the provider's wire JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NativeTool {
    /// The provider key it belongs to, e.g. `anthropic`.
    pub provider: String,
    /// The definition as the provider writes it (e.g. `{"type": "web_search_20250305",
    /// "name": "web_search", "max_uses": 3}`).
    pub definition: Json,
}

/// A conversation being built up turn by turn: system text, messages and tools.
///
/// Turn it into an immutable [`crate::LlmRequest`] with [`Conversation::request`];
/// append an answer with [`Conversation::push_response`].
///
/// ```
/// use tollgate::{Conversation, Message, SamplingParams};
///
/// let mut conversation = Conversation::new()
///     .with_system("You answer in one sentence.")
///     .user("What is a token bucket?");
/// let first = conversation.request("assistant", SamplingParams::new())?;
/// assert_eq!(first.messages().len(), 2); // the system text leads as a message
///
/// // After the answer (`conversation.push_response(&answer)` with a real one), the
/// // next turn: every request carries the whole conversation so far.
/// conversation.messages.push(Message::assistant("A bucket that refills at a fixed rate."));
/// conversation.push_user("And why reserve before sending?");
/// let second = conversation.request("assistant", SamplingParams::new())?;
/// assert_eq!(second.turns().len(), 3);
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conversation {
    /// System blocks.
    pub system: Vec<Block>,
    /// User and assistant messages, in order.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolDefinition>,
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the system text.
    pub fn with_system(mut self, text: impl Into<String>) -> Self {
        self.system = vec![Block::text(text)];
        self
    }

    /// Appends a user message.
    pub fn user(mut self, text: impl Into<String>) -> Self {
        self.messages.push(Message::user(text));
        self
    }

    /// Appends a user message in place.
    pub fn push_user(&mut self, text: impl Into<String>) {
        self.messages.push(Message::user(text));
    }

    /// Adds a tool.
    pub fn with_tool(mut self, tool: ToolDefinition) -> Self {
        self.tools.push(tool);
        self
    }
}
