//! `LlmClient::count_input_tokens` through the pipeline: the provider's counter where
//! its transport has one, tollgate's estimate where it has none, neither reserving on
//! the model's limiter nor recording a call; a chain counts on its first member; a
//! client of one's own that does not count answers a typed refusal.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tollgate::catalog::{Catalog, KnownProviders, Limits};
use tollgate::pipeline::{ChatTransport, MemoryRecorder, PipelineConfig, Signals, TokenCounting};
use tollgate::provider::{
    DefaultEstimator, Provider, ProviderContext, ProviderTransports, TokenEstimator,
};
use tollgate::{
    Conversation, Error, LlmClient, LlmRequest, LlmResponse, ModelEntry, Models, ProviderError,
    ResponseStream, Result, SamplingParams, TokenCount, TokenCounter,
};

/// What the `counting` provider's counter does, by the model's provider name.
fn counter_of(name: &str) -> TokenCounting {
    match name {
        "counts-42" => TokenCounting::Counted(42),
        "counter-down" => TokenCounting::Failed(
            ProviderError::Overloaded {
                status: 529,
                retry_after: None,
            }
            .into(),
        ),
        _ => TokenCounting::Unsupported,
    }
}

#[derive(Debug, Default)]
struct Counting {
    /// Counts and sends, across its models.
    counted: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
}

#[tollgate::async_trait]
impl Provider for Counting {
    fn key(&self) -> &'static str {
        "counting"
    }

    async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Transports {
            counted: self.counted.clone(),
            sent: self.sent.clone(),
        }))
    }
}

#[derive(Debug)]
struct Transports {
    counted: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
}

impl ProviderTransports for Transports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(Chat {
            name: model.name.clone(),
            counted: self.counted.clone(),
            sent: self.sent.clone(),
        }))
    }
}

#[derive(Debug)]
struct Chat {
    name: String,
    counted: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
}

#[tollgate::async_trait]
impl ChatTransport for Chat {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        Err(ProviderError::Overloaded {
            status: 529,
            retry_after: None,
        }
        .into())
    }

    async fn send_stream(&self, _: &LlmRequest, _: &Signals) -> Result<ResponseStream> {
        self.sent.fetch_add(1, Ordering::SeqCst);
        Err(ProviderError::Overloaded {
            status: 529,
            retry_after: None,
        }
        .into())
    }

    async fn count_input_tokens(&self, _: &LlmRequest) -> TokenCounting {
        self.counted.fetch_add(1, Ordering::SeqCst);
        counter_of(&self.name)
    }
}

struct Setup {
    models: Models,
    recorder: Arc<MemoryRecorder>,
    counted: Arc<AtomicU64>,
    sent: Arc<AtomicU64>,
}

/// Models `exact` (a counter), `rough` (none), `down` (a failing counter) and `chain`
/// (`rough` first, then `exact`), each at one request a minute.
fn setup() -> Setup {
    let entry = |id: &str, name: &str| {
        ModelEntry::new(id, "counting", name)
            .with_output_tokens(100, 100)
            .with_limits(Limits {
                rpm: 1,
                ..Limits::default()
            })
    };
    let catalog = Catalog::builder()
        .known_providers(KnownProviders::empty().with("counting", "tollgate-tests", false))
        .model(entry("exact", "counts-42"))
        .model(entry("rough", "no-counter"))
        .model(entry("down", "counter-down"))
        .model(entry("chain", "no-counter").with_fallbacks(["exact"]))
        .build()
        .unwrap();
    let recorder = Arc::new(MemoryRecorder::new());
    let provider = Counting::default();
    let (counted, sent) = (provider.counted.clone(), provider.sent.clone());
    let models = Models::builder()
        .catalog(catalog)
        .provider(provider)
        .pipeline(PipelineConfig {
            recorder: recorder.clone(),
            ..PipelineConfig::default()
        })
        .build()
        .unwrap();
    Setup {
        models,
        recorder,
        counted,
        sent,
    }
}

