//! The `mistral` provider for tollgate: Mistral AI's La Plateforme API
//! (`https://api.mistral.ai`), chat whole and streamed with tools, and embeddings
//! (`mistral-embed`). Its wire format is OpenAI's Chat Completions with a few
//! differences, so the provider is a [`Preset`] of `tollgate-openai`'s codec plus the
//! hooks below. Link it with `use tollgate_mistral as _;` and name it in the catalog:
//!
//! ```toml
//! [models.mistral]
//! provider = "mistral"
//! name = "mistral-large-latest"
//! credential = "mistral-main"         # the API key's id in the credential store
//! max_output_tokens = 8192
//! rpm = 60
//! [models.mistral.options]
//! extra_body = { safe_prompt = true } # optional: Mistral's safety prompt
//!
//! [embeddings]
//! width = 1024                        # mistral-embed's own width
//!
//! [models.embed]
//! provider = "mistral"
//! kind = "embeddings"
//! name = "mistral-embed"
//! credential = "mistral-main"
//! native_width = 1024
//! ```
//!
//! The options are `tollgate-openai`'s ([`OpenAiOptions`](tollgate_openai::OpenAiOptions)):
//! `base_url` (default `https://api.mistral.ai`), `tool_choice` (`auto`, `any`, `none`
//! or `tool:NAME`), `embedding_batch`, `output_limit_field` (default `max_tokens`),
//! `stream_usage` (default `false`: Mistral rejects `stream_options` and sends the usage
//! in its last chunk anyway) and `extra_body` (Mistral's own fields, e.g. `safe_prompt`).
//!
//! How each difference from OpenAI's wire format is handled:
//!
//! - "call some tool" is `tool_choice: "any"` ([`Dialect::required_tool_choice`]);
//! - the seed is sent as `random_seed`, and tool-call ids of other providers as nine
//!   letters or digits, the only ids Mistral takes ([`request`], [`tool_call_id`]);
//! - `finish_reason: "model_length"` (the model's context window is full) is
//!   [`StopReason::ContextWindowExceeded`]; `"error"` in a stream is a server error
//!   ([`rewrite`]); in a whole answer it is a malformed answer naming it (both retried);
//! - answer content given as a list of chunks (Magistral's `thinking` and `text`
//!   chunks) is read as reasoning text and text ([`rewrite`]);
//! - errors come as top-level `{"object": "error", "message", "type", "code"}`
//!   (read by [`tollgate_openai::codec::read_error`]; in a stream, by [`rewrite`]);
//! - rate limits: `x-ratelimit-{limit,remaining}-req-minute` and
//!   `x-ratelimit-{limit,remaining}-tokens-minute` ([`RATE_LIMITS`]);
//! - settings Mistral has no field for (`verbosity`) are refused, and so is a PDF given
//!   by its bytes ([`request`]); decisions are refused (Mistral returns no logprobs);
//! - batches go through Mistral's batch jobs ([`BatchApi::MistralJobs`]: the JSONL file
//!   uploaded to `/v1/files`, a job at `/v1/batch/jobs` naming the model, its results
//!   read from its output and error files), each line's body the live request's.
//!
//! See `docs/providers/mistral.md` for the settings, errors and sources.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tollgate::provider::http::{RateLimitHeaders, Reset};
use tollgate::provider::{Dimension, LlmRequest, Result, Setting, StopReason};
use tollgate_openai::preset::{BatchApi, Dialect, Paths, Preset};
use tollgate_openai::{OpenAiProvider, Quirks};

/// The provider key.
pub const KEY: &str = "mistral";

/// Mistral's per-minute rate-limit headers: requests and tokens (limit and what is
/// left; no reset header is documented, so none is read). The monthly token headers
/// (`x-ratelimit-*-tokens-month`) are left unread: no per-minute dimension holds them.
pub const RATE_LIMITS: &[RateLimitHeaders] = &[
    RateLimitHeaders {
        dimension: Dimension::Requests,
        limit: "x-ratelimit-limit-req-minute",
        remaining: "x-ratelimit-remaining-req-minute",
        reset: "",
        reset_format: Reset::Seconds,
    },
    RateLimitHeaders {
        dimension: Dimension::Tokens,
        limit: "x-ratelimit-limit-tokens-minute",
        remaining: "x-ratelimit-remaining-tokens-minute",
        reset: "",
        reset_format: Reset::Seconds,
    },
];

