//! Error bodies (`google.rpc.Status`): [`read_error`], [`read_vertex_error`] and
//! [`read_stream_error`] into a neutral [`WireError`], by status, the canonical code
//! name and the typed `details` (never by message text: Gemini's "check your plan and
//! billing details" also comes with a per-minute limit).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tollgate::wire::WireError;

/// The `@type` of a `RetryInfo` detail.
pub const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";
/// The `@type` of a `QuotaFailure` detail.
pub const QUOTA_FAILURE: &str = "type.googleapis.com/google.rpc.QuotaFailure";
/// The `@type` of an `ErrorInfo` detail.
pub const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// A `google.rpc.Status`, with the details tollgate reads.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Status {
    /// `code`: the HTTP status (0 when absent).
    pub code: u16,
    /// `status`: the canonical code name, e.g. `RESOURCE_EXHAUSTED`.
    pub status: String,
    /// `message`.
    pub message: String,
    /// `RetryInfo.retryDelay`, read.
    pub retry_delay: Option<Duration>,
    /// Every `QuotaFailure.violations[].quotaId` (or `quotaMetric` where there is no id).
    pub quota_ids: Vec<String>,
    /// `ErrorInfo.reason`, e.g. `API_KEY_INVALID`.
    pub reason: String,
}

impl Status {
    /// Whether a quota violation is a per-day quota (`…PerDay…`): it resets at midnight
    /// Pacific time, so waiting is no answer.
    pub fn per_day(&self) -> bool {
        self.quota_ids.iter().any(|id| id.contains("PerDay"))
    }
}

#[derive(Debug, Deserialize)]
struct Envelope {
    error: Value,
}

/// Reads a protobuf `Duration` in its JSON form: `"19s"`, `"3.700s"`, `"0.5s"`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let seconds = text.trim().strip_suffix('s')?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    if !fraction.bytes().all(|b| b.is_ascii_digit()) || fraction.len() > 9 {
        return None;
    }
    let nanos: u32 = format!("{fraction:0<9}").parse().ok()?;
    Some(Duration::new(whole, nanos))
}

fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Parses an error body: `{"error":{…}}`, or the one-element array
/// `[{"error":{…}}]` that the non-SSE stream form sends. `None` when it is neither.
pub fn parse_status(body: &str) -> Option<Status> {
    let value: Value = serde_json::from_str(body).ok()?;
    let value = match value {
        Value::Array(mut items) if items.len() == 1 => items.pop()?,
        other => other,
    };
    let error = serde_json::from_value::<Envelope>(value).ok()?.error;
    let object = error.as_object()?;
    let mut status = Status {
        code: object
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .unwrap_or(0),
        status: text(object.get("status")),
        message: text(object.get("message")),
        ..Status::default()
    };
    for detail in object
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match detail.get("@type").and_then(Value::as_str) {
            Some(RETRY_INFO) => {
                status.retry_delay = detail
                    .get("retryDelay")
                    .and_then(Value::as_str)
                    .and_then(parse_duration);
            }
            Some(QUOTA_FAILURE) => {
                for v in detail
                    .get("violations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = text(v.get("quotaId"));
                    let id = if id.is_empty() {
                        text(v.get("quotaMetric"))
                    } else {
                        id
                    };
                    if !id.is_empty() {
                        status.quota_ids.push(id);
                    }
                }
            }
            Some(ERROR_INFO) => status.reason = text(detail.get("reason")),
            _ => {}
        }
    }
    Some(status)
}

/// Reads a Gemini API error answer (HTTP `status` and body) into a [`WireError`]; the
/// core's [`WireError::verdict`] decides what it means. What only the body says:
///
/// | body | wire error | verdict |
/// |---|---|---|
/// | 429 `RESOURCE_EXHAUSTED` with a `QuotaFailure` whose `quotaId` is per day | `quota` | `QuotaExhausted` (never retried) |
/// | other 429 | `retry_after` = `RetryInfo.retryDelay` | `RateLimited` with that wait |
/// | 503 `UNAVAILABLE` ("the model is overloaded") | `overloaded` | `Overloaded` |
/// | 500 `INTERNAL`, 504 `DEADLINE_EXCEEDED` | — | `Server` (retried) |
/// | 400 (`INVALID_ARGUMENT`, `API_KEY_INVALID`, `FAILED_PRECONDITION`), 401, 403, 404 | `kind` = `status`, `code` = `ErrorInfo.reason` | `ProviderRequestError` |
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    wire(status, body, false)
}

/// [`read_error`] for Vertex AI, where a 429 without a `QuotaFailure` is pay-as-you-go
/// Dynamic Shared Quota running short ("Resource exhausted, please try again later"):
/// shared capacity, so `Overloaded` (as a 529 is), not the project's own rate limit.
pub fn read_vertex_error(status: u16, body: &[u8]) -> WireError {
    wire(status, body, true)
}

/// Reads a mid-stream `{"error":{…}}` chunk; its `code` stands for the status the same
/// error sent as an HTTP answer has (500 when absent).
pub fn read_stream_error(data: &str) -> WireError {
    let code = parse_status(data)
        .map(|s| s.code)
        .filter(|c| *c >= 400)
        .unwrap_or(500);
    read_error(code, data.as_bytes())
}

fn wire(status: u16, body: &[u8], vertex: bool) -> WireError {
    let text = String::from_utf8_lossy(body);
    let Some(parsed) = parse_status(&text) else {
        return WireError {
            status,
            message: text.chars().take(500).collect(),
            ..WireError::default()
        };
    };
    let quota = status == 429 && parsed.per_day();
    let dsq = vertex && status == 429 && parsed.quota_ids.is_empty();
    WireError {
        status,
        quota,
        overloaded: (status == 503 && parsed.status == "UNAVAILABLE") || dsq,
        retry_after: parsed.retry_delay,
        kind: parsed.status,
        code: parsed.reason,
        message: parsed.message,
        ..WireError::default()
    }
}