fn ask(model: &str) -> LlmRequest {
    Conversation::new()
        .with_system("Be brief.")
        .user("How many tokens is this question, roughly?")
        .request(model, SamplingParams::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_transport_with_a_counter_answers_the_providers_count_without_reserving_or_sending() {
    let s = setup();
    let chat = s.models.chat("exact").await.unwrap();
    let before = s.models.limiter("exact").unwrap().snapshot().await.unwrap();
    // Three counts at one request a minute: none waits, as none reserves.
    for _ in 0..3 {
        let counted = chat.count_input_tokens(&ask("exact")).await.unwrap();
        assert_eq!(
            counted,
            TokenCount {
                input_tokens: 42,
                counted_by: TokenCounter::Provider
            }
        );
    }
    let after = s.models.limiter("exact").unwrap().snapshot().await.unwrap();
    assert_eq!((before.grants, after.grants), (0, 0));
    assert_eq!(s.counted.load(Ordering::SeqCst), 3);
    assert_eq!(s.sent.load(Ordering::SeqCst), 0);
    assert!(s.recorder.calls().is_empty(), "a count is not a call");
}

#[tokio::test(start_paused = true)]
async fn a_transport_without_a_counter_answers_tollgates_estimate() {
    let s = setup();
    let chat = s.models.chat("rough").await.unwrap();
    let request = ask("rough");
    let counted = chat.count_input_tokens(&request).await.unwrap();
    assert_eq!(counted.counted_by, TokenCounter::Estimate);
    assert_eq!(
        counted.input_tokens,
        DefaultEstimator.estimate_request(&request)
    );
    assert!(counted.input_tokens > 0);
    assert_eq!(s.sent.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failing_counter_is_the_callers_error_by_type_not_an_estimate() {
    let s = setup();
    let chat = s.models.chat("down").await.unwrap();
    let err = chat.count_input_tokens(&ask("down")).await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Overloaded { .. })),
        "{err:?}"
    );
    // Sent once: a count is not retried.
    assert_eq!(s.counted.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_chain_counts_on_its_first_member() {
    let s = setup();
    let chat = s
        .models
        .chat_with_fallbacks("chain", tollgate::pipeline::FallbackOptions::default())
        .await
        .unwrap();
    let request = ask("chain");
    let counted = chat.count_input_tokens(&request).await.unwrap();
    // `chain` has no counter; `exact`, its fallback, would have said 42.
    assert_eq!(
        counted,
        TokenCount {
            input_tokens: DefaultEstimator.estimate_request(&request),
            counted_by: TokenCounter::Estimate
        }
    );
    assert_eq!(s.counted.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_count_for_another_model_is_refused_naming_the_field() {
    let s = setup();
    let chat = s.models.chat("exact").await.unwrap();
    let err = chat.count_input_tokens(&ask("rough")).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "model_id"),
        "{err:?}"
    );
    assert_eq!(s.counted.load(Ordering::SeqCst), 0);
}

/// A client of one's own that implements only the two answers.
#[derive(Debug)]
struct OwnClient;

#[tollgate::async_trait]
impl LlmClient for OwnClient {
    async fn single_response(&self, _: &LlmRequest) -> Result<LlmResponse> {
        Err(ProviderError::Overloaded {
            status: 529,
            retry_after: None,
        }
        .into())
    }

    async fn stream_response(&self, _: &LlmRequest) -> Result<ResponseStream> {
        Err(ProviderError::Overloaded {
            status: 529,
            retry_after: None,
        }
        .into())
    }
}

#[tokio::test]
async fn a_client_that_does_not_count_answers_unsupported_setting() {
    let err = OwnClient
        .count_input_tokens(&ask("anything"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedSetting { feature, model, .. }
            if feature == "count_input_tokens" && model == "anything"),
        "{err:?}"
    );
}
