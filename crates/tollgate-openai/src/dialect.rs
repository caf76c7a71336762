//! The definitions behind the public [`preset`](crate::preset) module: an OpenAI-like
//! API's [`Preset`], its wire [`Dialect`], its behaviour's [`Quirks`] (kept below the
//! transports, options and provider that use them, which the module re-exports).

use serde_json::{Map, Value};
use tollgate::provider::batch::BatchCaps;
use tollgate::provider::http::{OPENAI_RATE_LIMITS, RateLimitHeaders};
use tollgate::provider::{LlmRequest, ReasoningEffort, Result, Setting, StopReason, WireError};

/// A dialect's last word on a request body: adds or changes fields, or refuses the
/// request (an error, before anything is sent).
pub type RequestHook = fn(&LlmRequest, &mut Map<String, Value>) -> Result<()>;

/// How an OpenAI-like API's wire format differs from OpenAI's Chat Completions: the
/// codec's hooks. Each field has OpenAI's behaviour in [`Dialect::OPENAI`]; a preset
/// changes only what differs (`..Dialect::OPENAI`).
#[derive(Debug, Clone, Copy)]
pub struct Dialect {
    /// The provider key the codec names in its errors and marks its thinking blocks and
    /// native blocks with.
    pub provider: &'static str,
    /// The word `tool_choice` takes for "call some tool": `required` (OpenAI), `any`
    /// (Mistral).
    pub required_tool_choice: &'static str,
    /// Whether `tool_choice` can force one named tool; where it cannot, a request that
    /// forces one is refused before it is sent.
    pub forced_tool: bool,
    /// Request settings this API cannot take although OpenAI's can: refused before
    /// anything is sent, never dropped (e.g. tools, for an API without them).
    pub refuses: &'static [Setting],
    /// The reasoning efforts the API takes (`reasoning_effort`), where it takes fewer
    /// than OpenAI's; a request asking for another is refused before it is sent, naming
    /// the ones it takes. `None`: every effort is sent as asked.
    pub reasoning_efforts: Option<&'static [ReasoningEffort]>,
    /// Whether a document given by its bytes (a PDF) can be sent, as OpenAI's `file`
    /// content part; where not, such a request is refused naming the block (a document
    /// given as text is sent as text either way).
    pub file_parts: bool,
    /// Finish reasons besides OpenAI's (`stop`, `length`, `tool_calls`,
    /// `content_filter`), and what each means: Mistral's `model_length` is
    /// [`StopReason::MaxTokens`].
    pub finish_reasons: &'static [(&'static str, StopReason)],
    /// Top-level answer fields kept in the answer as one `Block::Native` of
    /// [`Dialect::provider`] (its value an object of these fields): Perplexity's
    /// `citations` and `search_results`. The block is never sent back.
    pub kept_fields: &'static [&'static str],
    /// Names the categories a content filter filtered in one answer or stream chunk (its
    /// raw JSON): a `content_filter` finish is then a refusal of category
    /// `content_filter:` and their names joined by `,` (Azure's
    /// `choices[].content_filter_results`: `content_filter:hate,violence`). `None`
    /// (OpenAI): the category is `content_filter`.
    pub filtered: Option<fn(&Value) -> Vec<String>>,
    /// Rewrites a whole answer, or one stream chunk, into OpenAI's shape before it is
    /// decoded: usage in another place or under other names, a renamed field.
    pub rewrite: Option<fn(&mut Value)>,
    /// Adds or changes request fields after the body is encoded (a field this API
    /// takes in its own form). An error refuses the request before it is sent.
    pub request: Option<RequestHook>,
    /// Reads an error answer (status and body) into a [`WireError`].
    pub error: fn(u16, &[u8]) -> WireError,
    /// The API's batch API, which its chat models' batch transport speaks
    /// (`ProviderTransports::batch`); `None`: batches are refused as unsupported. `None`
    /// in [`Dialect::OPENAI`], so that a preset built from it claims no batch API unless
    /// it names one; [`Preset::OPENAI`] names [`BatchApi::OpenAi`].
    pub batch: Option<BatchApi>,
    /// What one batch may hold where this provider's documents differ from its batch
    /// API's own caps (Groq's input file of 100 MB where OpenAI's is 200 MB); `None`:
    /// the API's ([`BatchApi::caps`]). The catalog's `[models.ID.batch]` terms lower
    /// either.
    pub batch_caps: Option<BatchCaps>,
}

