//! How Azure OpenAI's wire format differs from OpenAI's: its content filter's results
//! (named in a `content_filter` refusal's category) and its content-filter error.

use serde_json::Value;
use tollgate::provider::WireError;

/// The categories filtered in `results` (a `content_filter_results` or
/// `content_filter_result` object): each entry with `filtered: true` (`hate`,
/// `self_harm`, `sexual`, `violence`, `jailbreak`, `protected_material_text`,
/// `protected_material_code`, `profanity`, `custom_blocklists`, …), in the order sent.
pub fn filtered_categories(results: &Value) -> Vec<String> {
    results
        .as_object()
        .map(|results| {
            results
                .iter()
                .filter(|(_, result)| result.get("filtered") == Some(&Value::Bool(true)))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// [`Dialect::filtered`](tollgate_openai::preset::Dialect::filtered) for Azure: the
/// categories filtered in the first choice's `content_filter_results`, in a whole
/// answer or a stream chunk.
pub fn filtered(answer: &Value) -> Vec<String> {
    let choices = answer.get("choices").and_then(Value::as_array);
    choices
        .and_then(|choices| {
            choices
                .iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        })
        .and_then(|choice| choice.get("content_filter_results"))
        .map(filtered_categories)
        .unwrap_or_default()
}

/// Reads an Azure error answer: OpenAI's `{"error": {...}}`
/// ([`read_error`](tollgate_openai::codec::read_error)), and for a prompt Azure's
/// filter refused (HTTP 400, `error.code = "content_filter"`) a message that names the
/// filtered categories from `error.innererror.content_filter_result`, typed as a refusal
/// ([`WireError::refusal`]: `Error::ProviderRefusal`, category `content_filter` or
/// `content_filter:CATEGORIES`, never retried).
pub fn read_error(status: u16, body: &[u8]) -> WireError {
    let mut wire = tollgate_openai::codec::read_error(status, body);
    if wire.code != "content_filter" {
        return wire;
    }
    let categories = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|body| {
            body.pointer("/error/innererror/content_filter_result")
                .map(filtered_categories)
        })
        .unwrap_or_default();
    wire.refusal = Some(if categories.is_empty() {
        "content_filter".to_owned()
    } else {
        format!("content_filter:{}", categories.join(","))
    });
    if !categories.is_empty() {
        wire.message = format!(
            "the prompt was filtered by Azure's content filter ({}): {}",
            categories.join(", "),
            wire.message
        );
    }
    wire
}
