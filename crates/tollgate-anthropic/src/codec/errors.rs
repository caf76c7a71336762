//! Error bodies: [`read_error`] and [`read_stream_error`] into a neutral [`WireError`].

use serde::Deserialize;
use tollgate::provider::WireError;

/// The `error.details.error_code` of a 429 that means the tier's monthly spend cap.
const SPEND_LIMIT_CODE: &str = "enforced_spend_limit_reached";

/// How Anthropic words a 400 `invalid_request_error` for a call that does not fit the
/// model's context window: its only sign, since the error has no code of its own.
///
/// The status and type are documented (<https://docs.claude.com/en/api/errors>: 400
/// `invalid_request_error`), and so is the behaviour: since Claude 3.7 Sonnet "if the sum
/// of prompt tokens and output tokens exceeds the model's context window, the system will
/// return a validation error rather than silently truncating the context"
/// (<https://platform.claude.com/docs/en/build-with-claude/context-windows>). The wording
/// is the API's own, as recorded in answers from it: "prompt is too long: 208310 tokens >
/// 200000 maximum" (input alone too long; anthropics/claude-code#12186) and "input length
/// and `max_tokens` exceed context limit: 184915 + 20000 > 204648, decrease input length
/// or `max_tokens` and try again" (input plus the output limit; anthropics/claude-code#228).
/// Matched without case, as a part of the message.
pub const OVERFLOW_WORDING: [&str; 2] = ["prompt is too long:", "exceed context limit:"];

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
/// | `invalid_request_error` worded as [`OVERFLOW_WORDING`] says | `context_overflow` (`ContextWindowExceeded`) |
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

/// Whether an `invalid_request_error` says the call does not fit the context window
/// ([`OVERFLOW_WORDING`]).
pub fn is_overflow(kind: &str, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    kind == "invalid_request_error" && OVERFLOW_WORDING.iter().any(|w| message.contains(w))
}

fn wire(status: u16, error: ErrorObject) -> WireError {
    let spend_limit =
        error.details.as_ref().and_then(|d| d.error_code.as_deref()) == Some(SPEND_LIMIT_CODE);
    WireError {
        status,
        quota: (status == 429 && spend_limit) || error.kind == "billing_error",
        overloaded: error.kind == "overloaded_error",
        context_overflow: is_overflow(&error.kind, &error.message),
        kind: error.kind,
        message: error.message,
        ..WireError::default()
    }
}

#[cfg(test)]
mod tests {
    use tollgate::provider::Error;

    use super::*;

    fn invalid_request(message: &str) -> Vec<u8> {
        serde_json::json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": message}, "request_id": "req_1"})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_prompt_too_long_is_a_context_overflow() {
        let wire = read_error(
            400,
            &invalid_request("prompt is too long: 208310 tokens > 200000 maximum"),
        );
        assert!(wire.context_overflow, "{wire:?}");
        assert!(matches!(
            wire.verdict(),
            Error::ContextWindowExceeded { .. }
        ));
    }

    #[test]
    fn input_and_max_tokens_over_the_limit_is_a_context_overflow() {
        let wire = read_error(
            400,
            &invalid_request(
                "input length and `max_tokens` exceed context limit: 184915 + 20000 > 204648, \
                 decrease input length or `max_tokens` and try again",
            ),
        );
        assert!(wire.context_overflow, "{wire:?}");
    }

    #[test]
    fn an_overflow_in_a_stream_error_event_is_a_context_overflow() {
        let data = String::from_utf8(invalid_request("Prompt is too long: 9 tokens > 8 maximum"))
            .expect("utf-8");
        let wire = read_stream_error(&data);
        assert_eq!(wire.status, 400);
        assert!(wire.context_overflow, "{wire:?}");
    }

    #[test]
    fn another_invalid_request_is_not_an_overflow() {
        let wire = read_error(400, &invalid_request("messages: roles must alternate"));
        assert!(!wire.context_overflow, "{wire:?}");
        assert!(
            matches!(wire.verdict(), Error::ProviderRequest(_)),
            "a request error"
        );
    }

    #[test]
    fn the_wording_under_another_error_type_is_not_an_overflow() {
        let body = serde_json::json!({"type": "error", "error": {"type": "api_error",
            "message": "prompt is too long: 9 tokens > 8 maximum"}});
        let wire = read_error(500, body.to_string().as_bytes());
        assert!(!wire.context_overflow, "{wire:?}");
    }
}
