//! Every call opens a `tracing` span named with OpenTelemetry GenAI attributes, and no
//! secret ever appears in it.

use std::sync::{Arc, Mutex};

use tollgate::catalog::{Limits, ModelEntry};
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tollgate_fake::{FakeProvider, FakeReply};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A subscriber that keeps every span field it is given, as text.
#[derive(Default, Clone)]
struct Fields(Arc<Mutex<Vec<(String, String)>>>);

struct Collect<'a>(&'a Mutex<Vec<(String, String)>>);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .lock()
            .unwrap()
            .push((field.name().to_string(), format!("{value:?}")));
    }
}

impl Subscriber for Fields {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        span.record(&mut Collect(&self.0));
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Collect(&self.0));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        event.record(&mut Collect(&self.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test(start_paused = true)]
async fn calls_are_traced_with_opentelemetry_genai_attributes_and_no_secrets() {
    let fields = Fields::default();
    let _guard = tracing::subscriber::set_default(fields.clone());
    let fake = FakeProvider::new();
    fake.reply(
        "m",
        FakeReply::text("ok").with_usage(tollgate::Usage {
            input_tokens: 12,
            output_tokens: 3,
            ..Default::default()
        }),
    );
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("m", "fake", "fake-model-1")
                .with_output_tokens(100, 50)
                .with_limits(Limits {
                    rpm: 10,
                    ..Limits::default()
                })
                .with_credential("secret-id"),
        )
        .build()
        .unwrap();
    let store =
        tollgate::credentials::MemoryCredentialStore::new().with("secret-id", "sk-live-do-not-log");
    let models = Models::builder()
        .catalog(catalog)
        .credentials(store)
        .provider(fake)
        .build()
        .unwrap();
    let request = Conversation::new()
        .user("hello")
        .request("m", SamplingParams::new())
        .unwrap();
    models
        .chat("m")
        .await
        .unwrap()
        .single_response(&request)
        .await
        .unwrap();

    let seen = fields.0.lock().unwrap().clone();
    let get = |name: &str| seen.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(get("gen_ai.operation.name").as_deref(), Some("\"chat\""));
    assert_eq!(get("gen_ai.request.model").as_deref(), Some("fake-model-1"));
    assert_eq!(get("gen_ai.provider.name").as_deref(), Some("\"fake\""));
    assert_eq!(get("gen_ai.usage.input_tokens").as_deref(), Some("12"));
    assert_eq!(get("gen_ai.usage.output_tokens").as_deref(), Some("3"));
    assert_eq!(get("gen_ai.request.max_tokens").as_deref(), Some("50"));
    // Without an OpenTelemetry bridge the array is JSON text in the `tracing` field.
    assert_eq!(
        get("gen_ai.response.finish_reasons").as_deref(),
        Some("\"[\\\"end_turn\\\"]\"")
    );
    assert_eq!(
        get("gen_ai.response.model").as_deref(),
        Some("\"fake-model-1\"")
    );
    assert_eq!(get("tollgate.attempt.number").as_deref(), Some("1"));
    assert!(seen.iter().all(|(_, v)| !v.contains("sk-live")), "{seen:?}");
}
