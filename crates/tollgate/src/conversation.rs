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
        /// Prompt-cache breakpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache: Option<CacheMark>,
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
            | Block::Thinking { cache, .. } => *cache = Some(mark),
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
