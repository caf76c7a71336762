//! The GenAI client metrics and tollgate's own, recorded through an OpenTelemetry
//! [`Meter`]: call duration and token usage with the conventions' bucket boundaries,
//! queue wait, 429s, throttle factor and bucket levels per model.

use std::fmt;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};

use crate::limit::LimiterSnapshot;
use crate::usage::Usage;

/// The instrumentation scope name tollgate's meter uses with [`Metrics::global`].
pub const METER_NAME: &str = "tollgate";

/// The conventions' explicit bucket boundaries for `gen_ai.client.operation.duration`
/// (and `gen_ai.client.inference.duration`), in seconds; tollgate's queue wait uses them
/// too.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The conventions' explicit bucket boundaries for `gen_ai.client.token.usage` (and the
/// per-operation token histograms), in tokens.
pub const TOKEN_USAGE_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// Which generation of the GenAI metric names to emit. The conventions are in
/// development and renamed their client metrics when they moved to their own
/// repository; backends and dashboards know the first names, the newest
/// instrumentations emit the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricNames {
    /// Semantic conventions v1.36–v1.42: `gen_ai.client.operation.duration` and the
    /// `gen_ai.client.token.usage` histogram with `gen_ai.token.type` (the default).
    #[default]
    V1_42,
    /// The latest experimental names (semantic-conventions-genai):
    /// `gen_ai.client.inference.duration` for chat (`gen_ai.client.operation.duration`
    /// stays for embeddings), `gen_ai.client.inference.usage.*` counters and the
    /// `gen_ai.client.inference.operation.{input,output}_tokens` histograms.
    LatestExperimental,
}

impl MetricNames {
    /// [`MetricNames::LatestExperimental`] when `OTEL_SEMCONV_STABILITY_OPT_IN` lists
    /// `gen_ai_latest_experimental` (the conventions' opt-in), else the default.
    pub fn from_env() -> Self {
        Self::from_opt_in(
            std::env::var("OTEL_SEMCONV_STABILITY_OPT_IN")
                .ok()
                .as_deref(),
        )
    }

    /// As [`MetricNames::from_env`], from the variable's value.
    pub fn from_opt_in(value: Option<&str>) -> Self {
        let opted_in = value.is_some_and(|v| {
            v.split(',')
                .any(|item| item.trim() == "gen_ai_latest_experimental")
        });
        if opted_in {
            MetricNames::LatestExperimental
        } else {
            MetricNames::V1_42
        }
    }
}

