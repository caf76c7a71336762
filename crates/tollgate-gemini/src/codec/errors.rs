//! Error bodies (`google.rpc.Status`): [`read_error`], [`read_vertex_error`] and
//! [`read_stream_error`] into a neutral [`WireError`], by status, the canonical code
//! name and the typed `details` (not by message text: Gemini's "check your plan and
//! billing details" also comes with a per-minute limit). The one message read is a
//! context overflow's, whose only sign is its wording ([`OVERFLOW_WORDING`]).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tollgate::provider::WireError;

/// The `@type` of a `RetryInfo` detail.
pub const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";
/// The `@type` of a `QuotaFailure` detail.
pub const QUOTA_FAILURE: &str = "type.googleapis.com/google.rpc.QuotaFailure";
/// The `@type` of an `ErrorInfo` detail.
pub const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// How Gemini words a 400 `INVALID_ARGUMENT` for a prompt above the model's input token
/// limit: its only sign (the status carries no detail of its own).
///
/// The status is documented for it: Vertex AI's API errors page gives 400
/// `INVALID_ARGUMENT` with the example "Request exceeds the model's input token limit"
/// (<https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/api-errors>);
/// the Gemini API's troubleshooting guide lists 400 `INVALID_ARGUMENT`
/// (<https://ai.google.dev/gemini-api/docs/troubleshooting>). The wording is the API's
/// own, as recorded in its answers: "The input token count (3475108) exceeds the maximum
/// number of tokens allowed (1048576)." (google-gemini/gemini-cli#4231, #6678, #12098).
/// Matched without case, as a part of the message.
pub const OVERFLOW_WORDING: &str = "exceeds the maximum number of tokens allowed";

/// Whether a status says the prompt does not fit the model's window: a 400
/// `INVALID_ARGUMENT` worded as [`OVERFLOW_WORDING`] says.
pub fn is_overflow(status: u16, parsed: &Status) -> bool {
    status == 400
        && parsed.status == "INVALID_ARGUMENT"
        && parsed
            .message
            .to_ascii_lowercase()
            .contains(OVERFLOW_WORDING)
}

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
/// | 400 `INVALID_ARGUMENT` worded as [`OVERFLOW_WORDING`] says | `context_overflow` | `ContextWindowExceeded` |
/// | other 400 (`INVALID_ARGUMENT`, `API_KEY_INVALID`, `FAILED_PRECONDITION`), 401, 403, 404 | `kind` = `status`, `code` = `ErrorInfo.reason` | `ProviderRequestError` |
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
        context_overflow: is_overflow(status, &parsed),
        retry_after: parsed.retry_delay,
        kind: parsed.status,
        code: parsed.reason,
        message: parsed.message,
        refusal: None,
    }
}

#[cfg(test)]
mod tests {
    use tollgate::provider::Error;

    use super::*;

    fn status(code: u16, name: &str, message: &str) -> Vec<u8> {
        serde_json::json!({"error": {"code": code, "message": message, "status": name}})
            .to_string()
            .into_bytes()
    }

    const TOO_LONG: &str =
        "The input token count (3475108) exceeds the maximum number of tokens allowed (1048576).";

    #[test]
    fn an_input_token_count_over_the_maximum_is_a_context_overflow() {
        let wire = read_error(400, &status(400, "INVALID_ARGUMENT", TOO_LONG));
        assert!(wire.context_overflow, "{wire:?}");
        assert!(matches!(
            wire.verdict(),
            Error::ContextWindowExceeded { .. }
        ));
    }

    #[test]
    fn vertex_words_its_overflow_the_same() {
        let wire = read_vertex_error(400, &status(400, "INVALID_ARGUMENT", TOO_LONG));
        assert!(wire.context_overflow, "{wire:?}");
    }

    #[test]
    fn an_overflow_in_the_stream_array_form_is_a_context_overflow() {
        let body = format!(
            "[{}]",
            String::from_utf8(status(400, "INVALID_ARGUMENT", TOO_LONG)).expect("utf-8")
        );
        let wire = read_stream_error(&body);
        assert_eq!(wire.status, 400);
        assert!(wire.context_overflow, "{wire:?}");
    }

    #[test]
    fn another_invalid_argument_is_not_an_overflow() {
        let wire = read_error(
            400,
            &status(
                400,
                "INVALID_ARGUMENT",
                "Please use a valid role: user, model.",
            ),
        );
        assert!(!wire.context_overflow, "{wire:?}");
        assert!(matches!(wire.verdict(), Error::ProviderRequest(_)));
    }

    #[test]
    fn the_wording_under_another_status_is_not_an_overflow() {
        let wire = read_error(500, &status(500, "INTERNAL", TOO_LONG));
        assert!(!wire.context_overflow, "{wire:?}");
    }
}
