//! A model's `[models.ID.options]`, read and checked when its transport is made, and the
//! one place where `openai` and `openai-compatible` differ ([`Quirks`]).

use tollgate::catalog::CatalogError;
use tollgate::{Error, ModelEntry, Result};

use crate::codec::ToolChoice;
use crate::{COMPATIBLE_KEY, DEFAULT_BASE_URL, DEFAULT_EMBEDDING_BATCH};

/// Which request field carries the output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputLimitField {
    /// `max_completion_tokens` (OpenAI; includes reasoning tokens).
    MaxCompletionTokens,
    /// `max_tokens` (deprecated at OpenAI; what many compatible servers read).
    MaxTokens,
}

impl OutputLimitField {
    /// The JSON field name.
    pub fn field(self) -> &'static str {
        match self {
            OutputLimitField::MaxCompletionTokens => "max_completion_tokens",
            OutputLimitField::MaxTokens => "max_tokens",
        }
    }
}

/// Everything that differs between OpenAI and a compatible server, in one place.
///
/// | quirk | `openai` | `openai-compatible` | option |
/// |---|---|---|---|
/// | output-limit field | `max_completion_tokens` | `max_tokens` | `output_limit_field` |
/// | `stream_options.include_usage` sent | yes | yes | `stream_usage` |
/// | stream must end with `data: [DONE]` | yes | no (a finish reason and the end of the body suffice) | — |
/// | server returns logprobs (decision client) | yes | yes | `logprobs` |
/// | input estimated with | tiktoken for the model name | tollgate's conservative estimator | — |
/// | credential | required | optional | — |
/// | `base_url` | default `https://api.openai.com` | required | `base_url` |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quirks {
    /// Which field carries the output limit.
    pub output_limit_field: OutputLimitField,
    /// Whether streams ask for a final usage chunk (`stream_options.include_usage`).
    pub stream_usage: bool,
    /// Whether a stream that ends without `data: [DONE]` counts as cut.
    pub done_required: bool,
    /// Whether the server returns `logprobs` (the decision client needs them).
    pub logprobs: bool,
    /// Whether input tokens are estimated with tiktoken (exact for OpenAI's models).
    pub tiktoken: bool,
}

impl Quirks {
    /// The defaults for provider `key`.
    pub fn for_key(key: &str) -> Self {
        if key == COMPATIBLE_KEY {
            Quirks {
                output_limit_field: OutputLimitField::MaxTokens,
                stream_usage: true,
                done_required: false,
                logprobs: true,
                tiktoken: false,
            }
        } else {
            Quirks {
                output_limit_field: OutputLimitField::MaxCompletionTokens,
                stream_usage: true,
                done_required: true,
                logprobs: true,
                tiktoken: true,
            }
        }
    }
}

/// What a catalog entry's `options` table sets for an `openai` or `openai-compatible`
/// model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiOptions {
    /// `base_url`: the API address, without `/v1` (default [`DEFAULT_BASE_URL`] for
    /// `openai`; required for `openai-compatible`).
    pub base_url: String,
    /// `organization`: sent as `OpenAI-Organization`.
    pub organization: Option<String>,
    /// `project`: sent as `OpenAI-Project`.
    pub project: Option<String>,
    /// `tool_choice`: `auto` (default), `required`, `none` or `tool:NAME`.
    pub tool_choice: ToolChoice,
    /// `embedding_batch`: the most inputs per embeddings request (default
    /// [`DEFAULT_EMBEDDING_BATCH`]).
    pub embedding_batch: usize,
    /// The provider's quirks, with `output_limit_field`, `stream_usage` and `logprobs`
    /// overridden where the options set them.
    pub quirks: Quirks,
}

const KNOWN: &[&str] = &[
    "base_url",
    "organization",
    "project",
    "tool_choice",
    "embedding_batch",
    "output_limit_field",
    "stream_usage",
    "logprobs",
];

fn option_error(model: &ModelEntry, field: &str, reason: impl Into<String>) -> Error {
    Error::Catalog(CatalogError::InvalidField {
        model_id: model.id.clone(),
        field: format!("options.{field}"),
        reason: reason.into(),
    })
}

fn header_safe(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic())
}

impl OpenAiOptions {
    /// Reads `model.options`; an unknown key or a value of the wrong kind is an error,
    /// and so is an `openai-compatible` model without `base_url`.
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        let options = &model.options;
        let key = model.provider.as_str();
        if let Some(unknown) = options.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(option_error(
                model,
                unknown,
                format!("is not an {key} option; known: {}", KNOWN.join(", ")),
            ));
        }
        let base_url = match options.get("base_url") {
            None if key == COMPATIBLE_KEY => {
                return Err(option_error(
                    model,
                    "base_url",
                    "is required for openai-compatible: the server's address, e.g. \"http://127.0.0.1:8000\" (without /v1)",
                ));
            }
            None => DEFAULT_BASE_URL.to_owned(),
            Some(v) => {
                let url = v
                    .as_str()
                    .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                    .ok_or_else(|| {
                        option_error(model, "base_url", "must be an http:// or https:// address")
                    })?;
                let url = url.trim_end_matches('/');
                url.strip_suffix("/v1").unwrap_or(url).to_owned()
            }
        };
        let text = |name: &str| -> Result<Option<String>> {
            match options.get(name) {
                None => Ok(None),
                Some(v) => v
                    .as_str()
                    .filter(|s| header_safe(s))
                    .map(|s| Some(s.to_owned()))
                    .ok_or_else(|| {
                        option_error(model, name, "must be a non-empty id without spaces")
                    }),
            }
        };
        let organization = text("organization")?;
        let project = text("project")?;
        let tool_choice = match options.get("tool_choice") {
            None => ToolChoice::Auto,
            Some(v) => v.as_str().and_then(ToolChoice::parse).ok_or_else(|| {
                option_error(
                    model,
                    "tool_choice",
                    "must be `auto`, `required`, `none` or `tool:NAME`",
                )
            })?,
        };
        let embedding_batch = match options.get("embedding_batch") {
            None => DEFAULT_EMBEDDING_BATCH,
            Some(v) => v
                .as_integer()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    option_error(
                        model,
                        "embedding_batch",
                        "must be a whole number, 1 or more",
                    )
                })?,
        };
        let mut quirks = Quirks::for_key(key);
        if let Some(v) = options.get("output_limit_field") {
            quirks.output_limit_field = match v.as_str() {
                Some("max_completion_tokens") => OutputLimitField::MaxCompletionTokens,
                Some("max_tokens") => OutputLimitField::MaxTokens,
                _ => {
                    return Err(option_error(
                        model,
                        "output_limit_field",
                        "must be `max_completion_tokens` or `max_tokens`",
                    ));
                }
            };
        }
        for (name, slot) in [
            ("stream_usage", &mut quirks.stream_usage),
            ("logprobs", &mut quirks.logprobs),
        ] {
            if let Some(v) = options.get(name) {
                *slot = v
                    .as_bool()
                    .ok_or_else(|| option_error(model, name, "must be true or false"))?;
            }
        }
        Ok(OpenAiOptions {
            base_url,
            organization,
            project,
            tool_choice,
            embedding_batch,
            quirks,
        })
    }
}
