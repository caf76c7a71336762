//! Spans and metrics to an OpenTelemetry collector over OTLP/HTTP: the stdout example's
//! calls, exported in batches to `OTEL_EXPORTER_OTLP_ENDPOINT` (default
//! `http://localhost:4318`). Built by `cargo xtask test-all`, never run by it.
//!
//! Run it with a collector listening:
//! `cargo run -p tollgate-examples --features otel --example otel_otlp`.

use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::otel::Metrics;
use tollgate::pipeline::PipelineConfig;
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tracing_subscriber::layer::SubscriberExt;

use tollgate_fake as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The exporters read OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables).
    let resource = Resource::builder()
        .with_service_name("tollgate-example")
        .build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let tracer_provider = SdkTracerProvider::builder()
        .with_resource(resource.clone())
        .with_batch_exporter(spans)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("app"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;

    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .build()?;
    let meter_provider = SdkMeterProvider::builder()
        .with_resource(resource)
        .with_periodic_exporter(exporter)
        .build();
    // As a library would: tollgate's instruments on the global meter provider.
    opentelemetry::global::set_meter_provider(meter_provider.clone());
    let metrics = Metrics::global();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let catalog = Catalog::builder()
            .model(
                ModelEntry::new("assistant", "fake", "fake-chat-1")
                    .with_limits(Limits {
                        rpm: 60,
                        ..Limits::default()
                    })
                    .with_output_tokens(4096, 512)
                    .with_option("replies", vec!["Sent to the collector."]),
            )
            .build()?;
        let models = Models::builder()
            .catalog(catalog)
            .pipeline(PipelineConfig {
                metrics: Some(Arc::new(metrics)),
                ..PipelineConfig::default()
            })
            .build()?;
        let request = Conversation::new()
            .user("Hello?")
            .request("assistant", SamplingParams::new())?;
        models
            .chat("assistant")
            .await?
            .single_response(&request)
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;

    // The batch processor and the periodic reader export on shutdown.
    tracer_provider.shutdown()?;
    meter_provider.shutdown()?;
    Ok(())
}
