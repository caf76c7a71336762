//! The `perplexity` provider for tollgate: Perplexity's Sonar API (`sonar`, `sonar-pro`,
//! `sonar-reasoning-pro`, `sonar-deep-research`), web-grounded chat in OpenAI's Chat
//! Completions wire format, whole or streamed, on `tollgate-openai`'s codec. Link it with
//! `use tollgate_perplexity as _;` and name it in the catalog; Perplexity's own search
//! options go in `extra_body`:
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Models};
//! use tollgate_perplexity as _; // links the provider: `perplexity` is now a known key
//!
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.sonar]
//!     provider = "perplexity"
//!     name = "sonar-pro"
//!     credential = "perplexity-main"   # the API key's id in the credential store
//!     max_output_tokens = 8000
//!     rpm = 50
//!     [models.sonar.options.extra_body]
//!     search_domain_filter = ["arxiv.org", "-reddit.com"]
//!     search_recency_filter = "month"
//!     web_search_options = { search_context_size = "high" }
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("perplexity-main", "key-from-your-store"))
//!     .build()?;
//! # drop(models);
//! # Ok::<(), tollgate::Error>(())
//! ```
//!
//! The options are `tollgate-openai`'s (`base_url`, default `https://api.perplexity.ai`;
//! `extra_body`; `stream_usage`). How Perplexity differs from OpenAI, and what this crate
//! does about it:
//!
//! - chat goes to `POST /chat/completions` (no `/v1`), and there are no embeddings
//!   (embeddings models are refused) and no Responses API;
//! - `citations`, `search_results`, `images` and `related_questions` (top-level answer
//!   fields, whole and streamed) are kept as one `Block::Native` of `perplexity`, which
//!   is never sent back;
//! - reasoning models write `<think>…</think>` before the answer in `content`: in a
//!   whole answer it becomes a thinking block ([`split_think`]); a stream's text keeps it
//!   as sent (a chunk rewrite sees one chunk, not where the section ends);
//! - function tools, `tool_choice` (`auto`, `none`, `required`) and `parallel_tool_calls`
//!   are sent as OpenAI's (Sonar's API reference lists them); a request forcing one
//!   named tool is refused, since Sonar's `tool_choice` cannot name one;
//! - refused, never dropped: `seed`, `response_format: json_object` (Sonar takes
//!   `json_schema` and `regex`), `verbosity`, and a reasoning effort other than
//!   `minimal`, `low`, `medium` or `high` ([`Dialect::reasoning_efforts`]);
//! - usage arrives in every stream chunk, cumulative; `stream_options` is not sent;
//! - rate-limit headers: none read (Perplexity documents none); errors are OpenAI's
//!   `{"error": {…}}` body;
//! - no decision models (`logprobs` is not documented for Sonar).
//!
//! Sources and details: `docs/providers/perplexity.md` in the repository.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::Value;
use tollgate::provider::{ReasoningEffort, Setting};
use tollgate_openai::preset::{Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, OutputLimitField, Quirks};

/// The provider key.
pub const KEY: &str = "perplexity";

/// The top-level answer fields kept as the answer's `perplexity` native block.
pub const KEPT_FIELDS: &[&str] = &["citations", "search_results", "images", "related_questions"];

/// The `perplexity` provider: Perplexity's Sonar API as an OpenAI-like preset.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: KEY,
    conventions_name: "perplexity",
    base_url: Some("https://api.perplexity.ai"),
    paths: Paths {
        chat: "/chat/completions",
        embeddings: None,
        responses: None,
    },
    requires_credential: true,
    rate_limits: &[],
    quirks: Quirks {
        output_limit_field: OutputLimitField::MaxTokens,
        stream_usage: false,
        done_required: false,
        logprobs: false,
        tiktoken: false,
    },
    dialect: Dialect {
        forced_tool: false,
        refuses: &[Setting::Seed, Setting::JsonObject, Setting::Verbosity],
        kept_fields: KEPT_FIELDS,
        rewrite: Some(split_think),
        reasoning_efforts: Some(&[
            ReasoningEffort::Minimal,
            ReasoningEffort::Low,
            ReasoningEffort::Medium,
            ReasoningEffort::High,
        ]),
        ..Dialect::OPENAI
    },
});

tollgate::register_provider!(|| Arc::new(PROVIDER));

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// The answer rewrite: a choice whose `message.content` opens with a closed
/// `<think>…</think>` section has the section's text moved to `message.reasoning_content`
/// (read as a thinking block) and the rest, its leading whitespace trimmed, left as the
/// content. Content without a closed section is left as it is; so are stream deltas.
pub fn split_think(answer: &mut Value) {
    let Some(choices) = answer.get_mut("choices").and_then(Value::as_array_mut) else {
        return;
    };
    for choice in choices {
        let Some(message) = choice.get_mut("message").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(content) = message.get("content").and_then(Value::as_str) else {
            continue;
        };
        let Some(rest) = content.trim_start().strip_prefix(THINK_OPEN) else {
            continue;
        };
        let Some((thinking, answer)) = rest.split_once(THINK_CLOSE) else {
            continue;
        };
        let (thinking, answer) = (thinking.trim().to_owned(), answer.trim_start().to_owned());
        message.insert("reasoning_content".into(), Value::String(thinking));
        message.insert("content".into(), Value::String(answer));
    }
}

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
