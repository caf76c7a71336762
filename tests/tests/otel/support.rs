//! An in-memory OpenTelemetry pipeline: `tracing` spans bridged by

//! `tracing-opentelemetry` to an SDK tracer with an in-memory span exporter, and
//! tollgate's metrics on an SDK meter with an in-memory metric exporter; and the fake
//! provider behind `Models`.

use std::sync::Arc;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::otel::{MetricNames, Metrics};
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{Catalog, Models};
use tollgate_fake::FakeProvider;
use tracing_subscriber::layer::SubscriberExt;

/// The secret every model's credential resolves to: it must reach no attribute.
pub(crate) const SECRET: &str = "sk-live-never-in-telemetry";

/// The chat model `m`: provider `fake`, sent to `https://fake.example:8443`.
pub(crate) fn chat_entry() -> ModelEntry {
    ModelEntry::new("m", "fake", "fake-model-1")
        .with_output_tokens(4000, 500)
        .with_limits(Limits {
            rpm: 600,
            tpm: 1_000_000,
            ..Limits::default()
        })
        .with_credential("key")
        .with_option("base_url", "https://fake.example:8443/v1")
}

pub(crate) struct Telemetry {
    pub(crate) spans: InMemorySpanExporter,
    pub(crate) metrics: InMemoryMetricExporter,
    meter_provider: SdkMeterProvider,
    _tracer_provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
    pub(crate) fake: FakeProvider,
    pub(crate) models: Models,
}

impl Telemetry {
    /// `entries` behind the fake provider, traced and measured in memory with `names`.
    pub(crate) fn new(catalog: Catalog, names: MetricNames) -> Self {
        let spans = InMemorySpanExporter::default();
        let tracer_provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("test"));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

        let metrics = InMemoryMetricExporter::default();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(metrics.clone()).build())
            .build();
        let meter = meter_provider.meter("tollgate");

        let fake = FakeProvider::new();
        let store = tollgate::credentials::MemoryCredentialStore::new().with("key", SECRET);
        let models = Models::builder()
            .catalog(catalog)
            .credentials(store)
            .provider(fake.clone())
            .pipeline(PipelineConfig {
                retry: RetryPolicy {
                    jitter_seed: Some(7),
                    ..RetryPolicy::default()
                },
                metrics: Some(Arc::new(Metrics::new(&meter, names))),
                ..PipelineConfig::default()
            })
            .build()
            .unwrap();
        Telemetry {
            spans,
            metrics,
            meter_provider,
            _tracer_provider: tracer_provider,
            _guard: guard,
            fake,
            models,
        }
    }

    /// Every finished span, call spans before... in the order they ended.
    pub(crate) fn finished_spans(&self) -> Vec<SpanData> {
        let spans = self.spans.get_finished_spans().unwrap();
        for span in &spans {
            for kv in &span.attributes {
                assert!(
                    !kv.value.as_str().contains(SECRET),
                    "a secret in span attribute {kv:?}"
                );
            }
        }
        spans
    }

    /// The spans named `name`.
    pub(crate) fn spans_named(&self, name: &str) -> Vec<SpanData> {
        self.finished_spans()
            .into_iter()
            .filter(|s| s.name == name)
            .collect()
    }

    /// Every metric collected so far (checked for secrets).
    pub(crate) fn collect(&self) -> ResourceMetrics {
        self.meter_provider.force_flush().unwrap();
        let mut exported = self.metrics.get_finished_metrics().unwrap();
        let last = exported.pop().expect("metrics were exported");
        for metric in last.scope_metrics().flat_map(|s| s.metrics()) {
            for attributes in points(metric) {
                for kv in attributes {
                    assert!(!kv.value.as_str().contains(SECRET), "{kv:?}");
                }
            }
        }
        last
    }
}

/// The attribute `key` of `span`.
pub(crate) fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// How many times `key` is set on `span` (each attribute is set once).
pub(crate) fn times_set(span: &SpanData, key: &str) -> usize {
    span.attributes
        .iter()
        .filter(|kv| kv.key.as_str() == key)
        .count()
}

pub(crate) fn string(value: &str) -> Option<Value> {
    Some(Value::from(value.to_owned()))
}

