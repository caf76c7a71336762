//! What the Responses decoders share: the errors that name a field, and reading one.

use serde_json::Value;

use crate::error::GatewayError;

/// A body the gateway cannot read as asked: the message names the field.
pub(super) fn bad(message: String) -> GatewayError {
    GatewayError::BadBody(message)
}

/// A field that needs state the gateway does not keep.
pub(super) fn not_kept(param: &str, code: &'static str, reason: String) -> GatewayError {
    GatewayError::NotKept {
        param: param.to_owned(),
        code,
        reason,
    }
}

/// A JSON value's kind, for a message.
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(super) fn str_field<'a>(
    value: &'a Value,
    key: &str,
    path: &str,
) -> Result<&'a str, GatewayError> {
    value
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("`{path}.{key}` is required and must be a string")))
}
