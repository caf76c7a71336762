//! Error answers in either of Vertex's two shapes: [`read_error`].

use serde_json::Value;
use tollgate::provider::WireError;

/// Reads an `anthropic-vertex` error answer into a [`WireError`], by its shape:
///
/// | body | read as |
/// |---|---|
/// | Anthropic's `{"type":"error","error":{"type",…}}` (the model's errors: `overloaded_error` 529, `rate_limit_error` 429, "prompt is too long", …) | [`tollgate_anthropic::codec::read_error`], by status and `error.type` |
/// | Google's `{"error":{"code","message","status"}}`, or the one-element array of it (quota 429s `RESOURCE_EXHAUSTED`, 401/403, 404, a model not enabled) | [`crate::codec::read_error`], by status, code name and typed details |
///
/// A Google 429 is the project's own per-model quota (requests, input and output tokens
/// per minute), so it is `RateLimited` (not the shared-capacity `Overloaded` that
/// [`crate::codec::read_vertex_error`] makes of a Gemini 429).
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    if anthropic_shaped(body) {
        tollgate_anthropic::codec::read_error(status, body)
    } else {
        crate::codec::read_error(status, body)
    }
}

/// Whether `body` is Anthropic's error shape: `type: "error"`, or an `error` whose
/// `type` is a string (Google's `error` has `code` and `status` instead).
fn anthropic_shaped(body: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    value.get("type").and_then(Value::as_str) == Some("error")
        || value
            .get("error")
            .and_then(|e| e.get("type"))
            .is_some_and(Value::is_string)
}
