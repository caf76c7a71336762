//! The third-party mock servers (llmock, aimock) and Redis that `scripts/peers.sh`
//! starts on 127.0.0.1 for `cargo xtask test-all`: where a test finds them, and what every
//! provider crate's conformance test against llmock does the same way (a model with room
//! to spare and fast retries, llmock's scripted behaviours, a stream's events).

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::Limits;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::provider::Provider;
use tollgate::{Catalog, Error, LlmRequest, ModelEntry, Models, StreamEvent};

/// The credential id [`llmock_models`] gives its model (llmock checks no key).
pub const PEER_CREDENTIAL: &str = "peer-key";

/// The URL in `var` (e.g. `TOLLGATE_LLMOCK_URL`). Without it the test should skip, and
/// this says so on stderr; but when `TOLLGATE_PEERS_REQUIRED` is set (xtask sets it), a
/// missing server fails the test instead of passing it silently.
pub fn url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("TOLLGATE_PEERS_REQUIRED").is_none(),
                "{var} is not set, but TOLLGATE_PEERS_REQUIRED is: start the peers with scripts/peers.sh start"
            );
            eprintln!(
                "{var} is not set: skipped (run `cargo xtask test-all`, or scripts/peers.sh start)"
            );
            None
        }
    }
}

/// A `Models` of one chat model, `entry` (its id, provider key, name and options as the
/// test writes them), served by `provider`: with the credential [`PEER_CREDENTIAL`],
/// 200 output tokens at most (50 by default), room to spare (6,000 requests and 100
/// million tokens a minute, so llmock's own limits are what a test meets) and retries a
/// millisecond apart.
pub fn llmock_models(provider: impl Provider, entry: ModelEntry) -> Models {
    let entry = entry
        .with_credential(PEER_CREDENTIAL)
        .with_output_tokens(200, 50)
        .with_limits(Limits {
            rpm: 6000,
            tpm: 100_000_000,
            ..Limits::default()
        });
    let catalog = Catalog::builder()
        .model(entry)
        .build()
        .expect("a peer test's catalog");
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(PEER_CREDENTIAL, "sk-peer-test"))
        .provider(provider)
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                jitter_seed: Some(3),
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        })
        .build()
        .expect("a peer test's models")
}

/// Scripts llmock at `base` (`POST /_llmock/scenario`): each behaviour is consumed by the
/// next request it matches (give each a `match` on the test's own model name, so that
/// other tests sharing the server do not consume it).
pub async fn llmock_scenario(base: &str, behaviors: Value) {
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
        .post(format!("{base}/_llmock/scenario"))
        .json(&json!({ "behaviors": behaviors }))
        .send()
        .await
        .expect("llmock answers");
    assert!(
        response.status().is_success(),
        "llmock refused the scenario: {}",
        response.status()
    );
}

/// Streams `request` to model `model_id`: the events that arrived, and the error that
/// ended the stream (or failed it before its first event), if any.
pub async fn stream_events(
    models: &Models,
    model_id: &str,
    request: &LlmRequest,
) -> (Vec<StreamEvent>, Option<Error>) {
    let client = match models.chat(model_id).await {
        Ok(client) => client,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut stream = match client.stream_response(request).await {
        Ok(stream) => stream,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}
