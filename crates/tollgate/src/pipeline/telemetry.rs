//! A call's and its attempts' `tracing` spans, named and valued as the OpenTelemetry
//! GenAI semantic conventions define them (see `docs/observability.md`): the call span is
//! `{gen_ai.operation.name} {gen_ai.request.model}` of kind `client`, each attempt a
//! `tollgate.attempt` child; tollgate's own attributes carry a `tollgate.` prefix. Spans
//! hold no request or answer text and no secret: names, counts, sampling values.

use std::time::Duration;

use tracing::Span;
use tracing::field::Empty;

use super::runtime::ModelRuntime;
use crate::client::TokenCount;
use crate::error::Error;
use crate::limit::Cost;
use crate::request::LlmRequest;
use crate::usage::Usage;

/// An integer attribute: `tracing-opentelemetry` exports `i64` fields as integers (a
/// `u64` field would become a string).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The conventions' `gen_ai.operation.name` for one of tollgate's operations: a stream
/// and a decision are `chat` (a decision is a chat completion read for its choice).
pub(crate) fn operation_name(operation: &str) -> &'static str {
    match operation {
        "embeddings" => "embeddings",
        _ => "chat",
    }
}

/// Opens the call span: the attributes sampling needs are set at creation, the others
/// are declared and recorded as the call goes.
pub(crate) fn call_span(rt: &ModelRuntime, job_id: Option<&str>, operation: &'static str) -> Span {
    let op = operation_name(operation);
    let streamed = operation == "chat_stream";
    let server = rt.deployments[0].server.as_ref();
    tracing::info_span!(
        target: "tollgate",
        "gen_ai.call",
        otel.name = %format!("{op} {}", rt.entry.name),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = op,
        gen_ai.provider.name = rt.provider_name,
        gen_ai.request.model = %rt.entry.name,
        server.address = server.map(|s| s.address.as_str()),
        server.port = server.map(|s| i64::from(s.port)),
        gen_ai.request.stream = streamed.then_some(true),
        gen_ai.output.type = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.request.temperature = Empty,
        gen_ai.request.top_p = Empty,
        gen_ai.request.stop_sequences = Empty,
        gen_ai.embeddings.dimension.count = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.response.time_to_first_chunk = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_write.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        error.type = Empty,
        tollgate.operation = operation,
        tollgate.streamed = streamed,
        tollgate.model_id = %rt.entry.id,
        tollgate.provider = %rt.entry.provider,
        tollgate.job_id = job_id,
        tollgate.attempts = Empty,
        tollgate.cost_usd = Empty,
        tollgate.queue_wait = Empty,
    )
}

/// Opens the span of a token count ([`crate::LlmClient::count_input_tokens`]): not a
/// GenAI call (nothing is generated, nothing reserved), so tollgate's own name, with the
/// model and provider as a call span names them.
pub(crate) fn count_span(rt: &ModelRuntime) -> Span {
    tracing::info_span!(
        target: "tollgate",
        "tollgate.count_tokens",
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.provider.name = rt.provider_name,
        gen_ai.request.model = %rt.entry.name,
        gen_ai.usage.input_tokens = Empty,
        error.type = Empty,
        tollgate.model_id = %rt.entry.id,
        tollgate.provider = %rt.entry.provider,
        tollgate.token_counter = Empty,
    )
}

/// Records a count's outcome on its [`count_span`]: the tokens and who counted them, or
/// the error's kind.
pub(crate) fn record_count(span: &Span, result: Result<&TokenCount, &Error>) {
    match result {
        Ok(count) => {
            span.record("gen_ai.usage.input_tokens", int(count.input_tokens));
            span.record("tollgate.token_counter", count.counted_by.as_str());
        }
        Err(e) => {
            span.record("error.type", e.kind());
            span.record("otel.status_code", "error");
        }
    }
}

/// Opens the span of attempt `number`, a child of the call span; `retry_reason` is the
/// error kind of the attempt it retries.
pub(crate) fn attempt_span(call: &Span, number: u32, retry_reason: Option<&'static str>) -> Span {
    tracing::info_span!(
        target: "tollgate",
        parent: call,
        "tollgate.attempt",
        otel.kind = "internal",
        otel.status_code = Empty,
        tollgate.attempt.number = i64::from(number),
        tollgate.retry.reason = retry_reason,
        tollgate.retry.wait = Empty,
        tollgate.deployment = Empty,
        server.address = Empty,
        server.port = Empty,
        tollgate.queue_wait = Empty,
        tollgate.reservation.requests = Empty,
        tollgate.reservation.input_tokens = Empty,
        tollgate.reservation.output_tokens = Empty,
        tollgate.throttle_factor = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        http.response.status_code = Empty,
        error.type = Empty,
    )
}

/// What an attempt was granted: where it goes, how long it queued, what it reserved.
pub(crate) fn record_grant(
    span: &Span,
    rt: &ModelRuntime,
    deployment: usize,
    queue_wait: Duration,
    cost: Cost,
) {
    let d = &rt.deployments[deployment];
    if let Some(name) = &d.name {
        span.record("tollgate.deployment", name.as_str());
    }
    if let Some(server) = &d.server {
        span.record("server.address", server.address.as_str());
        span.record("server.port", i64::from(server.port));
    }
    span.record("tollgate.queue_wait", queue_wait.as_secs_f64());
    span.record("tollgate.reservation.requests", int(cost.requests));
    span.record("tollgate.reservation.input_tokens", int(cost.input_tokens));
    span.record(
        "tollgate.reservation.output_tokens",
        int(cost.output_tokens),
    );
    if let Some(factor) = d.limiter.throttle_factor() {
        span.record("tollgate.throttle_factor", factor);
    }
}

