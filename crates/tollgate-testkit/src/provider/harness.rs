//! One scripted server and the `Models` in front of it, built from a [`WireScript`]:
//! what every check starts from.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tollgate::catalog::{EmbeddingCapabilities, Limits, Price};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::limit::LimiterBackend;
use tollgate::pipeline::{MemoryRecorder, PipelineConfig, RetryPolicy};
use tollgate::{
    Catalog, Conversation, Dimension, Error, JobContext, LlmRequest, LlmResponse, ModelEntry,
    Models, SamplingParams, StreamEvent,
};

use super::counting::CountingLimiters;
use super::script::{EmbeddingsWire, WireScript, WireUsage};
use super::server::ScriptServer;

/// The catalog id of the model under test.
pub const MODEL: &str = "kit-model";
/// The catalog id of a second model of the provider, on the same server, that declares a
/// context window (the larger-window fallback's target).
pub const LARGER: &str = "kit-model-larger";
/// The context window [`LARGER`] declares.
pub const LARGER_WINDOW: u64 = 1_000_000;
/// The catalog id of the provider's embeddings model, in a kit made by
/// [`Kit::with_embeddings`].
pub const EMBEDDINGS: &str = "kit-embeddings";
/// The deployment's embedding width (`[embeddings] width`) in a kit made by
/// [`Kit::with_embeddings`].
pub const EMBEDDING_WIDTH: u64 = 8;
/// What [`Kit::from_toml`] replaces with the kit's server
/// address in a catalog's text.
pub const BASE_URL: &str = "$BASE_URL";
/// The credential id the model names.
pub const CREDENTIAL: &str = "kit-credential";
/// The secret every check uses: it must never show anywhere, in any form. It holds `/`,
/// `+` and `=`, which JSON encoders and URLs escape (as in an AWS secret key or a base64
/// token), so a server quoting it escaped is a different text from the raw key.
pub const SECRET: &str = "sk-kit/SENTINEL+7f3a9c2e=do-not-leak";
/// The usage every scripted answer reports.
pub const USAGE: WireUsage = WireUsage {
    input: 12,
    output: 4,
};
/// Catalog prices (USD per million tokens), so every answer has a cost.
pub const PRICE: Price = Price {
    input: 3.0,
    output: 15.0,
    cache_read: 0.3,
    cache_write: 3.75,
    cache_write_1h: None,
};
/// The requests-per-minute limit the catalog gives the model.
pub const RPM: u64 = 1000;

/// A change to a model's catalog entry.
pub type Tweak = fn(ModelEntry) -> ModelEntry;

/// A server, the store, the recorder and `Models` for one check.
#[allow(missing_debug_implementations)]
pub struct Kit<'a> {
    /// The provider's script.
    pub script: &'a dyn WireScript,
    /// The server the model is pointed at.
    pub server: ScriptServer,
    /// The credential store (holding `credential(SECRET)`).
    pub store: Arc<MemoryCredentialStore>,
    /// Every call and attempt.
    pub recorder: Arc<MemoryRecorder>,
    /// Retries with tiny real-time delays (the server does real I/O).
    pub models: Models,
    /// Counts the reservations every model's limiter granted.
    pub limiters: CountingLimiters,
}

impl<'a> Kit<'a> {
    /// A fresh server and `Models` for `script`.
    pub async fn new(script: &'a dyn WireScript) -> Kit<'a> {
        Kit::with_model(script, |entry| entry).await
    }

    /// [`Kit::new`], with the model's catalog entry changed by `tweak` (a smaller size
    /// cap, a shorter idle timeout).
    pub async fn with_model(
        script: &'a dyn WireScript,
        tweak: impl FnOnce(ModelEntry) -> ModelEntry,
    ) -> Kit<'a> {
        Kit::with_models(script, tweak, &[]).await
    }

