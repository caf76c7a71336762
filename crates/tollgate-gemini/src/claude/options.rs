//! An `anthropic-vertex` model's `[models.ID.options]`, read and checked when its
//! transport is made.

use tollgate::provider::{CatalogError, ModelOptions, ToolChoice};
use tollgate::provider::{Error, ModelEntry, Result};

use crate::options::{VertexPlace, is_id, is_model_name};

/// What a catalog entry's `options` table sets for an `anthropic-vertex` model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnthropicVertexOptions {
    /// `base_url`: the API address without `/v1` (default: the region's Vertex address,
    /// [`VertexPlace::base_url`]); for proxies and tests.
    pub base_url: String,
    /// `project` and `region` (both required, never defaulted; the region is the place's
    /// `location`), and `quota_project` (sent as `x-goog-user-project`).
    pub place: VertexPlace,
    /// `beta`: beta feature names, sent as one `anthropic-beta` header (as Anthropic's
    /// own Vertex client sends them).
    pub beta: Vec<String>,
    /// `top_k`: sample from the k most likely tokens.
    pub top_k: Option<u64>,
    /// `tool_choice`: `auto` (default), `any`, `none` or `tool:NAME`.
    pub tool_choice: ToolChoice,
}

const KNOWN: &[&str] = &[
    "base_url",
    "project",
    "region",
    "quota_project",
    "beta",
    "top_k",
    "tool_choice",
];

impl AnthropicVertexOptions {
    /// Reads `model.options`: an unknown key, a value of the wrong kind, or a missing
    /// `project` or `region` is a [`CatalogError::InvalidField`] naming the option.
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = ModelOptions::new(model, KNOWN)?;
        let place = VertexPlace::read(
            &options,
            "region",
            "a region where the Claude model is served, such as `us-east5`, or `global`",
        )?;
        Ok(AnthropicVertexOptions {
            base_url: options.url("base_url")?.unwrap_or_else(|| place.base_url()),
            place,
            beta: options
                .list(
                    "beta",
                    "a list of beta names (letters, digits, `-`, `_`, `.`)",
                    is_id,
                )?
                .unwrap_or_default(),
            top_k: options.whole("top_k", 1)?,
            tool_choice: options.tool_choice("tool_choice", "any")?,
        })
    }
}

/// The model's Vertex name (e.g. `claude-sonnet-4-5@20250929`), checked: it goes into
/// the URL's path.
pub(crate) fn model_name(model: &ModelEntry) -> Result<String> {
    if is_model_name(&model.name) {
        return Ok(model.name.clone());
    }
    Err(Error::Catalog(CatalogError::InvalidField {
        model_id: model.id.clone(),
        field: "name".into(),
        reason: "must be a Claude model's Vertex name (letters, digits, `-`, `_`, `.`, `@`), \
                 e.g. `claude-sonnet-4-5@20250929`"
            .into(),
    }))
}
