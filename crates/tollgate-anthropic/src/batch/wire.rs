//! The Message Batches wire format, no I/O: a request line and the create body, the
//! batch object (`processing_status`, `request_counts`, `results_url`), where its results
//! are read from, and the results' JSONL lines into [`BatchOutcome`]s.

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::batch::{BatchCounts, BatchOutcome, BatchPhase, BatchStatus};
use tollgate::provider::{Error, Result, keep_raw, parse_json, undecodable};

use crate::codec;

/// Requests in one batch, at most (Anthropic's documented cap).
pub(super) const MAX_REQUESTS: usize = 100_000;

/// A create request's body, at most: Anthropic's 256 MB per batch.
pub(super) const MAX_CREATE_BYTES: u64 = 256_000_000;

/// The bytes of encoded lines one batch may hold: [`MAX_CREATE_BYTES`] less what the
/// create body adds around them (`{"requests":[`, `]}` and a comma between lines).
pub(super) const MAX_LINE_BYTES: u64 = MAX_CREATE_BYTES - MAX_REQUESTS as u64 - 16;

/// The longest `custom_id` Anthropic takes.
const MAX_CUSTOM_ID: usize = 64;

/// Refuses a `custom_id` Anthropic would refuse (`^[a-zA-Z0-9_-]{1,64}$`), naming the
/// field and the rule, so that the line fails alone instead of the whole batch.
pub(super) fn check_custom_id(id: &str) -> Result<()> {
    if id.len() <= MAX_CUSTOM_ID && is_token(id) {
        Ok(())
    } else {
        Err(Error::invalid_request(
            "custom_id",
            format!(
                "Anthropic's Message Batches take 1 to {MAX_CUSTOM_ID} letters, digits, `_` \
                 or `-` (^[a-zA-Z0-9_-]{{1,64}}$); {} is not",
                shown(id)
            ),
        ))
    }
}

/// Whether `id` is one or more letters, digits, `_` and `-`.
fn is_token(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// `id` as an error names it: whole when short, else its first characters.
fn shown(id: &str) -> String {
    if id.chars().count() <= MAX_CUSTOM_ID + 8 {
        format!("{id:?}")
    } else {
        let start: String = id.chars().take(MAX_CUSTOM_ID).collect();
        format!("{start:?}… ({} bytes)", id.len())
    }
}

/// Refuses a batch id that would not stay one path segment of the batch's address (it
/// comes from a stored handle, which anything may have written).
pub(super) fn check_batch_id(id: &str) -> Result<()> {
    if is_token(id) {
        Ok(())
    } else {
        Err(Error::invalid_request(
            "batch id",
            format!(
                "an Anthropic batch id is letters, digits, `_` and `-` (`msgbatch_…`); {} is not",
                shown(id)
            ),
        ))
    }
}

/// One request of a batch: `{"custom_id", "params"}`, `params` the live call's body.
pub(super) fn line(custom_id: &str, params: Value) -> Result<Vec<u8>> {
    serde_json::to_vec(&json!({"custom_id": custom_id, "params": params}))
        .map_err(|e| Error::invalid_request("params", format!("does not serialize: {e}")))
}

/// The create body, `{"requests": [line, …]}`, of lines [`line()`] wrote.
pub(super) fn create_body(lines: &[Vec<u8>]) -> Result<Value> {
    let mut requests = Vec::with_capacity(lines.len());
    for (i, bytes) in lines.iter().enumerate() {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| {
            Error::invalid_request(
                format!("lines[{i}]"),
                format!("is not a line the batch's encode wrote (not JSON: {e})"),
            )
        })?;
        requests.push(value);
    }
    Ok(json!({ "requests": requests }))
}

/// A Message Batch object, as create, retrieve and cancel answer it.
#[derive(Debug, Deserialize)]
pub(super) struct WireBatch {
    /// `msgbatch_…`.
    pub(super) id: String,
    processing_status: String,
    #[serde(default)]
    request_counts: WireCounts,
    /// Where the results are, once the batch ended (`null` before): absolute in
    /// Anthropic's API, a path in llmock's.
    #[serde(default)]
    pub(super) results_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireCounts {
    #[serde(default)]
    processing: u64,
    #[serde(default)]
    succeeded: u64,
    #[serde(default)]
    errored: u64,
    #[serde(default)]
    canceled: u64,
    #[serde(default)]
    expired: u64,
}

/// Reads a batch object (a body that does not read is `Malformed`, keeping its start).
pub(super) fn decode_batch(body: &[u8]) -> Result<WireBatch> {
    parse_json(body)
}

impl WireBatch {
    /// Its phase (`in_progress` Running, `canceling` Cancelling, `ended` Ended) and
    /// counts. A Message Batch never fails as a whole (a request the API refuses fails
    /// the create call, or its own line), so `failure` is always `None`.
    pub(super) fn status(&self) -> Result<BatchStatus> {
        Ok(BatchStatus {
            phase: self.phase()?,
            counts: self.counts(),
            failure: None,
        })
    }

