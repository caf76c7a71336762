//! The `deepseek` provider for tollgate: DeepSeek's API (`https://api.deepseek.com`),
//! chat whole and streamed with tools, its reasoning text read as thinking. DeepSeek has
//! no embeddings API. Its wire format is OpenAI's Chat Completions with a few
//! differences, so the provider is a [`Preset`] of `tollgate-openai`'s codec plus the
//! hooks below. Link it with `use tollgate_deepseek as _;` and name it in the catalog:
//!
//! ```toml
//! [models.deepseek]
//! provider = "deepseek"
//! name = "deepseek-chat"
//! credential = "deepseek-main"        # the API key's id in the credential store
//! max_output_tokens = 8192
//!
//! [models.reasoner]
//! provider = "deepseek"
//! name = "deepseek-reasoner"
//! credential = "deepseek-main"
//! max_output_tokens = 32768
//! [models.reasoner.options]
//! logprobs = false                    # deepseek-reasoner refuses logprobs
//! ```
//!
//! The options are `tollgate-openai`'s ([`OpenAiOptions`](tollgate_openai::OpenAiOptions)):
//! `base_url` (default `https://api.deepseek.com`), `tool_choice`, `output_limit_field`
//! (default `max_tokens`), `stream_usage`, `logprobs` and `extra_body` (DeepSeek's own
//! fields, e.g. `thinking = { type = "disabled" }`).
//!
//! How each difference from OpenAI's wire format is handled:
//!
//! - reasoning text (`reasoning_content`, whole and streamed) is read as a thinking
//!   block; it is sent back only on an assistant turn that called tools, where DeepSeek
//!   requires it, and never on another ([`request`]);
//! - usage: `prompt_cache_hit_tokens` are cache reads, taken out of `prompt_tokens`
//!   ([`rewrite`]);
//! - `finish_reason: "insufficient_system_resource"` (DeepSeek cut the answer short for
//!   lack of capacity) is a server error in a stream ([`rewrite`]) and a malformed answer
//!   naming it when whole; both are retried;
//! - errors: 402 (insufficient balance) is quota, never retried; 503 (server overloaded)
//!   is overloaded ([`read_error`]);
//! - `deepseek-reasoner` takes no `temperature` or `top_p` (they would have no effect):
//!   refused, and so are images and PDFs (its chat takes text only) ([`request`]);
//!   embeddings models are refused (no embeddings API);
//! - settings DeepSeek has no field for are refused ([`REFUSED`]);
//! - no rate-limit headers: DeepSeek documents none (it holds requests open instead, with
//!   blank lines before a whole answer and `: keep-alive` comments in a stream).
//!
//! See `docs/providers/deepseek.md` for the settings, errors and sources.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tollgate::provider::{Block, DocumentSource, Error};
use tollgate::provider::{LlmRequest, Result, Role, Setting, WireError};
use tollgate_openai::preset::{Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, Quirks};

/// The provider key.
pub const KEY: &str = "deepseek";

/// The model that always thinks, and takes no sampling settings.
pub const REASONER: &str = "deepseek-reasoner";

/// The request settings DeepSeek's chat has no field for, refused before sending: a
/// seed, `parallel_tool_calls`, a response shape (its JSON output is `json_object`
/// only), a tool's `strict` flag (only on its beta address) and `verbosity`.
pub const REFUSED: &[Setting] = &[
    Setting::Seed,
    Setting::ParallelToolCalls,
    Setting::Shape,
    Setting::LooseShape,
    Setting::ToolStrict,
    Setting::Verbosity,
];

/// The `deepseek` provider.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: KEY,
    conventions_name: "deepseek",
    base_url: Some("https://api.deepseek.com"),
    paths: Paths {
        chat: "/chat/completions",
        embeddings: None,
        responses: None,
    },
    requires_credential: true,
    rate_limits: &[],
    // `max_tokens`, usage asked for in streams, logprobs, no tiktoken: as compatible
    // servers; DeepSeek's streams end with `[DONE]`.
    quirks: Quirks {
        done_required: true,
        ..Preset::COMPATIBLE.quirks
    },
    dialect: Dialect {
        refuses: REFUSED,
        rewrite: Some(rewrite),
        request: Some(request),
        error: read_error,
        ..Dialect::OPENAI
    },
});

tollgate::register_provider!(|| Arc::new(PROVIDER));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;

/// The request hook: refuses images and PDFs (DeepSeek's chat takes text only), and
/// `temperature` and `top_p` for [`REASONER`]; and sends the
/// reasoning text of each assistant turn that called tools back as its
/// `reasoning_content` (DeepSeek requires it within a tool-calling turn; other turns'
/// reasoning is never sent).
pub fn request(request: &LlmRequest, body: &mut Map<String, Value>) -> Result<()> {
    refuse_media(request)?;
    if body.get("model").and_then(Value::as_str) == Some(REASONER) {
        let params = request.sampling_params();
        for (setting, set) in [
            ("temperature", params.temperature().is_some()),
            ("top_p", params.top_p().is_some()),
        ] {
            if set {
                return Err(Error::unsupported_setting(
                    format!("{setting} ({REASONER} ignores it: leave it unset)"),
                    KEY,
                    REASONER,
                ));
            }
        }
    }
    let turns = request
        .messages()
        .iter()
        .filter(|m| m.role == Role::Assistant);
    let sent = body
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant");
    for (turn, message) in turns.zip(sent) {
        let reasoning: String = turn
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Thinking { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if message.get("tool_calls").is_some() && !reasoning.is_empty() {
            message["reasoning_content"] = json!(reasoning);
        }
    }
    Ok(())
}

/// Refuses an image, or a PDF given by its bytes, naming the block: DeepSeek's chat
/// takes text parts only.
fn refuse_media(request: &LlmRequest) -> Result<()> {
    for (i, message) in request.messages().iter().enumerate() {
        for (j, block) in message.content.iter().enumerate() {
            let what = match block {
                Block::Image { .. } => "an image",
                Block::Document {
                    source: DocumentSource::Base64 { .. },
                    ..
                } => "a document given by its bytes",
                _ => continue,
            };
            return Err(Error::invalid_request(
                format!("messages[{i}].content[{j}]"),
                format!("is {what}, and DeepSeek's chat takes text only"),
            ));
        }
    }
    Ok(())
}

/// The answer and chunk rewrite, into OpenAI's shape: `usage.prompt_cache_hit_tokens`
/// becomes `usage.prompt_tokens_details.cached_tokens` (cache reads, which `prompt_tokens`
/// includes); a stream chunk finishing with `insufficient_system_resource` becomes a
/// server error.
pub fn rewrite(value: &mut Value) {
    if let Some(usage) = value.get_mut("usage").filter(|u| u.is_object())
        && let Some(hits) = usage.get("prompt_cache_hit_tokens").cloned()
    {
        usage["prompt_tokens_details"]["cached_tokens"] = hits;
    }
    let cut = value["choices"].as_array().is_some_and(|choices| {
        choices.iter().any(|c| {
            c.get("delta").is_some() && c["finish_reason"] == "insufficient_system_resource"
        })
    });
    if cut {
        *value = json!({ "error": {
            "type": "server_error",
            "code": "insufficient_system_resource",
            "message": "DeepSeek cut the answer short: insufficient system resource",
        }});
    }
}

/// Reads an error answer as OpenAI's codec does, and a 503 (DeepSeek's "server
/// overloaded") as overloaded. A 402 (insufficient balance) is quota by its status.
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    let mut error = tollgate_openai::codec::read_error(status, body);
    error.overloaded |= status == 503;
    error
}
