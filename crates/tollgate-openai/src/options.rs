//! A model's `[models.ID.options]`, read and checked when its transport is made, and the
//! one place where `openai` and `openai-compatible` differ ([`Quirks`]).

use tollgate::provider::LimiterConfig;
use tollgate::provider::{
    DefaultEstimator, ModelOptions, TiktokenEstimator, TokenEstimator, ToolChoice,
};
use tollgate::provider::{ModelEntry, Result};

use crate::DEFAULT_EMBEDDING_BATCH;
use crate::dialect::{OutputLimitField, Preset, Quirks};

/// The API a model's chat calls go through (catalog option `api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Api {
    /// `POST /v1/chat/completions` (`api = "chat"`, the default).
    #[default]
    Chat,
    /// `POST /v1/responses`, stateless (`api = "responses"`).
    Responses,
}

/// What a catalog entry's `options` table sets for a model of an OpenAI-like provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiOptions {
    /// Which API chat goes through: Chat Completions (the default) or Responses.
    pub api: Api,
    /// `base_url`: the API address, without `/v1` (default [`DEFAULT_BASE_URL`](crate::DEFAULT_BASE_URL) for
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
    /// `extra_body`: fields added to every chat request body as they are written (a
    /// server's own parameter that tollgate has no setting for), after the encoded
    /// fields; a field the codec writes is not overwritten (it is refused).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
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
    "api",
    "extra_body",
];

fn header_safe(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic())
}

impl OpenAiOptions {
    /// Reads `model.options` for a model of this crate's two keys (see
    /// [`OpenAiOptions::for_preset`]).
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        Self::for_preset(model, &Preset::for_key(&model.provider), &[])
    }

    /// Reads `model.options` for a model of `preset`; an unknown key (other than
    /// `also_known`, the options the preset's own crate reads) or a value of the wrong
    /// kind is an error, and so is a missing `base_url` where the preset has none.
    pub fn for_preset(model: &ModelEntry, preset: &Preset, also_known: &[&str]) -> Result<Self> {
        let known: Vec<&str> = KNOWN.iter().chain(also_known).copied().collect();
        let options = ModelOptions::new(model, &known)?;
        let base_url = match (options.url("base_url")?, preset.base_url) {
            (Some(url), _) => url.strip_suffix("/v1").unwrap_or(&url).to_owned(),
            (None, Some(default)) => default.to_owned(),
            (None, None) => {
                return Err(options.error(
                    "base_url",
                    format!(
                        "is required for {}: the server's address, e.g. \"http://127.0.0.1:8000\" (without /v1)",
                        preset.key
                    ),
                ));
            }
        };
        let id = "a non-empty id without spaces";
        let mut quirks = preset.quirks;
        if let Some(field) = options.parse(
            "output_limit_field",
            "`max_completion_tokens` or `max_tokens`",
            |v| match v {
                "max_completion_tokens" => Some(OutputLimitField::MaxCompletionTokens),
                "max_tokens" => Some(OutputLimitField::MaxTokens),
                _ => None,
            },
        )? {
            quirks.output_limit_field = field;
        }
        if let Some(v) = options.flag("stream_usage")? {
            quirks.stream_usage = v;
        }
        if let Some(v) = options.flag("logprobs")? {
            quirks.logprobs = v;
        }
        let api = options
            .parse("api", "`chat` or `responses`", |v| match v {
                "chat" => Some(Api::Chat),
                "responses" => Some(Api::Responses),
                _ => None,
            })?
            .unwrap_or(Api::Chat);
        if api == Api::Responses && preset.paths.responses.is_none() {
            return Err(options.error(
                "api",
                format!(
                    "is `responses`, and {} has no Responses API: leave it out (chat goes through Chat Completions)",
                    preset.key
                ),
            ));
        }
        let extra_body = match options.value("extra_body") {
            None => serde_json::Map::new(),
            Some(table) => match serde_json::to_value(table) {
                Ok(serde_json::Value::Object(fields)) => fields,
                _ => {
                    return Err(options.error(
                        "extra_body",
                        "must be a table of request fields, e.g. `extra_body = { safe_prompt = true }`",
                    ));
                }
            },
        };
        Ok(OpenAiOptions {
            api,
            base_url,
            organization: options.text("organization", id, header_safe)?,
            project: options.text("project", id, header_safe)?,
            tool_choice: options.tool_choice("tool_choice", preset.dialect.required_tool_choice)?,
            embedding_batch: options
                .whole("embedding_batch", 1)?
                .map_or(DEFAULT_EMBEDDING_BATCH, |n| {
                    usize::try_from(n).unwrap_or(usize::MAX)
                }),
            quirks,
            extra_body,
        })
    }
}

/// The largest input estimate, in tokens, that an `openai` model's first calls make with
/// the byte bound instead of waiting for the tiktoken table
/// ([`TiktokenEstimator::count_without_waiting`]): at most this many tokens are reserved
/// too many, and settled back, while a process's table loads. A larger input waits for
/// the table, since its over-estimate could cross a bucket's size or shorten a re-run.
pub const PROVISIONAL_ESTIMATE_TOKENS: u64 = 4096;

impl OpenAiOptions {
    /// `count` made as `model`'s input is counted: tiktoken for OpenAI's models (exact,
    /// but, until the process has loaded the table, the byte bound when that is at most
    /// `bound_limit`: an over-estimate that needs no table), tollgate's conservative
    /// estimate for other servers' (whose tokenizers are unknown).
    pub(crate) fn count(
        &self,
        model: &ModelEntry,
        bound_limit: u64,
        count: impl Fn(&dyn TokenEstimator) -> u64,
    ) -> u64 {
        if self.quirks.tiktoken {
            TiktokenEstimator::for_model(&model.name).count_without_waiting(bound_limit, count)
        } else {
            count(&DefaultEstimator)
        }
    }
}

/// The largest byte-bound estimate a call of `model` with `output` tokens of output limit
/// may be given before the table is loaded: [`PROVISIONAL_ESTIMATE_TOKENS`], and no more
/// than the model's `context_window` and its token buckets (`tpm`, `input_tpm`) hold
/// beside the output, so that the bound never fails a window or bucket-size check the
/// exact count would pass (a bound that fits means the exact count fits too; one that
/// does not waits for the table).
pub(crate) fn provisional_limit(model: &ModelEntry, output: u64) -> u64 {
    let burst = LimiterConfig::for_model(model).burst;
    let limits = &model.limits;
    let room = [
        model.context_window.map(|w| w.saturating_sub(output)),
        (limits.tpm > 0).then(|| burst.capacity(limits.tpm).saturating_sub(output)),
        (limits.input_tpm > 0).then(|| burst.capacity(limits.input_tpm)),
    ];
    room.into_iter()
        .flatten()
        .fold(PROVISIONAL_ESTIMATE_TOKENS, u64::min)
}
