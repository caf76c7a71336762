//! The `together` provider for tollgate: Together AI's serverless API, OpenAI's Chat
//! Completions wire format (streamed or not, with tools) and embeddings, on
//! `tollgate-openai`'s codec. Link it with `use tollgate_together as _;` and name it in
//! the catalog:
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Models};
//! use tollgate_together as _; // links the provider: `together` is now a known key
//!
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.llama]
//!     provider = "together"
//!     name = "meta-llama/Llama-3.3-70B-Instruct-Turbo"
//!     credential = "together-main"   # the API key's id in the credential store
//!     max_output_tokens = 8192
//!     rpm = 600
//!     [models.llama.options]
//!     extra_body = { repetition_penalty = 1.1 }   # Together's own request fields
//!
//!     [embeddings]
//!     width = 1024
//!     [models.e5]
//!     provider = "together"
//!     kind = "embeddings"
//!     name = "intfloat/multilingual-e5-large-instruct"
//!     credential = "together-main"
//!     native_width = 1024
//!     rpm = 600
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("together-main", "key-from-your-store"))
//!     .build()?;
//! # drop(models);
//! # Ok::<(), tollgate::Error>(())
//! ```
//!
//! The options are `tollgate-openai`'s (`base_url`, default `https://api.together.xyz`;
//! `tool_choice`; `embedding_batch`; `stream_usage`; `extra_body`). How Together differs
//! from OpenAI, and what this crate does about it:
//!
//! - output limit: `max_tokens` (Together has no `max_completion_tokens`);
//! - `finish_reason: "eos"` (the model's end-of-sequence token) is a natural end;
//! - refused, never dropped: `parallel_tool_calls`, `verbosity`, a tool's `strict` flag
//!   (none is a parameter of Together's chat API), and a reasoning effort other than
//!   `low`, `medium` or `high` ([`reasoning_effort_levels`]);
//! - reasoning text arrives in `message.reasoning` (read as thinking by the codec);
//! - rate-limit headers: none read. Together's `x-ratelimit-*` and `x-tokenlimit-*`
//!   count per *second* (and its limits are dynamic), while tollgate's dimensions are
//!   per minute: read as `rpm`/`tpm` they would throttle 60 times too hard;
//! - errors: OpenAI's `{"error": {…}}` body; `402` (monthly spending limit) is
//!   `QuotaExhausted`, never retried; `429` (`dynamic_request_limited`,
//!   `dynamic_token_limited`) is rate limited; `503` is a server error, retried;
//! - no decision models: Together's `logprobs` is a count, not OpenAI's flag;
//! - no Responses API (`api = "responses"` is refused).
//!
//! Sources and details: `docs/providers/together.md` in the repository.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::{Map, Value};
use tollgate::Error;
use tollgate::provider::{LlmRequest, Result, Setting, StopReason};
use tollgate_openai::preset::{Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, OutputLimitField, Quirks};

/// The provider key.
pub const KEY: &str = "together";

/// The reasoning efforts Together's `reasoning_effort` takes.
pub const REASONING_EFFORTS: &[&str] = &["low", "medium", "high"];

/// The `together` provider: Together AI's API as an OpenAI-like preset.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: KEY,
    conventions_name: "together_ai",
    base_url: Some("https://api.together.xyz"),
    paths: Paths {
        chat: "/v1/chat/completions",
        embeddings: Some("/v1/embeddings"),
        responses: None,
    },
    requires_credential: true,
    rate_limits: &[],
    quirks: Quirks {
        output_limit_field: OutputLimitField::MaxTokens,
        stream_usage: true,
        done_required: true,
        logprobs: false,
        tiktoken: false,
    },
    dialect: Dialect {
        refuses: &[
            Setting::ParallelToolCalls,
            Setting::Verbosity,
            Setting::ToolStrict,
        ],
        finish_reasons: &[("eos", StopReason::EndTurn)],
        request: Some(reasoning_effort_levels),
        ..Dialect::OPENAI
    },
});

tollgate::register_provider!(|| Arc::new(PROVIDER));

/// The request hook: refuses a `reasoning_effort` Together does not take (`none`,
/// `minimal`, `xhigh`, `max`), naming the effort and the model, before anything is sent.
pub fn reasoning_effort_levels(_: &LlmRequest, body: &mut Map<String, Value>) -> Result<()> {
    let Some(effort) = body.get("reasoning_effort").and_then(Value::as_str) else {
        return Ok(());
    };
    if REASONING_EFFORTS.contains(&effort) {
        return Ok(());
    }
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(Error::unsupported_setting(
        format!("reasoning effort `{effort}` (Together takes low, medium or high)"),
        KEY,
        model,
    ))
}

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
