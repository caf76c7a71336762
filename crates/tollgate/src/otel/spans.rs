//! String-array span attributes (`gen_ai.response.finish_reasons`,
//! `gen_ai.request.stop_sequences`) set on a span's OpenTelemetry counterpart.

use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Array, StringValue, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Sets `key` to `values` as an OpenTelemetry string array on `span`'s OpenTelemetry
/// span; `false` (nothing set) when the span is not bridged to OpenTelemetry.
pub(crate) fn set_string_array(span: &tracing::Span, key: &'static str, values: &[&str]) -> bool {
    if !span.context().span().span_context().is_valid() {
        return false;
    }
    let values: Vec<StringValue> = values
        .iter()
        .map(|v| StringValue::from(v.to_string()))
        .collect();
    span.set_attribute(key, Value::Array(Array::String(values)));
    true
}
