//! A model's transports are built once per catalog, not per client: a gateway asks for a
//! client per request, and building a transport parses the model's options. A reloaded
//! catalog builds them again (its options may have changed); a failed build is not kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tollgate::catalog::{Catalog, KnownProviders};
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Error, LlmRequest, LlmResponse, ModelEntry, Models, ProviderError, ResponseStream, Result,
};

#[derive(Debug, Default)]
struct Building {
    /// `chat` transports built, across its models.
    built: Arc<AtomicU64>,
    /// Builds to fail before the first that succeeds.
    failures: Arc<AtomicU64>,
}

#[tollgate::async_trait]
impl Provider for Building {
    fn key(&self) -> &'static str {
        "building"
    }

    async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Transports {
            built: self.built.clone(),
            failures: self.failures.clone(),
        }))
    }
}

#[derive(Debug)]
struct Transports {
    built: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
}

impl ProviderTransports for Transports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let failing = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(Error::InvalidRequest {
                field: "options".into(),
                reason: format!("{} cannot be built yet", model.id),
            });
        }
        self.built.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(Chat))
    }
}

#[derive(Debug)]
struct Chat;

#[tollgate::async_trait]
impl ChatTransport for Chat {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        Err(ProviderError::Overloaded {
            status: 529,
            retry_after: None,
        }
        .into())
    }

    async fn send_stream(&self, _: &LlmRequest, _: &Signals) -> Result<ResponseStream> {
        Err(ProviderError::Overloaded {
            status: 529,
            retry_after: None,
        }
        .into())
    }
}

fn catalog() -> Catalog {
    Catalog::builder()
        .known_providers(KnownProviders::empty().with("building", "tollgate-tests", false))
        .model(ModelEntry::new("m", "building", "m-1").with_output_tokens(100, 100))
        .build()
        .unwrap()
}

fn models(provider: Building) -> Models {
    Models::builder()
        .catalog(catalog())
        .provider(provider)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_models_chat_transport_is_built_once_for_every_client_and_again_after_a_reload() {
    let provider = Building::default();
    let built = provider.built.clone();
    let models = models(provider);
    for _ in 0..3 {
        models.chat("m").await.unwrap();
    }
    assert_eq!(
        built.load(Ordering::SeqCst),
        1,
        "one build for three clients"
    );
    let reloaded = models.reloaded(catalog()).unwrap();
    reloaded.chat("m").await.unwrap();
    reloaded.chat("m").await.unwrap();
    assert_eq!(
        built.load(Ordering::SeqCst),
        2,
        "a reload builds again, once"
    );
    // The old handle keeps its own.
    models.chat("m").await.unwrap();
    assert_eq!(built.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_transport_build_is_not_kept() {
    let provider = Building::default();
    provider.failures.store(1, Ordering::SeqCst);
    let built = provider.built.clone();
    let models = models(provider);
    let first = models.chat("m").await;
    assert!(
        matches!(first, Err(Error::InvalidRequest { ref field, .. }) if field == "options"),
        "{:?}",
        first.err()
    );
    models.chat("m").await.unwrap();
    models.chat("m").await.unwrap();
    assert_eq!(built.load(Ordering::SeqCst), 1);
}
