//! The `xai` provider for tollgate: xAI's OpenAI-compatible Chat Completions API for
//! Grok models (`https://api.x.ai/v1/chat/completions`), whole and streamed, with tools,
//! on `tollgate-openai`'s codec. The provider is a [`Preset`] plus xAI's differences.
//!
//! Link it with `use tollgate_xai as _;` and name it in the catalog:
//!
//! ```toml
//! [models.grok]
//! provider = "xai"
//! name = "grok-3-mini"
//! credential = "xai-main"           # the API key's id in the credential store
//! max_output_tokens = 32768
//! rpm = 480
//! tpm = 2000000
//! ```
//!
//! Options (`[models.ID.options]`) are `tollgate-openai`'s: `base_url` (default
//! `https://api.x.ai`), `tool_choice`, `output_limit_field` (default
//! `max_completion_tokens`), `stream_usage` (default on), `extra_body` (xAI's own
//! fields, e.g. `search_parameters`).
//!
//! How each difference from OpenAI is handled:
//!
//! - **Reasoning** text in `message.reasoning_content` (grok-3-mini only) is a thinking
//!   block (the codec's). `reasoning_effort` takes `low` or `high` (grok-3-mini only):
//!   the dialect (`reasoning_efforts`) refuses every other level.
//! - **Usage**: xAI counts `completion_tokens_details.reasoning_tokens` apart from
//!   `completion_tokens` (`total_tokens` is the sum of the three); [`rewrite`] adds them
//!   to the output, which is what is billed. Cached prompt tokens are OpenAI's
//!   (`prompt_tokens_details.cached_tokens`, inside `prompt_tokens`).
//! - **Errors**: the API answers `{"code": "…", "error": "…"}` (a gRPC status text and a
//!   message) as well as OpenAI's `{"error": {…}}`: [`read_xai_error`] reads both.
//! - **Not taken**: `logprobs` for the decision client (`top_logprobs` 20 is above xAI's
//!   range), PDF documents (`file` parts: refused), embeddings (no embeddings models:
//!   refused), the Responses API (refused). xAI documents no rate-limit headers: none
//!   are read.
//!
//! Sources and details: `docs/providers/xai.md`.
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Models};
//! use tollgate_xai as _;
//!
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.grok]
//!     provider = "xai"
//!     name = "grok-3-mini"
//!     credential = "xai-main"
//!     max_output_tokens = 32768
//!     rpm = 480
//!     tpm = 2000000
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("xai-main", "key-from-your-secret-store"))
//!     .build()?;
//! # drop(models);
//! # Ok::<(), tollgate::Error>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tollgate::provider::{ReasoningEffort, WireError};
use tollgate_openai::codec::read_error;
use tollgate_openai::preset::{Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, OutputLimitField, Quirks};

/// The provider key.
pub const KEY: &str = "xai";

/// The `xai` provider.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: KEY,
    conventions_name: "x_ai",
    base_url: Some("https://api.x.ai"),
    paths: Paths {
        chat: "/v1/chat/completions",
        embeddings: None,
        responses: None,
    },
    requires_credential: true,
    rate_limits: &[],
    quirks: Quirks {
        output_limit_field: OutputLimitField::MaxCompletionTokens,
        stream_usage: true,
        done_required: true,
        logprobs: false,
        tiktoken: false,
    },
    dialect: Dialect {
        rewrite: Some(rewrite),
        reasoning_efforts: Some(&[ReasoningEffort::Low, ReasoningEffort::High]),
        file_parts: false,
        error: read_xai_error,
        ..Dialect::OPENAI
    },
});

tollgate::register_provider!(|| Arc::new(PROVIDER));

fn count(usage: &Map<String, Value>, field: &str) -> Option<u64> {
    usage.get(field).and_then(Value::as_u64)
}

/// Rewrites an xAI answer or stream chunk into OpenAI's shape: reasoning tokens, which
/// xAI counts apart from `completion_tokens`, are added to them (the output billed),
/// unless `total_tokens` shows they are already in.
pub fn rewrite(value: &mut Value) {
    let Some(Value::Object(usage)) = value.get_mut("usage") else {
        return;
    };
    let reasoning = usage
        .get("completion_tokens_details")
        .and_then(|d| d.get("reasoning_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let Some(completion) = count(usage, "completion_tokens") else {
        return;
    };
    let prompt = count(usage, "prompt_tokens").unwrap_or(0);
    let apart = match count(usage, "total_tokens") {
        Some(total) => total == prompt + completion + reasoning,
        None => true,
    };
    if reasoning > 0 && apart {
        usage.insert("completion_tokens".into(), json!(completion + reasoning));
    }
}

/// Reads an xAI error answer: `{"code": "…", "error": "…"}` (the code a gRPC status
/// text such as `Some requested entity was not found`, the error the message) as
/// `error.code` and `error.message`, or else OpenAI's body
/// ([`tollgate_openai::codec::read_error`]); classified by status and code.
pub fn read_xai_error(status: u16, body: &[u8]) -> WireError {
    if let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(body)
        && let (Some(Value::String(code)), Some(Value::String(message))) =
            (object.get("code"), object.get("error"))
    {
        let nested = json!({"error": {"message": message, "code": code}});
        return read_error(status, nested.to_string().as_bytes());
    }
    read_error(status, body)
}

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