/// An attempt's end: its usage, or its error (and the wait before the retry, if any).
pub(crate) fn record_attempt_end(
    span: &Span,
    usage: &Usage,
    error: Option<(&str, Option<u16>)>,
    retry_in: Option<Duration>,
) {
    span.record("gen_ai.usage.input_tokens", int(usage.total_input_tokens()));
    span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
    if let Some((kind, status)) = error {
        span.record("error.type", kind);
        span.record("otel.status_code", "error");
        if let Some(status) = status {
            span.record("http.response.status_code", i64::from(status));
        }
    }
    if let Some(wait) = retry_in {
        span.record("tollgate.retry.wait", wait.as_secs_f64());
    }
}

/// The request's sampling attributes.
pub(crate) fn record_request(span: &Span, request: &LlmRequest) {
    let params = request.sampling_params();
    if let Some(t) = params.temperature() {
        span.record("gen_ai.request.temperature", t);
    }
    if let Some(p) = params.top_p() {
        span.record("gen_ai.request.top_p", p);
    }
    if !params.stop().is_empty() {
        let stops: Vec<&str> = params.stop().iter().map(String::as_str).collect();
        record_strings(span, "gen_ai.request.stop_sequences", &stops);
    }
    if params.response_shape().is_some() {
        span.record("gen_ai.output.type", "json");
    }
}

/// The call's usage: `gen_ai.usage.input_tokens` counts cached input too (the
/// conventions' rule), with the cache reads and writes beside it as parts of it.
pub(crate) fn record_usage(span: &Span, usage: &Usage) {
    let writes = usage.cache_write_tokens + usage.cache_write_1h_tokens;
    span.record("gen_ai.usage.input_tokens", int(usage.total_input_tokens()));
    span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
    let reads = int(usage.cache_read_tokens);
    span.record("gen_ai.usage.cache_read.input_tokens", reads);
    span.record("gen_ai.usage.cache_write.input_tokens", int(writes));
    // The name before semantic-conventions-genai renamed it, for backends that know it.
    span.record("gen_ai.usage.cache_creation.input_tokens", int(writes));
}

/// Records a string-array attribute. On a span bridged to OpenTelemetry (feature `otel`,
/// `tracing-opentelemetry` layer installed) it is set as an OpenTelemetry string array;
/// otherwise the `tracing` field holds the array as JSON text (`["end_turn"]`), since
/// `tracing` fields have no array type.
pub(crate) fn record_strings(span: &Span, key: &'static str, values: &[&str]) {
    #[cfg(feature = "otel")]
    if crate::otel::set_string_array(span, key, values) {
        return;
    }
    let text = serde_json::to_string(values).unwrap_or_default();
    span.record(key, text.as_str());
}

/// Metrics of a granted attempt (feature `otel`, when the pipeline has metrics): its
/// queue wait, and the deployment's throttle factor and bucket levels.
pub(crate) async fn measure_grant(rt: &ModelRuntime, deployment: usize, queue_wait: Duration) {
    #[cfg(feature = "otel")]
    if let Some(metrics) = &rt.config.metrics {
        let model = rt.model_attributes(deployment);
        metrics.record_queue_wait(&model, queue_wait);
        if let Ok(snapshot) = rt.deployments[deployment].limiter.snapshot().await {
            metrics.record_limiter(&model, &snapshot);
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = (rt, deployment, queue_wait);
}

/// Counts a 429 (feature `otel`).
pub(crate) fn measure_rate_limited(rt: &ModelRuntime, deployment: usize) {
    #[cfg(feature = "otel")]
    if let Some(metrics) = &rt.config.metrics {
        metrics.record_rate_limited(&rt.model_attributes(deployment));
    }
    #[cfg(not(feature = "otel"))]
    let _ = (rt, deployment);
}

/// A finished call's duration and tokens (feature `otel`).
pub(crate) fn measure_call(
    rt: &ModelRuntime,
    operation: &'static str,
    response_model: Option<&str>,
    error_type: Option<&'static str>,
    duration: Duration,
    usage: &Usage,
) {
    #[cfg(feature = "otel")]
    if let Some(metrics) = &rt.config.metrics {
        metrics.record_call(&crate::otel::CallMeasure {
            model: rt.model_attributes(0),
            operation: operation_name(operation),
            response_model,
            error_type,
            duration,
            usage: Some(*usage),
        });
    }
    #[cfg(not(feature = "otel"))]
    let _ = (rt, operation, response_model, error_type, duration, usage);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_and_decisions_are_chat_operations() {
        assert_eq!(operation_name("chat"), "chat");
        assert_eq!(operation_name("chat_stream"), "chat");
        assert_eq!(operation_name("decision"), "chat");
        assert_eq!(operation_name("embeddings"), "embeddings");
    }
}