/// A batch API of an OpenAI-like API: requests uploaded as a JSONL file, run within a
/// day at about half the price, their answers collected from a results file (each an
/// answer body as the live API returns it, decoded by the same codec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchApi {
    /// OpenAI's Batch API: the file uploaded to `POST /v1/files` (`purpose=batch`), one
    /// `{custom_id, method, url, body}` a line; batches created, read, listed and
    /// cancelled at `/v1/batches` (also Groq's shape under its `/openai` base URL, whose
    /// list pages by `paging.next_cursor` and whose `errors` are a bare list: both read).
    OpenAi,
    /// Mistral's batch jobs: the file uploaded to `POST /v1/files` (`purpose=batch`),
    /// one `{custom_id, body}` a line; jobs, which name the model, at `/v1/batch/jobs`.
    MistralJobs,
}

impl Dialect {
    /// OpenAI's own wire format.
    pub const OPENAI: Dialect = Dialect {
        provider: "openai",
        required_tool_choice: "required",
        forced_tool: true,
        refuses: &[],
        reasoning_efforts: None,
        file_parts: true,
        finish_reasons: &[],
        kept_fields: &[],
        filtered: None,
        rewrite: None,
        request: None,
        error: crate::codec::read_error,
        batch: None,
        batch_caps: None,
    };

    /// The stop reason of a wire `finish_reason`: this dialect's own, else OpenAI's.
    pub fn stop_reason(&self, wire: &str) -> Option<StopReason> {
        self.finish_reasons
            .iter()
            .find(|(name, _)| *name == wire)
            .map(|(_, reason)| *reason)
            .or_else(|| crate::codec::stop_reason(wire))
    }

    /// Whether answers are read through a JSON value first (a rewrite, kept fields or a
    /// filter's categories);
    /// otherwise they are decoded directly.
    pub(crate) fn reads_raw(&self) -> bool {
        self.rewrite.is_some() || !self.kept_fields.is_empty() || self.filtered.is_some()
    }

    /// The refusal category of a `content_filter` finish whose filter named `filtered`
    /// (none named: `content_filter`).
    pub(crate) fn filter_category(filtered: &[String]) -> String {
        if filtered.is_empty() {
            "content_filter".to_owned()
        } else {
            format!("content_filter:{}", filtered.join(","))
        }
    }

    /// The kept fields of `answer`, as the native block's value (`None` when it has
    /// none of them).
    pub(crate) fn kept(&self, answer: &Value) -> Option<Value> {
        let kept: Map<String, Value> = self
            .kept_fields
            .iter()
            .filter_map(|name| {
                let value = answer.get(*name).filter(|v| !v.is_null())?;
                Some(((*name).to_owned(), value.clone()))
            })
            .collect();
        (!kept.is_empty()).then_some(Value::Object(kept))
    }
}

impl Default for Dialect {
    /// [`Dialect::OPENAI`].
    fn default() -> Self {
        Dialect::OPENAI
    }
}

/// Where an OpenAI-like API takes each kind of call, after its base URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paths {
    /// Chat Completions (`/v1/chat/completions`).
    pub chat: &'static str,
    /// Embeddings (`/v1/embeddings`); `None`: the API has none, and embeddings models
    /// of the key are refused.
    pub embeddings: Option<&'static str>,
    /// The Responses API (`/v1/responses`); `None`: `api = "responses"` is refused.
    pub responses: Option<&'static str>,
}