pub(crate) fn int(value: i64) -> Option<Value> {
    Some(Value::I64(value))
}

pub(crate) fn strings(values: &[&str]) -> Option<Value> {
    Some(Value::Array(opentelemetry::Array::String(
        values.iter().map(|v| v.to_string().into()).collect(),
    )))
}

/// The metric named `name`.
pub(crate) fn metric<'a>(metrics: &'a ResourceMetrics, name: &str) -> &'a Metric {
    find_metric(metrics, name).unwrap_or_else(|| panic!("no metric {name}"))
}

/// The metric named `name`, if it was recorded.
pub(crate) fn find_metric<'a>(metrics: &'a ResourceMetrics, name: &str) -> Option<&'a Metric> {
    metrics
        .scope_metrics()
        .flat_map(|s| s.metrics())
        .find(|m| m.name() == name)
}

/// Each data point's attributes.
pub(crate) fn points(metric: &Metric) -> Vec<Vec<KeyValue>> {
    fn of<T>(data: &MetricData<T>) -> Vec<Vec<KeyValue>> {
        match data {
            MetricData::Gauge(g) => g
                .data_points()
                .map(|p| p.attributes().cloned().collect())
                .collect(),
            MetricData::Sum(s) => s
                .data_points()
                .map(|p| p.attributes().cloned().collect())
                .collect(),
            MetricData::Histogram(h) => h
                .data_points()
                .map(|p| p.attributes().cloned().collect())
                .collect(),
            MetricData::ExponentialHistogram(h) => h
                .data_points()
                .map(|p| p.attributes().cloned().collect())
                .collect(),
        }
    }
    match metric.data() {
        AggregatedMetrics::F64(d) => of(d),
        AggregatedMetrics::U64(d) => of(d),
        AggregatedMetrics::I64(d) => of(d),
    }
}

/// The value of attribute `key` in `attributes`.
pub(crate) fn get(attributes: &[KeyValue], key: &str) -> Option<Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

/// An f64 histogram's points: (attributes, count, sum, bounds).
pub(crate) fn f64_histogram(metric: &Metric) -> Vec<(Vec<KeyValue>, u64, f64, Vec<f64>)> {
    match metric.data() {
        AggregatedMetrics::F64(MetricData::Histogram(h)) => h
            .data_points()
            .map(|p| {
                (
                    p.attributes().cloned().collect(),
                    p.count(),
                    p.sum(),
                    p.bounds().collect(),
                )
            })
            .collect(),
        other => panic!("{} is not an f64 histogram: {other:?}", metric.name()),
    }
}

/// A u64 histogram's points: (attributes, count, sum, bounds).
pub(crate) fn u64_histogram(metric: &Metric) -> Vec<(Vec<KeyValue>, u64, u64, Vec<f64>)> {
    match metric.data() {
        AggregatedMetrics::U64(MetricData::Histogram(h)) => h
            .data_points()
            .map(|p| {
                (
                    p.attributes().cloned().collect(),
                    p.count(),
                    p.sum(),
                    p.bounds().collect(),
                )
            })
            .collect(),
        other => panic!("{} is not a u64 histogram: {other:?}", metric.name()),
    }
}

/// A u64 counter's points: (attributes, value).
pub(crate) fn u64_sum(metric: &Metric) -> Vec<(Vec<KeyValue>, u64)> {
    match metric.data() {
        AggregatedMetrics::U64(MetricData::Sum(s)) => s
            .data_points()
            .map(|p| (p.attributes().cloned().collect(), p.value()))
            .collect(),
        other => panic!("{} is not a u64 sum: {other:?}", metric.name()),
    }
}

/// An f64 gauge's points: (attributes, value).
pub(crate) fn f64_gauge(metric: &Metric) -> Vec<(Vec<KeyValue>, f64)> {
    match metric.data() {
        AggregatedMetrics::F64(MetricData::Gauge(g)) => g
            .data_points()
            .map(|p| (p.attributes().cloned().collect(), p.value()))
            .collect(),
        other => panic!("{} is not an f64 gauge: {other:?}", metric.name()),
    }
}
