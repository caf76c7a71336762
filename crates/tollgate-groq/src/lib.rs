//! The `groq` provider for tollgate: GroqCloud's OpenAI-compatible Chat Completions API
//! (`https://api.groq.com/openai/v1/chat/completions`), whole and streamed, with tools,
//! on `tollgate-openai`'s codec. The provider is a [`Preset`] plus Groq's differences.
//!
//! Link it with `use tollgate_groq as _;` and name it in the catalog:
//!
//! ```toml
//! [models.llama]
//! provider = "groq"
//! name = "llama-3.3-70b-versatile"
//! credential = "groq-main"          # the API key's id in the credential store
//! max_output_tokens = 32768
//! rpm = 30
//! tpm = 12000
//! ```
//!
//! Options (`[models.ID.options]`) are `tollgate-openai`'s: `base_url` (default
//! `https://api.groq.com/openai`), `tool_choice`, `output_limit_field` (default
//! `max_completion_tokens`), `stream_usage` (default on), `extra_body` (Groq's own
//! fields, e.g. `reasoning_format = "parsed"` or `service_tier = "flex"`).
//!
//! How each difference from OpenAI is handled:
//!
//! - **Stream usage** arrives in `x_groq.usage` of the last chunk (and, with
//!   `stream_options.include_usage`, in a usage chunk too): [`rewrite`] moves it to
//!   `usage`. A stream stopped early says why in `x_groq.error`: [`rewrite`] makes it an
//!   error chunk.
//! - **Rate-limit headers**: `x-ratelimit-*-requests` count requests per *day*, so only
//!   the per-minute token headers are read ([`GROQ_RATE_LIMITS`]).
//! - **Reasoning** text in `message.reasoning` (and `delta.reasoning`) is a thinking
//!   block (the codec's). `reasoning_effort` is sent as asked; the dialect (`reasoning_efforts`) refuses the
//!   efforts Groq has no word for (`minimal`, `xhigh`, `max`).
//! - **Not taken by Groq**: `logprobs` (so the decision client refuses Groq models),
//!   PDF documents (`file` parts: refused, the dialect's `file_parts: false`), embeddings (no embeddings
//!   models: refused), the Responses API (refused).
//! - **Errors**: OpenAI's body; a 498 `capacity_exceeded` (flex tier full) is
//!   overloaded, retried ([`read_groq_error`]).
//! - **Batches** (`Models::batch`, `tollgate run --via batch`): Groq's Batch API is
//!   OpenAI's under `/openai/v1` (files, then batches), so the preset names
//!   [`BatchApi::OpenAi`]; its caps are Groq's own ([`GROQ_BATCH_CAPS`]), and its list's
//!   `paging.next_cursor` and bare `errors` list are read by `tollgate-openai`.
//!
//! Sources and details: `docs/providers/groq.md`.
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Models};
//! use tollgate_groq as _;
//!
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.llama]
//!     provider = "groq"
//!     name = "llama-3.3-70b-versatile"
//!     credential = "groq-main"
//!     max_output_tokens = 32768
//!     rpm = 30
//!     tpm = 12000
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("groq-main", "key-from-your-secret-store"))
//!     .build()?;
//! # drop(models);
//! # Ok::<(), tollgate::Error>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate::provider::batch::BatchCaps;
use tollgate::provider::http::{RateLimitHeaders, Reset};
use tollgate::provider::{Dimension, ReasoningEffort, WireError};
use tollgate_openai::preset::{BatchApi, Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, OutputLimitField, Quirks};

/// The provider key.
pub const KEY: &str = "groq";

/// Groq's rate-limit headers that map to a per-minute limit: tokens per minute
/// (`x-ratelimit-{limit,remaining,reset}-tokens`, resets as Go durations). The
/// `-requests` headers count requests per day, which no tollgate dimension holds, so
/// they are not read.
pub const GROQ_RATE_LIMITS: &[RateLimitHeaders] = &[RateLimitHeaders {
    dimension: Dimension::Tokens,
    limit: "x-ratelimit-limit-tokens",
    remaining: "x-ratelimit-remaining-tokens",
    reset: "x-ratelimit-reset-tokens",
    reset_format: Reset::GoDuration,
}];

/// The `groq` provider.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: KEY,
    conventions_name: "groq",
    base_url: Some("https://api.groq.com/openai"),
    paths: Paths {
        chat: "/v1/chat/completions",
        embeddings: None,
        responses: None,
    },
    requires_credential: true,
    rate_limits: GROQ_RATE_LIMITS,
    quirks: Quirks {
        output_limit_field: OutputLimitField::MaxCompletionTokens,
        stream_usage: true,
        done_required: true,
        logprobs: false,
        tiktoken: false,
    },
    dialect: Dialect {
        rewrite: Some(rewrite),
        reasoning_efforts: Some(&[
            ReasoningEffort::None,
            ReasoningEffort::Low,
            ReasoningEffort::Medium,
            ReasoningEffort::High,
        ]),
        file_parts: false,
        error: read_groq_error,
        batch: Some(BatchApi::OpenAi),
        batch_caps: Some(GROQ_BATCH_CAPS),
        ..Dialect::OPENAI
    },
});

/// What one Groq batch may hold: 50,000 lines, and an input file of 100 MB, read as
/// 100,000,000 bytes. Groq's batch guide says 200 MB and its API reference
/// (`input_file_id`, in its SDKs) 100 MB: the smaller of both, in the smaller reading, is
/// taken. The catalog's `[models.ID.batch]` terms lower either.
pub const GROQ_BATCH_CAPS: BatchCaps = BatchCaps {
    max_requests: 50_000,
    max_bytes: 100_000_000,
};

tollgate::register_provider!(|| Arc::new(PROVIDER));

/// Rewrites a Groq answer or stream chunk into OpenAI's shape: `x_groq.usage` becomes
/// `usage` where that is missing or null, and a stream's `x_groq.error` (why it stopped
/// early) becomes an error chunk.
pub fn rewrite(value: &mut Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let Some(Value::Object(x_groq)) = object.get("x_groq") else {
        return;
    };
    let usage = x_groq.get("usage").filter(|u| u.is_object()).cloned();
    let error = x_groq
        .get("error")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
        .map(str::to_owned);
    if let Some(usage) = usage
        && object.get("usage").is_none_or(Value::is_null)
    {
        object.insert("usage".into(), usage);
    }
    if let Some(message) = error
        && object.get("error").is_none_or(Value::is_null)
    {
        object.insert(
            "error".into(),
            json!({"message": message, "type": "server_error"}),
        );
    }
}

/// Reads a Groq error answer: OpenAI's body ([`tollgate_openai::codec::read_error`]),
/// and a 498 (`capacity_exceeded`: the flex tier is full for now) is overloaded, so it
/// is retried after a backoff instead of rejected.
pub fn read_groq_error(status: u16, body: &[u8]) -> WireError {
    let mut wire = tollgate_openai::codec::read_error(status, body);
    if status == 498 || wire.code == "capacity_exceeded" {
        wire.overloaded = true;
    }
    wire
}

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