    /// [`Kit::with_model`], with more models of the provider on the same server, each
    /// made as the model under test is (`kit_entry`) and changed by its function.
    pub async fn with_models(
        script: &'a dyn WireScript,
        tweak: impl FnOnce(ModelEntry) -> ModelEntry,
        more: &[(&str, Tweak)],
    ) -> Kit<'a> {
        let server = ScriptServer::start().await;
        let mut entries = vec![tweak(kit_entry(script, MODEL, server.uri()))];
        entries.extend(
            more.iter()
                .map(|(id, tweak)| tweak(kit_entry(script, id, server.uri()))),
        );
        let catalog = entries
            .into_iter()
            .fold(Catalog::builder(), |catalog, entry| catalog.model(entry))
            .build()
            .unwrap_or_else(|e| panic!("the script's model entry is not a valid catalog: {e}"));
        Kit::on(script, server, catalog)
    }

    /// A kit whose catalog holds the chat model and, as [`EMBEDDINGS`], the script's
    /// embeddings model (at the deployment width [`EMBEDDING_WIDTH`]); `None` when the
    /// script has no embeddings. Returns the script's embeddings wire too.
    pub async fn with_embeddings(
        script: &'a dyn WireScript,
    ) -> Option<(Kit<'a>, &'a dyn EmbeddingsWire)> {
        let wire = script.embeddings()?;
        let server = ScriptServer::start().await;
        let embeddings = wire
            .model(EMBEDDINGS, server.uri(), CREDENTIAL)
            .with_credential(CREDENTIAL)
            .with_limits(Limits {
                rpm: RPM,
                ..Limits::default()
            })
            .with_price(PRICE);
        let catalog = Catalog::builder()
            .model(kit_entry(script, MODEL, server.uri()))
            .model(embeddings)
            .embedding_width(EMBEDDING_WIDTH)
            .build()
            .unwrap_or_else(|e| {
                panic!("the script's embeddings model is not a valid catalog: {e}")
            });
        Some((Kit::on(script, server, catalog), wire))
    }

    /// A kit whose models are the catalog `toml`, loaded as an application loads its
    /// catalog, with every [`BASE_URL`] in it replaced by the kit's server address; the
    /// store holds the secret as [`CREDENTIAL`]. For a provider's own tests of what a
    /// catalog says (its options, its limits), against the kit's server:
    ///
    /// ```ignore
    /// let kit = Kit::from_toml(&MyWire, r#"
    ///     [models.kit-model]
    ///     provider = "my-provider"
    ///     credential = "kit-credential"
    ///     max_output_tokens = 1000
    ///     rpm = 60
    ///     options = { base_url = "$BASE_URL" }
    /// "#).await;
    /// ```
    pub async fn from_toml(script: &'a dyn WireScript, toml: &str) -> Kit<'a> {
        let server = ScriptServer::start().await;
        let catalog = catalog_from_toml(toml, server.uri());
        Kit::on(script, server, catalog)
    }

    fn on(script: &'a dyn WireScript, server: ScriptServer, catalog: Catalog) -> Kit<'a> {
        let store =
            Arc::new(MemoryCredentialStore::new().with(CREDENTIAL, script.credential(SECRET)));
        let recorder = Arc::new(MemoryRecorder::new());
        let limiters = CountingLimiters::default();
        let models = models_of(
            script,
            catalog,
            store.clone(),
            recorder.clone(),
            limiters.clone(),
        );
        Kit {
            script,
            server,
            store,
            recorder,
            models,
            limiters,
        }
    }

    /// The same models for a job allowed no retries.
    pub fn no_retries(&self) -> Models {
        self.models.for_job(JobContext::new("no-retries", 0))
    }

    /// One whole answer through `models`.
    pub async fn ask(&self, models: &Models) -> tollgate::Result<LlmResponse> {
        models.chat(MODEL).await?.single_response(&request()).await
    }

    /// One streamed answer through `models`: the events read, and the error that ended
    /// it, if any.
    pub async fn stream(&self, models: &Models) -> (Vec<StreamEvent>, Option<Error>) {
        let chat = match models.chat(MODEL).await {
            Ok(chat) => chat,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut stream = match chat.stream_response(&request()).await {
            Ok(s) => s,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(e) => events.push(e),
                Err(e) => return (events, Some(e)),
            }
        }
        (events, None)
    }

    /// The requests-per-minute bucket's level and capacity now.
    pub async fn requests_bucket(&self) -> (f64, u64) {
        let snapshot = self
            .models
            .limiter(MODEL)
            .expect("the model has a limiter")
            .snapshot()
            .await
            .expect("the in-process limiter answers");
        snapshot
            .levels
            .iter()
            .find(|(d, _, _)| *d == Dimension::Requests)
            .map(|(_, level, capacity)| (*level, *capacity))
            .expect("the model has an rpm limit")
    }
}

/// When a check is done with its kit: nothing may still hold or wait for capacity. Every
/// reservation made was settled, given back or dropped (so the buckets hold exactly what
/// the sends charged), whatever failed.
impl Drop for Kit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let ids: Vec<String> = self
            .models
            .catalog()
            .models()
            .map(|m| m.id.clone())
            .collect();
        for id in ids {
            let limiters = self
                .models
                .limiters(&id)
                .expect("a catalog model has limiters");
            for limiter in limiters {
                assert_settled(&id, limiter.as_ref());
            }
        }
    }
}

