//! A model's `[models.ID.options]`, read and checked when its transport is made.

use tollgate::provider::{ModelEntry, Result};
use tollgate::provider::{ModelOptions, ToolChoice};

use crate::DEFAULT_BASE_URL;

/// What a catalog entry's `options` table sets for an `anthropic-direct` model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnthropicOptions {
    /// `base_url`: the API address, without `/v1/messages` (default
    /// [`DEFAULT_BASE_URL`]); for proxies and tests.
    pub base_url: String,
    /// `beta`: beta feature names, sent as one `anthropic-beta` header.
    pub beta: Vec<String>,
    /// `top_k`: sample from the k most likely tokens.
    pub top_k: Option<u64>,
    /// `tool_choice`: `auto` (default), `any`, `none` or `tool:NAME`.
    pub tool_choice: ToolChoice,
    /// `mid_conversation_system`: the model takes `role: "system"` messages after the
    /// first turn (Anthropic's API, newest models only); default `false`, which folds
    /// them into the user turn.
    pub mid_conversation_system: bool,
}

const KNOWN: &[&str] = &[
    "base_url",
    "beta",
    "top_k",
    "tool_choice",
    "mid_conversation_system",
];

impl AnthropicOptions {
    /// Reads `model.options`; an unknown key or a value of the wrong kind is an error.
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = ModelOptions::new(model, KNOWN)?;
        Ok(AnthropicOptions {
            base_url: options
                .url("base_url")?
                .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
            beta: options
                .list(
                    "beta",
                    "a list of beta names (letters, digits, `-`, `_`, `.`)",
                    is_token,
                )?
                .unwrap_or_default(),
            top_k: options.whole("top_k", 1)?,
            tool_choice: options.tool_choice("tool_choice", "any")?,
            mid_conversation_system: options.flag("mid_conversation_system")?.unwrap_or(false),
        })
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
