//! Spans and metrics to stdout: one chat call and one stream on the `fake` provider,
//! traced through `tracing-opentelemetry` and measured with tollgate's `otel` metrics,
//! both exported by `opentelemetry-stdout`. No keys, no network.
//!
//! Run it with `cargo run -p tollgate-examples --features otel --example otel_stdout`.

use std::sync::Arc;

use futures::StreamExt;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::otel::{MetricNames, Metrics};
use tollgate::pipeline::PipelineConfig;
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tracing_subscriber::layer::SubscriberExt;

use tollgate_fake as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Spans: tollgate's `tracing` spans, bridged to an OpenTelemetry tracer.
    let tracer_provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("app"));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;

    // Metrics: tollgate's instruments on a meter of the application's meter provider;
    // `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` picks the newest names.
    let meter_provider = SdkMeterProvider::builder()
        .with_periodic_exporter(opentelemetry_stdout::MetricExporter::default())
        .build();
    let metrics = Metrics::new(&meter_provider.meter("tollgate"), MetricNames::from_env());

    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("assistant", "fake", "fake-chat-1")
                .with_limits(Limits {
                    rpm: 60,
                    tpm: 100_000,
                    ..Limits::default()
                })
                .with_output_tokens(4096, 512)
                .with_option("replies", vec!["Traced.", "Streamed and traced."]),
        )
        .build()?;
    let models = Models::builder()
        .catalog(catalog)
        .pipeline(PipelineConfig {
            metrics: Some(Arc::new(metrics)),
            ..PipelineConfig::default()
        })
        .build()?;

    let chat = models.chat("assistant").await?;
    let request = Conversation::new()
        .user("Hello?")
        .request("assistant", SamplingParams::new().with_temperature(0.2)?)?;
    chat.single_response(&request).await?;
    let mut stream = chat.stream_response(&request).await?;
    while let Some(event) = stream.next().await {
        event?;
    }
    drop(stream);

    // Flush: the spans were exported as they ended; the metrics go out now.
    meter_provider.shutdown()?;
    tracer_provider.shutdown()?;
    Ok(())
}
