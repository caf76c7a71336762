//! A model's `[models.ID.options]`, read and checked when its transport is made.

use tollgate::provider::{CatalogError, ModelOptions};
use tollgate::provider::{Error, ModelEntry, Result};

use crate::codec::{
    EncodeOptions, MAX_BATCH_EMBEDDINGS, MissingSignature, ThinkingConfig, ToolChoice,
};
use crate::{DEFAULT_BASE_URL, VERTEX_KEY};

/// Which embeddings method a model is called with (`options.embedding_api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingApi {
    /// `:batchEmbedContents`, up to 100 texts (the Gemini API's default).
    Batch,
    /// `:predict` with `instances` (`gemini-embedding-001`, `text-embedding-*`,
    /// `text-multilingual-embedding-*`).
    Predict,
    /// `:embedContent`, one text per request (newer Gemini embedding models on Vertex).
    EmbedContent,
}

impl EmbeddingApi {
    /// The method Google's SDK uses for `model` on Vertex: `:predict` for the models that
    /// still need it, `:embedContent` for the others.
    pub fn for_vertex_model(model: &str) -> Self {
        let legacy = [
            "gemini-embedding-001",
            "text-embedding-",
            "text-multilingual-embedding-",
            "textembedding-gecko",
        ];
        if legacy.iter().any(|p| model.starts_with(p)) {
            EmbeddingApi::Predict
        } else {
            EmbeddingApi::EmbedContent
        }
    }
}

/// The body a batch is created with (`options.batch_body`, `gemini` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchBody {
    /// The Gemini API's own: `{"batch":{"displayName","inputConfig":{"requests":{"requests":
    /// [{"request","metadata":{"key"}}]}}}}` (the default, and the only one Google takes).
    #[default]
    Gemini,
    /// llmock 0.2.2's: `{"requests":[{"custom_id","request"}]}`, which the real API rejects
    /// (it refuses unknown fields) and llmock needs (it rejects the real body); for tests
    /// against that mock server only. See [`crate::batch`].
    Llmock,
}

/// Where a `vertex` model lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VertexPlace {
    /// `project`: the Google Cloud project id (never defaulted).
    pub project: String,
    /// `location`: a region such as `us-central1`, the multi-regions `us`/`eu`, or
    /// `global` (never defaulted).
    pub location: String,
    /// `quota_project`: sent as `x-goog-user-project` (bills quota to that project).
    pub quota_project: Option<String>,
}

impl VertexPlace {
    /// The API address for the location: `global` → `aiplatform.googleapis.com`,
    /// `us`/`eu` → `aiplatform.{us|eu}.rep.googleapis.com`, a region →
    /// `{region}-aiplatform.googleapis.com`.
    pub fn base_url(&self) -> String {
        match self.location.as_str() {
            "global" => "https://aiplatform.googleapis.com".to_owned(),
            "us" | "eu" => format!("https://aiplatform.{}.rep.googleapis.com", self.location),
            region => format!("https://{region}-aiplatform.googleapis.com"),
        }
    }

    /// Reads `project`, the location from option `location` (`what` says what it
    /// takes), both required and never defaulted, and `quota_project`; a missing one is
    /// the catalog error naming it, for the options' provider key.
    pub(crate) fn read(options: &ModelOptions<'_>, location: &str, what: &str) -> Result<Self> {
        let key = &options.model().provider;
        let required = |name: &str, what: &str| -> Result<String> {
            options
                .text(name, "a name of letters, digits, `-`, `_` or `.`", is_id)?
                .ok_or_else(|| {
                    options.error(
                        name,
                        format!("is required for {key}: {what} (never defaulted)"),
                    )
                })
        };
        Ok(VertexPlace {
            project: required("project", "the Google Cloud project id")?,
            location: required(location, what)?,
            quota_project: options.text("quota_project", "a project id", is_id)?,
        })
    }

    /// The path of `model`'s `method` (e.g. `generateContent`), after the base URL.
    pub fn path(&self, model: &str, method: &str) -> String {
        self.publisher_path("google", model, method)
    }

    /// The path of `publisher`'s `model` and its `method`: `google`'s Gemini, or
    /// `anthropic`'s Claude (`rawPredict`), after the base URL.
    pub fn publisher_path(&self, publisher: &str, model: &str, method: &str) -> String {
        format!(
            "/v1/projects/{}/locations/{}/publishers/{publisher}/models/{model}:{method}",
            self.project, self.location
        )
    }
}

