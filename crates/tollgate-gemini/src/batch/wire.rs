//! The batch mode's wire format, without I/O: an inline entry and the create body (the
//! Gemini API's, or llmock's), the batch resource read into a phase, counts and a
//! failure, its inline responses into outcomes, and the batch list searched for a label.
//!
//! The batch resource is read where either server puts it:
//!
//! | what | Gemini API (an `Operation`) | llmock 0.2.2 |
//! |---|---|---|
//! | state | `metadata.state`: `BATCH_STATE_*` | `metadata.state`: `JOB_STATE_*` |
//! | counts | `metadata.batchStats` (int64, as strings) | none (the answers are counted) |
//! | answers | `response.inlinedResponses.inlinedResponses[]` (also `metadata.output.…`, where the SDK reads them) | `dest.inlinedResponses[]` |
//! | one answer | `{"response"}` or `{"error": Status}`, with `metadata.key` | `{"custom_id", "response"}` |
//! | a failed batch | `error`: a `google.rpc.Status` | — |
//! | list | `operations[]`, `nextPageToken` | `batches[]` |

use serde_json::{Value, json};
use tollgate::provider::batch::{BatchCounts, BatchOutcome, BatchPhase, BatchStatus};
use tollgate::provider::{Error, LlmResponse, Result, WireError, parse_json, undecodable};

use crate::codec;
use crate::options::BatchBody;

/// One inline entry: `request` (the live `GenerateContentRequest`) under `custom_id`.
pub(crate) fn entry(body: BatchBody, custom_id: &str, request: Value) -> Value {
    match body {
        BatchBody::Gemini => json!({"request": request, "metadata": {"key": custom_id}}),
        BatchBody::Llmock => json!({"custom_id": custom_id, "request": request}),
    }
}

/// The body of `models/{model}:batchGenerateContent` holding `entries`, labelled `label`
/// (the batch's `displayName`; llmock keeps no label).
pub(crate) fn create_body(body: BatchBody, entries: Vec<Value>, label: &str) -> Value {
    match body {
        BatchBody::Gemini => json!({"batch": {
            "displayName": label,
            "inputConfig": {"requests": {"requests": entries}},
        }}),
        BatchBody::Llmock => json!({ "requests": entries }),
    }
}

/// The path of batch `id` (`batches/…`, or the bare id), after the base URL; an id
/// that is not a batch name is refused (it goes into the path).
pub(crate) fn batch_path(id: &str) -> Result<String> {
    let bare = id.strip_prefix("batches/").unwrap_or(id);
    if bare.is_empty()
        || !bare
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
    {
        return Err(Error::invalid_request(
            "batch.id",
            format!("`{id}` is not a Gemini batch name (`batches/` and letters, digits, `-`, `_`)"),
        ));
    }
    Ok(format!("/v1beta/batches/{bare}"))
}

/// The new batch's name (`batches/…`) from the create answer.
pub(crate) fn decode_created(body: &[u8]) -> Result<String> {
    let created: Value = parse_json(body)?;
    let name = created
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| undecodable("a created batch without `name`"))?;
    batch_path(name)?;
    Ok(name.to_owned())
}

/// A batch's state, read from `BATCH_STATE_*` or `JOB_STATE_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    Running,
    Cancelling,
    Succeeded,
    Failed,
    Cancelled,
    Expired,
    /// A state this does not know, on an operation that says it is `done`.
    Done,
}

impl State {
    fn phase(self) -> BatchPhase {
        match self {
            State::Queued => BatchPhase::Queued,
            State::Running => BatchPhase::Running,
            State::Cancelling => BatchPhase::Cancelling,
            _ => BatchPhase::Ended,
        }
    }
}

/// The state of `batch`: `metadata.state` (or `state`), either spelling; a state this
/// does not know is `Done` when the operation says `done`, else running.
fn read_state(batch: &Value) -> Result<State> {
    let done = batch.get("done").and_then(Value::as_bool) == Some(true);
    let name = batch
        .pointer("/metadata/state")
        .or_else(|| batch.get("state"))
        .and_then(Value::as_str);
    let Some(name) = name else {
        return if done {
            Ok(State::Done)
        } else {
            Err(undecodable("a batch without `metadata.state`"))
        };
    };
    let short = name
        .strip_prefix("BATCH_STATE_")
        .or_else(|| name.strip_prefix("JOB_STATE_"))
        .unwrap_or(name);
    Ok(match short {
        "PENDING" | "QUEUED" => State::Queued,
        "RUNNING" => State::Running,
        "CANCELLING" => State::Cancelling,
        "SUCCEEDED" | "PARTIALLY_SUCCEEDED" => State::Succeeded,
        "FAILED" => State::Failed,
        "CANCELLED" => State::Cancelled,
        "EXPIRED" => State::Expired,
        _ if done => State::Done,
        _ => State::Running,
    })
}

