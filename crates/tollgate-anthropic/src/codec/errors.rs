//! Error bodies: [`read_error`] and [`read_stream_error`] into a neutral [`WireError`].

use serde::Deserialize;
use tollgate::wire::WireError;

/// The `error.details.error_code` of a 429 that means the tier's monthly spend cap.
const SPEND_LIMIT_CODE: &str = "enforced_spend_limit_reached";

#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorObject,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorObject {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<ErrorDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorDetails {
    error_code: Option<String>,
}

/// Reads an error answer (HTTP `status` and body) into a [`WireError`]; the core's
/// [`WireError::verdict`] decides what it means. What only Anthropic's body says:
///
/// | body | flag |
/// |---|---|
/// | a 429 with `details.error_code = enforced_spend_limit_reached`, or `billing_error` | `quota` (`QuotaExhausted`) |
/// | `overloaded_error` (529, or e.g. a 503) | `overloaded` (`Overloaded` with the wire's status) |
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    let error = serde_json::from_slice::<ErrorBody>(body)
        .map(|b| b.error)
        .unwrap_or_else(|_| ErrorObject {
            message: String::from_utf8_lossy(body).chars().take(500).collect(),
            ..ErrorObject::default()
        });
    wire(status, error)
}

/// Reads a mid-stream `error` event's data (`{"type":"error","error":{…}}`); its
/// `error.type` stands for the status the same error sent as an HTTP answer has.
pub fn read_stream_error(data: &str) -> WireError {
    let error = serde_json::from_str::<ErrorBody>(data)
        .map(|b| b.error)
        .unwrap_or_else(|_| ErrorObject {
            message: data.chars().take(500).collect(),
            ..ErrorObject::default()
        });
    let status = match error.kind.as_str() {
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        "billing_error" => 402,
        "api_error" => 500,
        "timeout_error" => 504,
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        _ => 500,
    };
    wire(status, error)
}

fn wire(status: u16, error: ErrorObject) -> WireError {
    let spend_limit =
        error.details.as_ref().and_then(|d| d.error_code.as_deref()) == Some(SPEND_LIMIT_CODE);
    WireError {
        status,
        quota: (status == 429 && spend_limit) || error.kind == "billing_error",
        overloaded: error.kind == "overloaded_error",
        kind: error.kind,
        message: error.message,
        ..WireError::default()
    }
}