    pub(super) fn phase(&self) -> Result<BatchPhase> {
        match self.processing_status.as_str() {
            "in_progress" => Ok(BatchPhase::Running),
            "canceling" => Ok(BatchPhase::Cancelling),
            "ended" => Ok(BatchPhase::Ended),
            other => Err(undecodable(format!(
                "a message batch with an unknown processing_status `{other}`"
            ))),
        }
    }

    fn counts(&self) -> BatchCounts {
        let c = &self.request_counts;
        let failed = c.errored + c.canceled + c.expired;
        BatchCounts {
            total: c.processing + c.succeeded + failed,
            succeeded: c.succeeded,
            failed,
        }
    }
}

/// The path, under the configured base URL, to read batch `id`'s results from: its
/// `results_url` when that names an address under the base URL, absolute (Anthropic's
/// `https://api.anthropic.com/v1/…`) or a path from the base URL's origin (llmock's
/// `/anthropic/v1/…`); else `/v1/messages/batches/{id}/results`, where Anthropic serves
/// them. The results are read from the base URL and this path, so the key goes to the
/// configured address alone, whatever address a batch object names.
pub(super) fn results_path(base_url: &str, results_url: Option<&str>, id: &str) -> String {
    let fallback = format!("/v1/messages/batches/{id}/results");
    let Some(given) = results_url else {
        return fallback;
    };
    let under = if given.starts_with('/') && !given.starts_with("//") {
        given.strip_prefix(base_path(base_url))
    } else {
        given.strip_prefix(base_url)
    };
    match under {
        Some(rest) if rest.starts_with('/') => rest.to_owned(),
        _ => {
            tracing::debug!(
                "anthropic: a batch's results_url is not under the configured base URL; reading the results from the base URL"
            );
            fallback
        }
    }
}

/// The path part of `base_url` (`/anthropic` of `http://127.0.0.1:8000/anthropic`; empty
/// for an origin alone). The catalog's base URL is `http(s)://…` with no trailing `/`.
fn base_path(base_url: &str) -> &str {
    let authority_on = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    authority_on.find('/').map_or("", |at| &authority_on[at..])
}

#[derive(Debug, Deserialize)]
struct WireLine {
    custom_id: String,
    result: WireResult,
}

#[derive(Debug, Deserialize)]
struct WireResult {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

/// The results file of batch `batch_id` (JSONL, any order), one outcome a line:
///
/// - `succeeded`: its `message` decoded by the live decoder ([`codec::decode_response`]);
/// - `errored`: its `error` (`{"type":"error","error":{"type","message"}}`, or the inner
///   object alone) read as a live error answer of the status its `error.type` implies
///   ([`codec::read_stream_error`]: `invalid_request_error` 400, `authentication_error`
///   401, `billing_error` 402, `permission_error` 403, `not_found_error` 404,
///   `request_too_large` 413, `rate_limit_error` 429, `api_error` 500, `timeout_error`
///   504, `overloaded_error` 529; any other 500), since the line carries no status;
/// - `canceled` and `expired`: [`Error::BatchLineUnfinished`].
///
/// A line that names no `custom_id` cannot be given to its request: it is left out (and
/// logged, without its text), which the command sees as a request without a result.
pub(super) fn decode_results(body: &[u8], batch_id: &str) -> Vec<BatchOutcome> {
    let mut outcomes = Vec::new();
    for (n, raw) in body.split(|b| *b == b'\n').enumerate() {
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<WireLine>(raw) {
            Ok(line) => outcomes.push(BatchOutcome {
                result: outcome(line.result, batch_id).map_err(|e| keep_raw(e, raw)),
                custom_id: line.custom_id,
            }),
            Err(e) => tracing::warn!(
                line = n + 1,
                batch_id,
                error = %e,
                "anthropic: a batch results line that names no request is left out"
            ),
        }
    }
    outcomes
}

fn outcome(result: WireResult, batch_id: &str) -> Result<tollgate::provider::LlmResponse> {
    let unfinished = |how: &str| Error::BatchLineUnfinished {
        batch_id: batch_id.to_owned(),
        how: how.to_owned(),
    };
    match result.kind.as_str() {
        "succeeded" => {
            let message = result
                .message
                .ok_or_else(|| undecodable("a succeeded batch result without its message"))?;
            codec::decode_response(message.to_string().as_bytes())
        }
        "errored" => {
            let error = result.error.unwrap_or_default();
            // The documented shape wraps the error object; take the bare one too.
            let body = if error.get("error").is_some_and(Value::is_object) {
                error
            } else {
                json!({ "type": "error", "error": error })
            };
            Err(codec::read_stream_error(&body.to_string()).verdict())
        }
        "canceled" => Err(unfinished("was cancelled")),
        "expired" => Err(unfinished("expired")),
        other => Err(undecodable(format!(
            "a batch result of unknown type `{other}`"
        ))),
    }
}