/// tollgate's metric instruments, made once from a [`Meter`] and shared by every call
/// of a [`crate::Models`] through [`crate::PipelineConfig::metrics`].
#[derive(Clone)]
pub struct Metrics {
    names: MetricNames,
    operation_duration: Histogram<f64>,
    token_usage: Histogram<u64>,
    inference_duration: Histogram<f64>,
    usage_input: Counter<u64>,
    usage_output: Counter<u64>,
    usage_cache_read: Counter<u64>,
    usage_cache_write: Counter<u64>,
    operation_input: Histogram<u64>,
    operation_output: Histogram<u64>,
    queue_wait: Histogram<f64>,
    rate_limited: Counter<u64>,
    throttle_factor: Gauge<f64>,
    bucket_level: Gauge<f64>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// The instruments on `meter`, with the metric names `names`.
    pub fn new(meter: &Meter, names: MetricNames) -> Self {
        let tokens = || TOKEN_USAGE_BUCKETS.to_vec();
        let counter = |name: &'static str, description: &'static str| {
            meter
                .u64_counter(name)
                .with_unit("{token}")
                .with_description(description)
                .build()
        };
        Metrics {
            names,
            operation_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration.")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(tokens())
                .build(),
            inference_duration: meter
                .f64_histogram("gen_ai.client.inference.duration")
                .with_unit("s")
                .with_description("GenAI inference operation duration.")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            usage_input: counter(
                "gen_ai.client.inference.usage.input_tokens",
                "Input tokens used, cached input included.",
            ),
            usage_output: counter(
                "gen_ai.client.inference.usage.output_tokens",
                "Output tokens used.",
            ),
            usage_cache_read: counter(
                "gen_ai.client.inference.usage.cache_read.input_tokens",
                "Input tokens read from the provider's prompt cache.",
            ),
            usage_cache_write: counter(
                "gen_ai.client.inference.usage.cache_write.input_tokens",
                "Input tokens written to the provider's prompt cache.",
            ),
            operation_input: meter
                .u64_histogram("gen_ai.client.inference.operation.input_tokens")
                .with_unit("{token}")
                .with_description("Input tokens per inference operation.")
                .with_boundaries(tokens())
                .build(),
            operation_output: meter
                .u64_histogram("gen_ai.client.inference.operation.output_tokens")
                .with_unit("{token}")
                .with_description("Output tokens per inference operation.")
                .with_boundaries(tokens())
                .build(),
            queue_wait: meter
                .f64_histogram("tollgate.limiter.queue_wait")
                .with_unit("s")
                .with_description(
                    "Time an attempt waited for its reservation on the model's buckets.",
                )
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            rate_limited: meter
                .u64_counter("tollgate.provider.rate_limited")
                .with_unit("{response}")
                .with_description("Rate-limit refusals (HTTP 429) from the provider.")
                .build(),
            throttle_factor: meter
                .f64_gauge("tollgate.limiter.throttle_factor")
                .with_unit("1")
                .with_description(
                    "The adaptive throttle's factor on the model's rate (1 = full rate).",
                )
                .build(),
            bucket_level: meter
                .f64_gauge("tollgate.limiter.bucket_level")
                .with_unit("{token}")
                .with_description("Tokens (or requests) left in the model's bucket, per dimension.")
                .build(),
        }
    }

    /// The instruments on the global meter provider's `tollgate` meter, with the names
    /// `OTEL_SEMCONV_STABILITY_OPT_IN` asks for. Install the global provider first:
    /// instruments made before are no-ops.
    pub fn global() -> Self {
        Self::new(
            &opentelemetry::global::meter(METER_NAME),
            MetricNames::from_env(),
        )
    }

    /// Which metric names these instruments emit.
    pub fn names(&self) -> MetricNames {
        self.names
    }

    /// A finished call: its duration and, when the provider reported any, its tokens.
    pub(crate) fn record_call(&self, call: &CallMeasure<'_>) {
        let mut attributes = call.model.common(call.operation);
        if let Some(model) = call.response_model {
            attributes.push(KeyValue::new("gen_ai.response.model", model.to_owned()));
        }
        let mut timed = attributes.clone();
        if let Some(error) = call.error_type {
            timed.push(KeyValue::new("error.type", error));
        }
        let seconds = call.duration.as_secs_f64();
        let inference = call.operation != "embeddings";
        let usage = call
            .usage
            .filter(|u| u.total_input_tokens() + u.output_tokens > 0);
        match self.names {
            MetricNames::V1_42 => {
                self.operation_duration.record(seconds, &timed);
                if let Some(usage) = usage {
                    for (kind, tokens) in [
                        ("input", usage.total_input_tokens()),
                        ("output", usage.output_tokens),
                    ] {
                        let mut a = attributes.clone();
                        a.push(KeyValue::new("gen_ai.token.type", kind));
                        self.token_usage.record(tokens, &a);
                    }
                }
            }
            MetricNames::LatestExperimental => {
                if inference {
                    self.inference_duration.record(seconds, &timed);
                } else {
                    self.operation_duration.record(seconds, &timed);
                }
                if let Some(usage) = usage {
                    let writes = usage.cache_write_tokens + usage.cache_write_1h_tokens;
                    self.usage_input
                        .add(usage.total_input_tokens(), &attributes);
                    self.usage_output.add(usage.output_tokens, &attributes);
                    self.usage_cache_read
                        .add(usage.cache_read_tokens, &attributes);
                    self.usage_cache_write.add(writes, &attributes);
                    if inference {
                        self.operation_input
                            .record(usage.total_input_tokens(), &attributes);
                        self.operation_output
                            .record(usage.output_tokens, &attributes);
                    }
                }
            }
        }
    }

