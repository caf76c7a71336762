//! OpenTelemetry (feature `otel`): the GenAI client metrics ([`Metrics`], handed to the
//! pipeline through [`crate::PipelineConfig::metrics`]) and the array-valued span
//! attributes that `tracing` fields cannot carry, set on spans bridged to OpenTelemetry
//! by `tracing-opentelemetry`. The spans themselves are `tracing` spans, made whether or
//! not the feature is on; see `docs/observability.md`.

mod metrics;
mod spans;

pub use metrics::{DURATION_BUCKETS, METER_NAME, MetricNames, Metrics, TOKEN_USAGE_BUCKETS};

pub(crate) use metrics::{CallMeasure, ModelAttributes};
pub(crate) use spans::set_string_array;