/// What a catalog entry's `options` table sets for a `gemini` or `vertex` model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeminiOptions {
    /// `base_url`: the API address without the version (default
    /// [`DEFAULT_BASE_URL`] for `gemini`, the location's address for `vertex`); for
    /// proxies and tests.
    pub base_url: String,
    /// `tool_choice`: `auto` (default), `any`, `none` or `tool:NAME`.
    pub tool_choice: ToolChoice,
    /// `top_k`.
    pub top_k: Option<u64>,
    /// `thinking_budget` (tokens; 0 off, -1 automatic), `thinking_level`
    /// (`minimal`/`low`/`medium`/`high`) and `include_thoughts`.
    pub thinking: ThinkingConfig,
    /// `cached_content`: an explicit cache, `cachedContents/ID` (Gemini API) or its full
    /// Vertex resource name.
    pub cached_content: Option<String>,
    /// `logprobs`: the model returns logprobs, so the decision client may use it
    /// (default false: availability varies per model and per API).
    pub logprobs: bool,
    /// `missing_thought_signature`: `omit` (default) or `skip_validator`.
    pub missing_signature: MissingSignature,
    /// `embedding_api`: `gemini`: `batch` (default) or `embed_content`; `vertex`:
    /// `predict` or `embed_content` (default by model name,
    /// [`EmbeddingApi::for_vertex_model`]).
    pub embedding_api: EmbeddingApi,
    /// `embedding_batch`: the most texts per embeddings request.
    pub embedding_batch: Option<usize>,
    /// The Vertex project and location (`vertex` only).
    pub vertex: Option<VertexPlace>,
    /// `batch_body`: `gemini` (default) or `llmock`, the body batches are created with
    /// ([`BatchBody`]; `gemini` only: Vertex has no batch transport).
    pub batch_body: BatchBody,
}

const KNOWN_GEMINI: &[&str] = &[
    "base_url",
    "tool_choice",
    "top_k",
    "thinking_budget",
    "thinking_level",
    "include_thoughts",
    "cached_content",
    "logprobs",
    "missing_thought_signature",
    "embedding_api",
    "embedding_batch",
    "batch_body",
];

const KNOWN_VERTEX: &[&str] = &[
    "base_url",
    "tool_choice",
    "top_k",
    "thinking_budget",
    "thinking_level",
    "include_thoughts",
    "cached_content",
    "logprobs",
    "missing_thought_signature",
    "embedding_batch",
    "project",
    "location",
    "quota_project",
    "embedding_api",
];

pub(crate) fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_resource(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
}

impl GeminiOptions {
    /// Reads `model.options`; an unknown key or a value of the wrong kind is an error,
    /// and so is a `vertex` model without `project` or `location`, or a model whose
    /// limits count output tokens (Gemini's TPM counts input only: use `input_tpm`).
    pub fn from_model(model: &ModelEntry) -> Result<Self> {
        let vertex = model.provider == VERTEX_KEY;
        let options = ModelOptions::new(model, if vertex { KNOWN_VERTEX } else { KNOWN_GEMINI })?;
        check_limits(model)?;
        let place = if vertex {
            Some(VertexPlace::read(
                &options,
                "location",
                "a region such as `us-central1`, `us`, `eu` or `global`",
            )?)
        } else {
            None
        };
        let base_url = match (options.url("base_url")?, &place) {
            (Some(url), _) => url,
            (None, Some(place)) => place.base_url(),
            (None, None) => DEFAULT_BASE_URL.to_owned(),
        };
        let budget = match model.options.get("thinking_budget") {
            None => None,
            Some(v) => Some(v.as_integer().filter(|n| *n >= -1).ok_or_else(|| {
                options.error(
                    "thinking_budget",
                    "must be a whole number of tokens: 0 (off), -1 (automatic) or more",
                )
            })?),
        };
        let level = options.parse(
            "thinking_level",
            "`minimal`, `low`, `medium` or `high`",
            |v| {
                let upper = v.to_ascii_uppercase();
                ["MINIMAL", "LOW", "MEDIUM", "HIGH"]
                    .contains(&upper.as_str())
                    .then_some(upper)
            },
        )?;
        let embedding_api = match options.parse(
            "embedding_api",
            if vertex {
                "`predict` or `embed_content`"
            } else {
                "`batch` or `embed_content`"
            },
            |v| match v {
                "batch" if !vertex => Some(EmbeddingApi::Batch),
                "predict" if vertex => Some(EmbeddingApi::Predict),
                "embed_content" => Some(EmbeddingApi::EmbedContent),
                _ => None,
            },
        )? {
            Some(api) => api,
            None if vertex => EmbeddingApi::for_vertex_model(&model_name(model)),
            None => EmbeddingApi::Batch,
        };
        let batch = options.whole("embedding_batch", 1)?;
        if !vertex && batch.is_some_and(|b| b > MAX_BATCH_EMBEDDINGS as u64) {
            return Err(options.error(
                "embedding_batch",
                format!("must be at most {MAX_BATCH_EMBEDDINGS}: batchEmbedContents takes no more"),
            ));
        }
        Ok(GeminiOptions {
            base_url,
            tool_choice: options.tool_choice("tool_choice", "any")?,
            top_k: options.whole("top_k", 1)?,
            thinking: ThinkingConfig {
                budget,
                level,
                include_thoughts: options.flag("include_thoughts")?,
            },
            cached_content: options.text(
                "cached_content",
                "a cache name such as `cachedContents/abc123`",
                is_resource,
            )?,
            logprobs: options.flag("logprobs")?.unwrap_or(false),
            missing_signature: options
                .parse(
                    "missing_thought_signature",
                    "`omit` or `skip_validator`",
                    |v| match v {
                        "omit" => Some(MissingSignature::Omit),
                        "skip_validator" => Some(MissingSignature::SkipValidator),
                        _ => None,
                    },
                )?
                .unwrap_or_default(),
            embedding_api,
            embedding_batch: batch.map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
            vertex: place,
            batch_body: options
                .parse("batch_body", "`gemini` or `llmock`", |v| match v {
                    "gemini" => Some(BatchBody::Gemini),
                    "llmock" => Some(BatchBody::Llmock),
                    _ => None,
                })?
                .unwrap_or_default(),
        })
    }
}