/// An OpenAI-like API as a provider: its key, address, paths, rate-limit headers, what
/// differs in its behaviour ([`Quirks`]) and in its wire format ([`Dialect`]). A preset
/// is a constant; [`OpenAiProvider::new`](crate::OpenAiProvider::new) makes it a
/// provider to register.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The provider key catalog entries name.
    pub key: &'static str,
    /// The name OpenTelemetry's conventions give the API (`gen_ai.provider.name`):
    /// `openai` when the server behind it is unknown.
    pub conventions_name: &'static str,
    /// The API address without the paths; `None`: the `base_url` option is required.
    pub base_url: Option<&'static str>,
    /// Where each kind of call goes.
    pub paths: Paths,
    /// Whether its models must name a credential (sent as a bearer token).
    pub requires_credential: bool,
    /// The rate-limit headers its answers carry.
    pub rate_limits: &'static [RateLimitHeaders],
    /// Its behaviour: output-limit field, stream usage, `[DONE]`, logprobs, tokenizer.
    pub quirks: Quirks,
    /// Its wire format's differences.
    pub dialect: Dialect,
}

impl Preset {
    /// OpenAI's own API (`openai`).
    pub const OPENAI: Preset = Preset {
        key: crate::KEY,
        conventions_name: "openai",
        base_url: Some(crate::DEFAULT_BASE_URL),
        paths: Paths {
            chat: "/v1/chat/completions",
            embeddings: Some("/v1/embeddings"),
            responses: Some("/v1/responses"),
        },
        requires_credential: true,
        rate_limits: OPENAI_RATE_LIMITS,
        quirks: Quirks {
            output_limit_field: OutputLimitField::MaxCompletionTokens,
            stream_usage: true,
            done_required: true,
            logprobs: true,
            tiktoken: true,
        },
        dialect: Dialect {
            batch: Some(BatchApi::OpenAi),
            ..Dialect::OPENAI
        },
    };

    /// An OpenAI-compatible server (`openai-compatible`: vLLM, Ollama, llama.cpp, …):
    /// `base_url` required, no credential required, `max_tokens`, `[DONE]` optional,
    /// tollgate's conservative token estimate. The usual starting point of a preset.
    pub const COMPATIBLE: Preset = Preset {
        key: crate::COMPATIBLE_KEY,
        base_url: None,
        requires_credential: false,
        quirks: Quirks {
            output_limit_field: OutputLimitField::MaxTokens,
            stream_usage: true,
            done_required: false,
            logprobs: true,
            tiktoken: false,
        },
        dialect: Dialect {
            provider: crate::COMPATIBLE_KEY,
            ..Dialect::OPENAI
        },
        ..Preset::OPENAI
    };

    /// [`Preset::OPENAI`] for `openai`, else [`Preset::COMPATIBLE`].
    pub(crate) fn for_key(key: &str) -> Preset {
        if key == crate::KEY {
            Preset::OPENAI
        } else {
            Preset::COMPATIBLE
        }
    }
}

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

/// What differs in behaviour between OpenAI and a compatible server, in one place (the
/// wire format's differences are a [`Dialect`]). Each
/// [`Preset`] holds its own; the two keys of this crate:
///
/// | quirk | `openai` | `openai-compatible` | option |
/// |---|---|---|---|
/// | output-limit field | `max_completion_tokens` | `max_tokens` | `output_limit_field` |
/// | `stream_options.include_usage` sent | yes | yes | `stream_usage` |
/// | stream must end with `data: [DONE]` | yes | no (a finish reason and the end of the body suffice) | — |
/// | server returns logprobs (decision client) | yes | yes | `logprobs` |
/// | input estimated with | tiktoken for the model name (a small input's bytes, an upper bound, until the table is loaded) | tollgate's conservative estimator | — |
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
    /// The defaults for provider `key` of this crate (`openai` or `openai-compatible`).
    pub fn for_key(key: &str) -> Self {
        Preset::for_key(key).quirks
    }
}
