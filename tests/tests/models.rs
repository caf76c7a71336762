//! `Models`: lazy, once-only provider builds; credentials resolved per call; helpful
//! errors for unknown models and unlinked providers.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::future::join_all;
use tollgate::catalog::{CatalogError, KnownProviders, ModelEntry, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Catalog, Conversation, Error, Models, SamplingParams};
use tollgate_integration_tests::{KeyedProvider, RecordingStore};

// Linking the fake provider crate registers `fake` with the registry.
use tollgate_fake as _;

fn keyed_catalog() -> Catalog {
    Catalog::builder()
        .known_providers(KnownProviders::linked().with("keyed", "tollgate-integration-tests", true))
        .model(
            ModelEntry::new("a", "keyed", "a-1")
                .with_output_tokens(100, 10)
                .with_credential("key-a"),
        )
        .model(
            ModelEntry::new("b", "keyed", "b-1")
                .with_output_tokens(100, 10)
                .with_credential("key-b"),
        )
        .model(ModelEntry::new("f", "fake", "f-1").with_output_tokens(100, 10))
        .build()
        .unwrap()
}

fn hello(model: &str) -> tollgate::LlmRequest {
    Conversation::new()
        .user("hello")
        .request(model, SamplingParams::new())
        .unwrap()
}

#[test]
fn linked_provider_crates_are_listed_by_key() {
    let models = Models::builder().catalog(keyed_catalog()).build().unwrap();
    assert!(
        models.provider_keys().contains(&"fake"),
        "{:?}",
        models.provider_keys()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_is_built_once_under_concurrent_first_calls() {
    let provider = KeyedProvider::default();
    let store = MemoryCredentialStore::new()
        .with("key-a", "A")
        .with("key-b", "B");
    let models = Models::builder()
        .catalog(keyed_catalog())
        .credentials(store)
        .provider(provider.clone())
        .build()
        .unwrap();
    let clients = join_all((0..64).map(|i| {
        let models = models.clone();
        tokio::spawn(async move {
            models
                .chat(if i % 2 == 0 { "a" } else { "b" })
                .await
                .map(|_| ())
        })
    }))
    .await;
    assert!(clients.into_iter().all(|r| r.unwrap().is_ok()));
    assert_eq!(provider.builds.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn provider_whose_models_are_never_called_never_asks_for_credentials() {
    let store = Arc::new(RecordingStore::default());
    store.set("key-a", "A");
    store.set("key-b", "B");
    let provider = KeyedProvider::default();
    let models = Models::builder()
        .catalog(keyed_catalog())
        .credentials_arc(store.clone())
        .provider(provider.clone())
        .build()
        .unwrap();
    // Calling the fake model builds only the fake provider.
    let fake = models.chat("f").await.unwrap();
    let _ = fake.single_response(&hello("f")).await;
    assert!(store.asked().is_empty(), "asked: {:?}", store.asked());
    assert_eq!(provider.builds.load(Ordering::SeqCst), 0);
    // Building the keyed provider's client still asks for nothing: secrets are per call.
    let a = models.chat("a").await.unwrap();
    assert!(store.asked().is_empty(), "asked: {:?}", store.asked());
    a.single_response(&hello("a")).await.unwrap();
    assert_eq!(store.asked(), vec!["key-a".to_string()]);
}

#[tokio::test]
async fn rotated_key_is_used_by_the_next_call_without_restart() {
    let store = Arc::new(MemoryCredentialStore::new().with("key-a", "first-key"));
    let provider = KeyedProvider::default();
    let models = Models::builder()
        .catalog(keyed_catalog())
        .credentials_arc(store.clone())
        .provider(provider.clone())
        .build()
        .unwrap();
    let chat = models.chat("a").await.unwrap();
    chat.single_response(&hello("a")).await.unwrap();
    store.insert("key-a", "rotated-key");
    chat.single_response(&hello("a")).await.unwrap();
    assert_eq!(
        *provider.seen.lock().unwrap(),
        vec!["first-key".to_string(), "rotated-key".to_string()]
    );
}

#[tokio::test]
async fn missing_credential_fails_the_call_naming_the_id_and_no_secret() {
    let store = MemoryCredentialStore::new().with("key-b", "sk-should-not-appear");
    let models = Models::builder()
        .catalog(keyed_catalog())
        .credentials(store)
        .provider(KeyedProvider::default())
        .build()
        .unwrap();
    let err = models
        .chat("a")
        .await
        .unwrap()
        .single_response(&hello("a"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Credential(_)), "{err}");
    assert!(err.to_string().contains("key-a"), "{err}");
    assert!(!format!("{err} {err:?} {models:?}").contains("sk-should-not-appear"));
}

#[test]
fn catalog_naming_a_provider_whose_crate_is_not_linked_fails_at_load_saying_which_crate_to_add() {
    // `tollgate-openai` is not a dependency of this test binary: its key is unknown here.
    let err = Catalog::from_toml_str(
        "[models.gpt]\nprovider = \"openai\"\ncredential = \"openai-main\"\nmax_output_tokens = 100\n",
    )
    .unwrap_err();
    assert!(matches!(err, CatalogError::UnknownProvider { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("`tollgate-openai`") && message.contains("use tollgate_openai as _;"),
        "the error says what to add: {message}"
    );
    assert!(
        message.contains("fake (tollgate-fake)"),
        "the error lists what is linked, with the crate each provider registered from: {message}"
    );
}

#[tokio::test]
async fn model_whose_provider_is_known_but_not_registered_says_which_crate_to_add() {
    // A key passed in `KnownProviders` passes the catalog; calling it without the
    // provider in the registry says what to add.
    let catalog = Catalog::builder()
        .known_providers(KnownProviders::linked().with("openai", "tollgate-openai", true))
        .model(
            ModelEntry::new("gpt", "openai", "gpt-1")
                .with_output_tokens(100, 10)
                .with_credential("openai-main"),
        )
        .build()
        .unwrap();
    let models = Models::builder().catalog(catalog).build().unwrap();
    let err = models.chat("gpt").await.unwrap_err();
    assert!(matches!(err, Error::ProviderNotLinked { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("tollgate-openai") && message.contains("use tollgate_openai as _;"),
        "{message}"
    );
}

#[tokio::test]
async fn unknown_model_lists_the_catalog() {
    let models = Models::builder().catalog(keyed_catalog()).build().unwrap();
    let err = models.chat("nope").await.unwrap_err();
    assert!(matches!(err, Error::UnknownModel { .. }), "{err}");
    assert!(err.to_string().contains("a, b, f"), "{err}");
}

#[tokio::test]
async fn asking_a_chat_model_for_embeddings_is_a_typed_error() {
    let models = Models::builder().catalog(keyed_catalog()).build().unwrap();
    let err = models.embeddings("f").await.unwrap_err();
    assert!(matches!(err, Error::WrongModelKind { .. }), "{err}");
    let err = models.decision("f").await.unwrap_err();
    assert!(err.to_string().contains("chat"), "{err}");
    assert_eq!(models.catalog().model("f").unwrap().kind, ModelKind::Chat);
}

#[tokio::test]
async fn client_refuses_a_request_for_another_model() {
    let models = Models::builder().catalog(keyed_catalog()).build().unwrap();
    let chat = models.chat("f").await.unwrap();
    let err = chat.single_response(&hello("a")).await.unwrap_err();
    assert!(
        matches!(err, Error::InvalidRequest { ref field, .. } if field == "model_id"),
        "{err}"
    );
}

#[test]
fn building_models_without_a_catalog_says_what_is_missing() {
    let err = Models::builder().build().unwrap_err();
    assert!(err.to_string().contains("catalog"), "{err}");
}
