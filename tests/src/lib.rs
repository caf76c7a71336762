//! Helpers shared by the workspace-level integration tests: small catalogs, and test
//! providers that count what they are asked.

#![deny(missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tollgate::catalog::ModelEntry;
use tollgate::credentials::{CredentialError, CredentialStore, Secret};
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::provider::{CredentialRef, Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Block, Catalog, LlmRequest, LlmResponse, ResponseBody, ResponseStream, Result, StopReason,
    Usage,
};

/// A catalog of chat models on the `fake` provider, each with a 1,000-token ceiling.
pub fn fake_catalog(ids: &[&str]) -> Catalog {
    ids.iter()
        .fold(Catalog::builder(), |b, id| {
            b.model(
                ModelEntry::new(*id, "fake", format!("fake-{id}")).with_output_tokens(1000, 256),
            )
        })
        .build()
        .expect("valid catalog")
}

/// A credential store that records every id it is asked for.
#[derive(Debug, Default)]
pub struct RecordingStore {
    secrets: Mutex<Vec<(String, String)>>,
    asked: Mutex<Vec<String>>,
}

impl RecordingStore {
    /// Sets (or rotates) a secret.
    pub fn set(&self, id: &str, secret: &str) {
        let mut secrets = self.secrets.lock().unwrap();
        secrets.retain(|(i, _)| i != id);
        secrets.push((id.into(), secret.into()));
    }

    /// Every id asked for, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[tollgate::async_trait]
impl CredentialStore for RecordingStore {
    async fn get(&self, id: &str) -> std::result::Result<Secret, CredentialError> {
        self.asked.lock().unwrap().push(id.into());
        let secrets = self.secrets.lock().unwrap();
        secrets
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, s)| Secret::new(s.clone()))
            .ok_or_else(|| CredentialError::NotFound {
                id: id.into(),
                store: "recording store".into(),
            })
    }
}

/// A provider (key `keyed`) whose chat client resolves its model's credential on every
/// call and records the secret it saw, so tests can check rotation and laziness.
#[derive(Debug, Clone, Default)]
pub struct KeyedProvider {
    /// How many times `build` ran.
    pub builds: Arc<AtomicUsize>,
    /// The secrets seen, one per call.
    pub seen: Arc<Mutex<Vec<String>>>,
}

#[tollgate::async_trait]
impl Provider for KeyedProvider {
    fn key(&self) -> &'static str {
        "keyed"
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        self.builds.fetch_add(1, Ordering::SeqCst);
        // Let concurrent first callers pile up on the build.
        tokio::task::yield_now().await;
        Ok(Arc::new(KeyedClients {
            context: context.clone(),
            seen: self.seen.clone(),
        }))
    }
}

#[derive(Debug)]
struct KeyedClients {
    context: ProviderContext,
    seen: Arc<Mutex<Vec<String>>>,
}

impl ProviderTransports for KeyedClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let credential = self
            .context
            .credential_ref(model)
            .expect("catalog requires a credential");
        Ok(Arc::new(KeyedChat {
            credential,
            seen: self.seen.clone(),
            name: model.name.clone(),
        }))
    }
}

#[derive(Debug)]
struct KeyedChat {
    credential: CredentialRef,
    seen: Arc<Mutex<Vec<String>>>,
    name: String,
}

#[tollgate::async_trait]
impl ChatTransport for KeyedChat {
    async fn send(&self, _request: &LlmRequest, _signals: &Signals) -> Result<LlmResponse> {
        let secret = self.credential.secret().await?;
        self.seen
            .lock()
            .unwrap()
            .push(secret.expose_secret().to_owned());
        LlmResponse::new(ResponseBody {
            model: self.name.clone(),
            content: vec![Block::text("ok")],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            refusal: None,
        })
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let response = self.send(request, signals).await?;
        Ok(ResponseStream::new(futures::stream::iter([Ok(
            tollgate::StreamEvent::Completed(response),
        )])))
    }
}

/// The fake provider's chat transport for `model_id` of `catalog`, without the pipeline:
/// for tests of the fake itself (the pipeline would retry its injected faults).
pub async fn fake_transport(
    fake: &tollgate_fake::FakeProvider,
    catalog: Catalog,
    model_id: &str,
) -> Arc<dyn ChatTransport> {
    let catalog = Arc::new(catalog);
    let entry = catalog.model(model_id).expect("model in catalog").clone();
    let context = ProviderContext::new(
        "fake",
        catalog,
        Arc::new(tollgate::credentials::MemoryCredentialStore::new()),
    );
    let clients = fake.build(&context).await.expect("fake builds");
    clients.chat(&entry).expect("fake serves chat")
}