/// The `mistral` provider.
pub const PROVIDER: OpenAiProvider = OpenAiProvider::new(Preset {
    key: KEY,
    conventions_name: "mistral_ai",
    base_url: Some("https://api.mistral.ai"),
    paths: Paths {
        chat: "/v1/chat/completions",
        embeddings: Some("/v1/embeddings"),
        responses: None,
    },
    requires_credential: true,
    rate_limits: RATE_LIMITS,
    // `max_tokens` and no tiktoken, as compatible servers; Mistral rejects
    // `stream_options` (its last chunk carries the usage anyway), ends streams with
    // `[DONE]` and returns no logprobs.
    quirks: Quirks {
        stream_usage: false,
        done_required: true,
        logprobs: false,
        ..Preset::COMPATIBLE.quirks
    },
    dialect: Dialect {
        required_tool_choice: "any",
        refuses: &[Setting::Verbosity],
        finish_reasons: &[("model_length", StopReason::ContextWindowExceeded)],
        file_parts: false,
        rewrite: Some(rewrite),
        request: Some(request),
        batch: Some(BatchApi::MistralJobs),
        ..Dialect::OPENAI
    },
});

tollgate::register_provider!(|| Arc::new(PROVIDER));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;

/// The request hook: the seed goes as Mistral's `random_seed`; tool-call ids go as
/// Mistral takes them ([`tool_call_id`]). (A PDF given by its bytes is refused by the
/// dialect's `file_parts: false`: Mistral's chat takes documents by URL or uploaded file
/// id, not OpenAI's `file_data` part.)
pub fn request(_: &LlmRequest, body: &mut Map<String, Value>) -> Result<()> {
    if let Some(seed) = body.remove("seed") {
        body.insert("random_seed".into(), seed);
    }
    let messages = body.get_mut("messages").and_then(Value::as_array_mut);
    for message in messages.into_iter().flatten() {
        let calls = message.get_mut("tool_calls").and_then(Value::as_array_mut);
        for id in calls.into_iter().flatten().filter_map(|c| c.get_mut("id")) {
            *id = json!(tool_call_id(id.as_str().unwrap_or_default()));
        }
        if let Some(id) = message.get_mut("tool_call_id") {
            *id = json!(tool_call_id(id.as_str().unwrap_or_default()));
        }
    }
    Ok(())
}

/// A tool-call id as Mistral takes them, nine ASCII letters or digits: kept when it is
/// one (Mistral's own), else nine base-62 digits of its FNV-1a hash, so that another
/// provider's id (`call_…`) maps to the same id in the call and in its result.
pub fn tool_call_id(id: &str) -> String {
    if id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return id.to_owned();
    }
    const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (0..9)
        .map(|_| {
            let digit = DIGITS[(hash % 62) as usize];
            hash /= 62;
            char::from(digit)
        })
        .collect()
}

/// The answer and chunk rewrite, into OpenAI's shape: a top-level error object becomes
/// `{"error": {...}}`; content given as a list of chunks becomes the text and
/// `reasoning_content` (from `thinking` chunks); a stream chunk finishing with `error`
/// becomes a server error.
pub fn rewrite(value: &mut Value) {
    if value.get("object").and_then(Value::as_str) == Some("error") {
        *value = json!({ "error": value.take() });
        return;
    }
    let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) else {
        return;
    };
    let mut failed = false;
    for choice in choices.iter_mut() {
        for key in ["message", "delta"] {
            if let Some(message) = choice.get_mut(key) {
                flatten_content(message);
            }
        }
        failed |= choice.get("delta").is_some()
            && choice.get("finish_reason").and_then(Value::as_str) == Some("error");
    }
    if failed {
        *value = json!({ "error": {
            "type": "server_error",
            "code": "finish_reason_error",
            "message": "Mistral ended the stream with finish_reason `error`",
        }});
    }
}

/// A message's chunk list as `content` text and `reasoning_content` (the text of its
/// `thinking` chunks); chunks of other types (references) carry no text and are left out.
fn flatten_content(message: &mut Value) {
    let Some(chunks) = message.get("content").and_then(Value::as_array) else {
        return;
    };
    let (mut text, mut thinking) = (String::new(), String::new());
    for chunk in chunks {
        match chunk.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(chunk["text"].as_str().unwrap_or_default()),
            Some("thinking") => {
                for part in chunk["thinking"].as_array().into_iter().flatten() {
                    thinking.push_str(part["text"].as_str().unwrap_or_default());
                }
            }
            _ => {}
        }
    }
    message["content"] = json!(text);
    if !thinking.is_empty() {
        message["reasoning_content"] = json!(thinking);
    }
}