    /// An attempt's wait for its reservation.
    pub(crate) fn record_queue_wait(&self, model: &ModelAttributes<'_>, wait: Duration) {
        self.queue_wait.record(wait.as_secs_f64(), &model.limiter());
    }

    /// A 429 from the provider.
    pub(crate) fn record_rate_limited(&self, model: &ModelAttributes<'_>) {
        self.rate_limited.add(1, &model.limiter());
    }

    /// The model's buckets and throttle as `snapshot` saw them.
    pub(crate) fn record_limiter(&self, model: &ModelAttributes<'_>, snapshot: &LimiterSnapshot) {
        let attributes = model.limiter();
        self.throttle_factor
            .record(snapshot.rate_factor, &attributes);
        for (dimension, level, _capacity) in &snapshot.levels {
            let mut a = attributes.clone();
            a.push(KeyValue::new(
                "tollgate.limit.dimension",
                dimension.catalog_field(),
            ));
            self.bucket_level.record(*level, &a);
        }
    }
}

/// Who a measurement is about: the attributes every metric of a model carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModelAttributes<'a> {
    /// `gen_ai.provider.name`.
    pub(crate) provider_name: &'static str,
    /// `gen_ai.request.model`: the provider's name for the model.
    pub(crate) request_model: &'a str,
    /// `tollgate.model_id`: the catalog id.
    pub(crate) model_id: &'a str,
    /// `tollgate.deployment`, when the model has several.
    pub(crate) deployment: Option<&'a str>,
    /// `server.address` and `server.port`, when known.
    pub(crate) server: Option<(&'a str, u16)>,
}

impl ModelAttributes<'_> {
    fn common(&self, operation: &'static str) -> Vec<KeyValue> {
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", operation),
            KeyValue::new("gen_ai.provider.name", self.provider_name),
            KeyValue::new("gen_ai.request.model", self.request_model.to_owned()),
        ];
        if let Some((address, port)) = self.server {
            a.push(KeyValue::new("server.address", address.to_owned()));
            a.push(KeyValue::new("server.port", i64::from(port)));
        }
        a
    }

    fn limiter(&self) -> Vec<KeyValue> {
        let mut a = vec![
            KeyValue::new("gen_ai.provider.name", self.provider_name),
            KeyValue::new("gen_ai.request.model", self.request_model.to_owned()),
            KeyValue::new("tollgate.model_id", self.model_id.to_owned()),
        ];
        if let Some(deployment) = self.deployment {
            a.push(KeyValue::new("tollgate.deployment", deployment.to_owned()));
        }
        a
    }
}

/// A finished call, as the metrics see it.
#[derive(Debug)]
pub(crate) struct CallMeasure<'a> {
    pub(crate) model: ModelAttributes<'a>,
    /// `gen_ai.operation.name`.
    pub(crate) operation: &'static str,
    pub(crate) response_model: Option<&'a str>,
    pub(crate) error_type: Option<&'static str>,
    pub(crate) duration: Duration,
    pub(crate) usage: Option<Usage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_metric_names_are_opted_into_by_the_conventions_variable() {
        assert_eq!(MetricNames::from_opt_in(None), MetricNames::V1_42);
        assert_eq!(MetricNames::from_opt_in(Some("http")), MetricNames::V1_42);
        assert_eq!(
            MetricNames::from_opt_in(Some("http, gen_ai_latest_experimental")),
            MetricNames::LatestExperimental
        );
    }

    #[test]
    fn bucket_boundaries_double_and_quadruple_as_the_conventions_define() {
        for pair in DURATION_BUCKETS.windows(2) {
            assert!((pair[1] / pair[0] - 2.0).abs() < 1e-9);
        }
        for pair in TOKEN_USAGE_BUCKETS.windows(2) {
            assert_eq!(pair[1], pair[0] * 4.0);
        }
    }
}
