//! A model's `[models.ID.options]`, read and checked when its transport is made.

use tollgate::provider::{ModelEntry, Result};
use tollgate::provider::{ModelOptions, ToolChoice};

use crate::{DEFAULT_BASE_URL, MAX_EMBEDDING_BATCH};

/// An Embed `input_type` the catalog sets for every request of a model, in place of the
/// one the call's purpose gives (`search_document` or `search_query`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputType {
    /// `classification`: the texts are for a classifier.
    Classification,
    /// `clustering`: the texts are for clustering.
    Clustering,
}

impl InputType {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            InputType::Classification => "classification",
            InputType::Clustering => "clustering",
        }
    }
}

/// What a catalog entry's `options` table sets for a `cohere` model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CohereOptions {
    /// `base_url`: the API address, without `/v2` (default [`DEFAULT_BASE_URL`]).
    pub base_url: String,
    /// `tool_choice`: `auto` (default), `required` or `none`. Cohere cannot force one
    /// named tool, so `tool:NAME` is refused here.
    pub tool_choice: ToolChoice,
    /// `embedding_batch`: the most texts per Embed request (default and most
    /// [`MAX_EMBEDDING_BATCH`]).
    pub embedding_batch: usize,
    /// `input_type`: `classification` or `clustering` for every Embed request of the
    /// model; unset, the call's purpose decides (`search_document` / `search_query`).
    pub input_type: Option<InputType>,
}

const KNOWN: &[&str] = &["base_url", "tool_choice", "embedding_batch", "input_type"];

impl CohereOptions {
    /// Reads `model.options`; an unknown key, a value of the wrong kind, `tool_choice =
    /// "tool:NAME"` and an `embedding_batch` over 96 are errors naming the option.
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = ModelOptions::new(model, KNOWN)?;
        let base_url = match options.url("base_url")? {
            None => DEFAULT_BASE_URL.to_owned(),
            Some(url) => url.strip_suffix("/v2").unwrap_or(&url).to_owned(),
        };
        let tool_choice = options
            .parse(
                "tool_choice",
                "`auto`, `required` or `none` (Cohere cannot force one named tool)",
                |v| match ToolChoice::parse(v, "required") {
                    Some(ToolChoice::Tool(_)) | None => None,
                    choice => choice,
                },
            )?
            .unwrap_or_default();
        let embedding_batch = match options.whole("embedding_batch", 1)? {
            None => MAX_EMBEDDING_BATCH,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_EMBEDDING_BATCH)
                .ok_or_else(|| {
                    options.error(
                        "embedding_batch",
                        format!(
                            "must be at most {MAX_EMBEDDING_BATCH}: Cohere's Embed takes no more texts a request"
                        ),
                    )
                })?,
        };
        let input_type =
            options.parse(
                "input_type",
                "`classification` or `clustering`",
                |v| match v {
                    "classification" => Some(InputType::Classification),
                    "clustering" => Some(InputType::Clustering),
                    _ => None,
                },
            )?;
        Ok(CohereOptions {
            base_url,
            tool_choice,
            embedding_batch,
            input_type,
        })
    }
}