/// The inline answers of `batch`, wherever the server put them (see the module's table).
fn inline_responses(batch: &Value) -> Option<&Vec<Value>> {
    [
        "/response/inlinedResponses",
        "/metadata/output/inlinedResponses",
        "/dest/inlinedResponses",
    ]
    .into_iter()
    .filter_map(|at| batch.pointer(at))
    .find_map(|found| match found {
        Value::Array(list) => Some(list),
        Value::Object(inner) => inner.get("inlinedResponses").and_then(Value::as_array),
        _ => None,
    })
}

/// An int64 in Google's JSON (a string) or a plain number.
fn int64(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

fn is_set(entry: &Value, field: &str) -> bool {
    entry.get(field).is_some_and(|v| !v.is_null())
}

/// `metadata.batchStats`, else the inline answers counted.
fn counts(batch: &Value, responses: Option<&Vec<Value>>) -> BatchCounts {
    if let Some(stats) = batch
        .pointer("/metadata/batchStats")
        .or_else(|| batch.get("batchStats"))
    {
        let count = |field: &str| stats.get(field).and_then(int64).unwrap_or(0);
        return BatchCounts {
            total: count("requestCount"),
            succeeded: count("successfulRequestCount"),
            failed: count("failedRequestCount"),
        };
    }
    let Some(responses) = responses else {
        return BatchCounts::default();
    };
    let failed = responses.iter().filter(|e| is_set(e, "error")).count() as u64;
    let total = responses.len() as u64;
    BatchCounts {
        total,
        succeeded: total - failed,
        failed,
    }
}

/// What the transport's `status` says of the batch resource `body`.
///
/// A `FAILED` batch fails with its `error` read as a live error answer would be
/// ([`status_error`]); an `EXPIRED` or `CANCELLED` one that holds no answers fails with
/// [`Error::BatchLineUnfinished`] (each of its requests ended so). One that holds answers
/// has no failure: its answers are collected, the requests it lacks are the caller's.
pub(crate) fn decode_status(body: &[u8], batch_id: &str) -> Result<BatchStatus> {
    let batch: Value = parse_json(body)?;
    let state = read_state(&batch)?;
    let responses = inline_responses(&batch);
    let unanswered = responses.is_none_or(Vec::is_empty);
    let unfinished = |how: &str| Error::BatchLineUnfinished {
        batch_id: batch_id.to_owned(),
        how: how.to_owned(),
    };
    let failure = match state {
        State::Failed => Some(match batch.get("error").filter(|e| !e.is_null()) {
            Some(status) => status_error(status, batch_id),
            None => WireError {
                status: 500,
                message: "the batch failed without saying why".into(),
                ..WireError::default()
            }
            .verdict(),
        }),
        State::Expired if unanswered => Some(unfinished("expired")),
        State::Cancelled if unanswered => Some(unfinished("was cancelled")),
        _ => None,
    };
    Ok(BatchStatus {
        phase: state.phase(),
        counts: counts(&batch, responses),
        failure,
    })
}

/// The outcomes in the batch resource `body`: each inline answer under its key
/// (`metadata.key`, or llmock's `custom_id`), decoded by the live decoder
/// ([`codec::decode_response`]), or its error read as a live error answer
/// ([`status_error`]). An answer without a key cannot be matched to its request: it is
/// left out (logged), as a request the batch did not answer.
pub(crate) fn decode_results(body: &[u8], batch_id: &str) -> Result<Vec<BatchOutcome>> {
    let batch: Value = parse_json(body)?;
    let Some(responses) = inline_responses(&batch) else {
        return Ok(Vec::new());
    };
    let mut outcomes = Vec::with_capacity(responses.len());
    for (i, entry) in responses.iter().enumerate() {
        let key = entry
            .pointer("/metadata/key")
            .or_else(|| entry.get("custom_id"))
            .and_then(Value::as_str);
        let Some(key) = key else {
            tracing::warn!(batch = batch_id, index = i, "a batch answer without a key");
            continue;
        };
        let result = if is_set(entry, "error") {
            Err(status_error(&entry["error"], batch_id))
        } else if is_set(entry, "response") {
            decode_answer(&entry["response"])
        } else {
            Err(undecodable(
                "a batch answer with neither `response` nor `error`",
            ))
        };
        outcomes.push(BatchOutcome {
            custom_id: key.to_owned(),
            result,
        });
    }
    Ok(outcomes)
}

/// One `GenerateContentResponse`, through the live decoder.
fn decode_answer(response: &Value) -> Result<LlmResponse> {
    let bytes = serde_json::to_vec(response)
        .map_err(|e| undecodable(format!("a batch answer that does not serialize: {e}")))?;
    codec::decode_response(&bytes)
}

/// `google.rpc.Code`: each canonical code, its name and the HTTP status Google maps it
/// to (`google/rpc/code.proto` in googleapis/googleapis gives the mapping per code).
const CODES: [(u64, &str, u16); 16] = [
    (1, "CANCELLED", 499),
    (2, "UNKNOWN", 500),
    (3, "INVALID_ARGUMENT", 400),
    (4, "DEADLINE_EXCEEDED", 504),
    (5, "NOT_FOUND", 404),
    (6, "ALREADY_EXISTS", 409),
    (7, "PERMISSION_DENIED", 403),
    (8, "RESOURCE_EXHAUSTED", 429),
    (9, "FAILED_PRECONDITION", 400),
    (10, "ABORTED", 409),
    (11, "OUT_OF_RANGE", 400),
    (12, "UNIMPLEMENTED", 501),
    (13, "INTERNAL", 500),
    (14, "UNAVAILABLE", 503),
    (15, "DATA_LOSS", 500),
    (16, "UNAUTHENTICATED", 401),
];

/// A `google.rpc.Status` inside a batch (one answer's `error`, a failed batch's `error`)
/// as the live error classifier reads the same error sent as an HTTP answer: its
/// canonical `code` (or `status` name) becomes the HTTP status Google maps it to, and
/// the status, message and typed `details` go to [`codec::read_error`] as that answer's
/// body. So a `RESOURCE_EXHAUSTED` is `RateLimited` (or `QuotaExhausted` for a per-day
/// quota), an `INVALID_ARGUMENT` a `ProviderRequestError` with status 400, as live. A
/// `code` that is already an HTTP status is kept; a `CANCELLED` request is
/// [`Error::BatchLineUnfinished`] (`was cancelled`).
pub(crate) fn status_error(status: &Value, batch_id: &str) -> Error {
    let code = status.get("code").and_then(Value::as_u64);
    let named = status
        .get("status")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let known = CODES
        .iter()
        .find(|(c, name, _)| code == Some(*c) || (code.is_none() && named == Some(*name)));
    let (http, name) = match (known, code) {
        (Some((_, name, http)), _) => (*http, named.unwrap_or(name)),
        (None, Some(c @ 400..=599)) => (u16::try_from(c).unwrap_or(500), named.unwrap_or("")),
        (None, _) => (500, named.unwrap_or("UNKNOWN")),
    };
    if name == "CANCELLED" {
        return Error::BatchLineUnfinished {
            batch_id: batch_id.to_owned(),
            how: "was cancelled".into(),
        };
    }
    let body = json!({"error": {
        "code": http,
        "status": name,
        "message": status.get("message"),
        "details": status.get("details"),
    }});
    codec::read_error(http, body.to_string().as_bytes()).verdict()
}

/// The address of one page of the batch list, `pageSize` batches from `token` (none: the
/// first page), the token percent-encoded so that any token the server hands out stays
/// one query value.
pub(crate) fn list_path(page_size: &str, token: Option<&str>) -> String {
    let mut path = format!("/v1beta/batches?pageSize={}", query_value(page_size));
    if let Some(token) = token {
        path.push_str("&pageToken=");
        path.push_str(&query_value(token));
    }
    path
}

/// `value` with every byte but the unreserved ones (letters, digits, `-`, `.`, `_`, `~`)
/// percent-encoded.
fn query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One page of `GET /v1beta/batches`, searched for a label.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Page {
    /// The batch of that display name (its `name`).
    Found(String),
    /// Not on this page; the next page's token.
    Next(String),
    /// Not on this page, which is the last.
    End,
}

/// Searches the list page `body` for a batch whose display name is `label`.
pub(crate) fn find_in_page(body: &[u8], label: &str) -> Result<Page> {
    let page: Value = parse_json(body)?;
    let items = page
        .get("operations")
        .or_else(|| page.get("batches"))
        .and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        let display = item
            .pointer("/metadata/displayName")
            .or_else(|| item.get("displayName"))
            .and_then(Value::as_str);
        if display == Some(label)
            && let Some(name) = item.get("name").and_then(Value::as_str)
            && batch_path(name).is_ok()
        {
            return Ok(Page::Found(name.to_owned()));
        }
    }
    Ok(
        match page
            .get("nextPageToken")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            Some(token) => Page::Next(token.to_owned()),
            None => Page::End,
        },
    )
}

#[cfg(test)]
mod tests;
