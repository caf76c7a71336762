//! Error bodies: [`read_error`] into a neutral [`WireError`], and a failed generation's
//! finish reason ([`read_failed_finish`]).

use serde::Deserialize;
use tollgate::provider::WireError;

/// How Cohere words a 400 for an input that does not fit the model's context window: its
/// only sign, since Cohere's error body is a message alone (`{"message": …}`).
///
/// The wording is Cohere's own, from its errors reference
/// (<https://docs.cohere.com/reference/errors>, 400 examples): "too many tokens: total
/// number of tokens in the prompt cannot exceed 4081 - received 4292" and "too many
/// tokens: size limit exceeded by 11326 tokens", and as answers recorded it, "too many
/// tokens: the total number of tokens in the prompt exceeds the limit of 4081". Matched
/// without case, as a part of the message of a 400 only. Its sibling "too many tokens:
/// max tokens must be less than or equal to …" is an output limit over the model's
/// maximum, the caller's to fix, and is not an overflow.
pub const OVERFLOW_WORDING: [&str; 3] = [
    "total number of tokens in the prompt cannot exceed",
    "total number of tokens in the prompt exceeds the limit",
    "too many tokens: size limit exceeded by",
];

/// Whether an error answer of `status` saying `message` is a context overflow.
pub fn is_overflow(status: u16, message: &str) -> bool {
    let message = message.to_lowercase();
    status == 400 && OVERFLOW_WORDING.iter().any(|w| message.contains(w))
}

#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// Reads an error answer (HTTP `status` and body) into a [`WireError`]; the core's
/// [`WireError::verdict`] decides what it means, by status:
///
/// | status | error |
/// |---|---|
/// | 402 (out of credit) | `QuotaExhausted`, never retried |
/// | 429 | `RateLimited`, with `retry-after` when sent |
/// | 400 worded as [`OVERFLOW_WORDING`] says | `ContextWindowExceeded` |
/// | 408 | `Timeout` |
/// | 5xx (500, 503, 504, …) | `Server`; 529 `Overloaded` |
/// | other 4xx (400, 401, 403, 404, 422, 498 invalid token, 499 cancelled) | `ProviderRequest` with the status |
///
/// The body's `message` is kept; a `type` (which llmock sends, Cohere documents none)
/// is kept as the kind, for the message only.
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).unwrap_or_default();
    let message = parsed
        .message
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(500).collect());
    WireError {
        status,
        context_overflow: is_overflow(status, &message),
        kind: parsed.kind.unwrap_or_default(),
        message,
        ..WireError::default()
    }
}

/// A generation that ended failing: `finish_reason` `ERROR` ("the generation failed due
/// to an internal error") stands for a 500, `TIMEOUT` for a 408 (a timeout); `message`
/// is the stream's `delta.error`, if sent. `None` for any other finish reason.
pub fn read_failed_finish(finish_reason: &str, message: Option<&str>) -> Option<WireError> {
    let status = match finish_reason {
        "ERROR" => 500,
        "TIMEOUT" => 408,
        _ => return None,
    };
    Some(WireError {
        status,
        kind: finish_reason.to_owned(),
        message: message
            .unwrap_or("the generation failed on Cohere's side")
            .to_owned(),
        ..WireError::default()
    })
}