/// The model's name as Google writes it in a path: without a leading `models/`.
fn model_name(model: &ModelEntry) -> String {
    model
        .name
        .strip_prefix("models/")
        .unwrap_or(&model.name)
        .to_owned()
}

/// Gemini's TPM counts input tokens only: a `tpm` or `output_tpm` would reserve output
/// the provider never counts, and hold back calls it would have served.
fn check_limits(model: &ModelEntry) -> Result<()> {
    let field = if model.limits.tpm > 0 {
        "tpm"
    } else if model.limits.output_tpm > 0 {
        "output_tpm"
    } else {
        return Ok(());
    };
    Err(Error::Catalog(CatalogError::InvalidField {
        model_id: model.id.clone(),
        field: field.into(),
        reason: format!(
            "counts output tokens, but {}'s tokens-per-minute limit counts input tokens only: \
             write it as `input_tpm`",
            model.provider
        ),
    }))
}

/// One model as its transports call it: the catalog entry, the name its paths carry
/// and its options.
#[derive(Debug, Clone)]
pub(crate) struct GeminiModel {
    pub(crate) entry: ModelEntry,
    pub(crate) name: String,
    pub(crate) options: GeminiOptions,
}

impl GeminiModel {
    /// Reads `entry`'s options and checks its name.
    pub(crate) fn new(entry: &ModelEntry) -> Result<Self> {
        let options = GeminiOptions::from_model(entry)?;
        let name = model_name(entry);
        if !is_model_name(&name) {
            return Err(Error::Catalog(CatalogError::InvalidField {
                model_id: entry.id.clone(),
                field: "name".into(),
                reason: "must be a Gemini model name (letters, digits, `-`, `_`, `.`, `@`), \
                         e.g. `gemini-2.5-flash`"
                    .into(),
            }));
        }
        Ok(GeminiModel {
            entry: entry.clone(),
            name,
            options,
        })
    }

    /// The path of `method` (`generateContent`, `batchEmbedContents`, …) for this model.
    pub(crate) fn path(&self, method: &str) -> String {
        match &self.options.vertex {
            Some(place) => place.path(&self.name, method),
            None => format!("/v1beta/models/{}:{method}", self.name),
        }
    }

    /// The codec's options from the catalog entry.
    pub(crate) fn encode_options(&self) -> EncodeOptions {
        let o = &self.options;
        EncodeOptions {
            model: self.name.clone(),
            max_output_tokens: self.entry.output_limit(None),
            tool_choice: o.tool_choice.clone(),
            top_k: o.top_k,
            thinking: o.thinking.clone(),
            cached_content: o.cached_content.clone(),
            missing_signature: o.missing_signature,
        }
    }
}

pub(crate) fn is_model_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}
