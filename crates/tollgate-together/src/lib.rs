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
//!   `low`, `medium` or `high` ([`Dialect::reasoning_efforts`]);
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

use tollgate::provider::{ReasoningEffort, Setting, StopReason};
use tollgate_openai::preset::{Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, OutputLimitField, Quirks};

/// The provider key.
pub const KEY: &str = "together";

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
        reasoning_efforts: Some(&[
            ReasoningEffort::Low,
            ReasoningEffort::Medium,
            ReasoningEffort::High,
        ]),
        ..Dialect::OPENAI
    },
});

tollgate::register_provider!(|| Arc::new(PROVIDER));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
