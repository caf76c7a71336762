//! Error bodies: [`read_error`] and [`read_stream_error`] into a neutral [`WireError`].

use serde_json::Value;
use tollgate::provider::WireError;

/// The error `type`/`code` values that mean the account is out of money or quota: never
/// retried.
pub const QUOTA_CODES: &[&str] = &[
    "insufficient_quota",
    "billing_hard_limit_reached",
    "credit_balance_exhausted",
    "organization_spend_limit_exceeded",
    "project_spend_limit_exceeded",
    "organization_usage_limit_exceeded",
];

/// The error object, wherever the server put it: OpenAI's `{"error":{…}}`, vLLM's
/// top-level `{"object":"error","message",…}`, or `{"error":"text"}`.
#[derive(Debug, Default)]
struct ErrorObject {
    kind: String,
    code: String,
    message: String,
}

fn string_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn parse_error(text: &str) -> ErrorObject {
    let fallback = || ErrorObject {
        message: text.chars().take(500).collect(),
        ..ErrorObject::default()
    };
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return fallback();
    };
    let object = match value.get("error") {
        Some(inner @ Value::Object(_)) => inner,
        Some(Value::String(message)) => {
            return ErrorObject {
                message: message.clone(),
                ..ErrorObject::default()
            };
        }
        _ if value.get("message").is_some() => &value,
        _ => return fallback(),
    };
    ErrorObject {
        kind: string_of(object.get("type")),
        code: string_of(object.get("code")),
        message: string_of(object.get("message")),
    }
}

/// Reads an error answer (HTTP `status` and body) into a [`WireError`]; the core's
/// [`WireError::verdict`] decides what it means. What only the body says:
///
/// | body | flag |
/// |---|---|
/// | `type` or `code` `insufficient_quota` (or another [`QUOTA_CODES`] value) | `quota` (`QuotaExhausted`, never retried) |
/// | `code` `context_length_exceeded` | `context_overflow` (`ContextWindowExceeded`) |
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    wire(status, parse_error(&String::from_utf8_lossy(body)))
}

/// Reads a mid-stream error chunk (`{"error":{…}}`); its `type` and `code` stand for
/// the status the same error sent as an HTTP answer has.
pub fn read_stream_error(data: &str) -> WireError {
    let error = parse_error(data);
    let status = match (error.kind.as_str(), error.code.as_str()) {
        (_, "rate_limit_exceeded" | "slow_down")
        | ("rate_limit_exceeded" | "rate_limit_error", _) => 429,
        ("invalid_request_error", _) => 400,
        ("authentication_error", _) => 401,
        ("permission_error", _) => 403,
        ("not_found_error", _) => 404,
        _ => 500,
    };
    wire(status, error)
}

fn wire(status: u16, error: ErrorObject) -> WireError {
    WireError {
        status,
        quota: QUOTA_CODES.contains(&error.kind.as_str())
            || QUOTA_CODES.contains(&error.code.as_str()),
        context_overflow: error.code == "context_length_exceeded",
        kind: error.kind,
        code: error.code,
        message: error.message,
        ..WireError::default()
    }
}
