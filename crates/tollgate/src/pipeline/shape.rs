//! Declared response shapes: the answer must be JSON satisfying a JSON Schema.

use crate::error::{Error, Result};
use crate::request::ResponseShape;

/// Checks `text` against `shape`: `Ok(())`, or the list of what is wrong. A schema that
/// is not itself valid is the caller's mistake: [`Error::InvalidRequest`].
pub(crate) fn check(shape: &ResponseShape, text: &str) -> Result<Result<(), Vec<String>>> {
    let validator =
        jsonschema::validator_for(shape.schema.value()).map_err(|e| Error::InvalidRequest {
            field: "sampling_params.response_shape.schema".into(),
            reason: format!("is not a valid JSON Schema: {e}"),
        })?;
    let value: serde_json::Value = match serde_json::from_str(strip_fence(text)) {
        Ok(v) => v,
        Err(e) => return Ok(Err(vec![format!("the answer is not JSON: {e}")])),
    };
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("at {path}: {e}")
            }
        })
        .collect();
    Ok(if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    })
}

/// The message sent back to the model with its failed answer.
pub(crate) fn correction(shape: &ResponseShape, errors: &[String]) -> String {
    format!(
        "Your answer does not match the required JSON Schema `{}`:\n- {}\nAnswer again with only a JSON value that satisfies the schema.",
        shape.name,
        errors.join("\n- ")
    )
}

/// Models often wrap JSON in a Markdown fence; the content inside is what counts.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    t.strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|rest| rest.strip_suffix("```"))
        .map_or(t, str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape() -> ResponseShape {
        ResponseShape {
            name: "answer".into(),
            schema: json!({"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}})
                .into(),
            strict: Some(true),
        }
    }

    #[test]
    fn shape_accepts_matching_json_even_in_a_fence() {
        assert_eq!(check(&shape(), r#"{"n": 3}"#).unwrap(), Ok(()));
        assert_eq!(check(&shape(), "```json\n{\"n\": 3}\n```").unwrap(), Ok(()));
    }

    #[test]
    fn shape_reports_what_is_wrong() {
        let errors = check(&shape(), r#"{"n": "three"}"#).unwrap().unwrap_err();
        assert!(errors[0].contains("/n"), "{errors:?}");
        let errors = check(&shape(), "three").unwrap().unwrap_err();
        assert!(errors[0].contains("not JSON"), "{errors:?}");
    }

    #[test]
    fn shape_with_an_invalid_schema_is_the_callers_mistake() {
        let bad = ResponseShape {
            name: "x".into(),
            schema: json!({"type": 12}).into(),
            strict: Some(true),
        };
        assert!(matches!(
            check(&bad, "{}"),
            Err(Error::InvalidRequest { .. })
        ));
    }
}