/// Every reservation `limiter` made was settled, given back or dropped.
fn assert_settled(id: &str, limiter: &dyn LimiterBackend) {
    // The in-process limiter answers at once.
    let snapshot = futures::FutureExt::now_or_never(limiter.snapshot())
        .expect("the in-process limiter answers at once")
        .expect("a snapshot");
    assert_eq!(
        (snapshot.held, snapshot.queued),
        (0, 0),
        "`{id}`: a reservation was left held or a waiter left queued: {snapshot:?}"
    );
}

/// After a check, with every kit dropped: lets the paused clock run an hour (so that a
/// stalled server finishes) and checks that no task is left running: no connection, no
/// limiter driver, no stream pump outlived its call.
pub async fn assert_no_task_left() {
    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert_eq!(alive, 0, "{alive} tasks outlived the check");
}

/// `Models` for one model of `script`'s provider at `base_url`.
pub fn models(
    script: &dyn WireScript,
    base_url: &str,
    store: Arc<MemoryCredentialStore>,
    recorder: Arc<MemoryRecorder>,
) -> Models {
    let catalog = Catalog::builder()
        .model(kit_entry(script, MODEL, base_url))
        .build()
        .unwrap_or_else(|e| panic!("the script's model entry is not a valid catalog: {e}"));
    models_of(
        script,
        catalog,
        store,
        recorder,
        CountingLimiters::default(),
    )
}

fn catalog_from_toml(toml: &str, base_url: &str) -> Catalog {
    Catalog::from_toml_str(&toml.replace(BASE_URL, base_url))
        .unwrap_or_else(|e| panic!("the catalog given to the kit does not load: {e}"))
}

/// A chat model `id` of `script`'s provider at `base_url`, as every check has it: the
/// kit's credential, output tokens, requests-per-minute limit and prices.
fn kit_entry(script: &dyn WireScript, id: &str, base_url: &str) -> ModelEntry {
    script
        .chat_model(id, base_url, CREDENTIAL)
        .with_credential(CREDENTIAL)
        .with_output_tokens(2000, 500)
        // Requests only: providers differ in which token limits they take (Gemini's
        // counts input only), and no check here is about tokens.
        .with_limits(Limits {
            rpm: RPM,
            ..Limits::default()
        })
        .with_price(PRICE)
}

fn models_of(
    script: &dyn WireScript,
    catalog: Catalog,
    store: Arc<MemoryCredentialStore>,
    recorder: Arc<MemoryRecorder>,
    limiters: CountingLimiters,
) -> Models {
    script
        .register(Models::builder())
        .catalog(catalog)
        .credentials_arc(store)
        .limiter_backend(limiters)
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                jitter_seed: Some(7),
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        })
        // After `pipeline`, which would replace it.
        .recorder(recorder)
        .build()
        .unwrap_or_else(|e| panic!("Models for the script's provider: {e}"))
}

/// An embeddings model `model_id` of `provider` (its name `name`) that takes a
/// dimensions parameter, so the deployment's width is asked of it; at `base_url` (an
/// `options.base_url`), with `options.embedding_batch = 2`, the option most HTTP
/// providers here read their `max_batch` from. What an [`EmbeddingsWire::model`] returns
/// for such a provider.
pub fn embeddings_entry(model_id: &str, provider: &str, name: &str, base_url: &str) -> ModelEntry {
    ModelEntry::new(model_id, provider, name)
        .with_embedding(EmbeddingCapabilities {
            dimensions_param: true,
            ..EmbeddingCapabilities::default()
        })
        .with_option("base_url", base_url)
        .with_option("embedding_batch", 2)
}

/// The request every check sends.
pub fn request() -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request(MODEL, SamplingParams::new())
        .expect("a valid request")
}

/// The text of a stream's events, in order.
pub fn streamed_text(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Every log line and span field (at TRACE), as text, one `[target] field=value` per
/// line; events from the `skip` target prefixes are left out.
#[derive(Clone, Default)]
#[allow(missing_debug_implementations)]
pub struct Logs(Arc<Mutex<String>>, Arc<Vec<&'static str>>);

impl Logs {
    /// A capture leaving out events whose target starts with one of `skip`.
    pub fn skipping(skip: &[&'static str]) -> Logs {
        Logs(Arc::default(), Arc::new(skip.to_vec()))
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl tracing::field::Visit for Logs {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let mut text = self.0.lock().unwrap_or_else(|p| p.into_inner());
        text.push_str(&format!("{}={value:?}\n", field.name()));
    }
}

impl tracing::Subscriber for Logs {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        span.record(&mut self.clone());
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        values.record(&mut self.clone());
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let target = event.metadata().target();
        if self.1.iter().any(|skip| target.starts_with(skip)) {
            return;
        }
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_str(&format!("[{target}] "));
        event.record(&mut self.clone());
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
