//! A model's `[models.ID.options]`, read and checked when its transport is made.

use tollgate::catalog::CatalogError;
use tollgate::{Error, ModelEntry, Result};

use crate::DEFAULT_BASE_URL;
use crate::codec::ToolChoice;

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
}

const KNOWN: &[&str] = &["base_url", "beta", "top_k", "tool_choice"];

fn option_error(model: &ModelEntry, field: &str, reason: impl Into<String>) -> Error {
    Error::Catalog(CatalogError::InvalidField {
        model_id: model.id.clone(),
        field: format!("options.{field}"),
        reason: reason.into(),
    })
}

impl AnthropicOptions {
    /// Reads `model.options`; an unknown key or a value of the wrong kind is an error.
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = &model.options;
        if let Some(unknown) = options.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(option_error(
                model,
                unknown,
                format!(
                    "is not an anthropic-direct option; known: {}",
                    KNOWN.join(", ")
                ),
            ));
        }
        let base_url = match options.get("base_url") {
            None => DEFAULT_BASE_URL.to_owned(),
            Some(v) => {
                let url = v
                    .as_str()
                    .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                    .ok_or_else(|| {
                        option_error(model, "base_url", "must be an http:// or https:// address")
                    })?;
                url.trim_end_matches('/').to_owned()
            }
        };
        let beta = match options.get("beta") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .and_then(|items| {
                    items
                        .iter()
                        .map(|i| i.as_str().filter(|s| is_token(s)).map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| {
                    option_error(
                        model,
                        "beta",
                        "must be a list of beta names (letters, digits, `-`, `_`, `.`)",
                    )
                })?,
        };
        let top_k = match options.get("top_k") {
            None => None,
            Some(v) => Some(
                v.as_integer()
                    .and_then(|k| u64::try_from(k).ok())
                    .filter(|k| *k >= 1)
                    .ok_or_else(|| {
                        option_error(model, "top_k", "must be a whole number, 1 or more")
                    })?,
            ),
        };
        let tool_choice = match options.get("tool_choice") {
            None => ToolChoice::Auto,
            Some(v) => v.as_str().and_then(ToolChoice::parse).ok_or_else(|| {
                option_error(
                    model,
                    "tool_choice",
                    "must be `auto`, `any`, `none` or `tool:NAME`",
                )
            })?,
        };
        Ok(AnthropicOptions {
            base_url,
            beta,
            top_k,
            tool_choice,
        })
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}
