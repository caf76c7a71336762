//! What the Bedrock tests share: a wiremock server on 127.0.0.1 as the endpoint
//! override, static test credentials in a memory store, AWS event-stream frames.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use futures::StreamExt;
use serde_json::Value;
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::provider::Provider;
use tollgate::{
    Catalog, Conversation, Error, JobContext, LlmRequest, Models, SamplingParams, StreamEvent,
};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

pub const CRED_ID: &str = "aws-test";
pub const ACCESS_KEY: &str = "AKIDTESTACCESSKEY01";
pub const SECRET_KEY: &str = "tEsT/SeCrEt+KeY/0123456789-do-not-leak";
pub const SESSION_TOKEN: &str = "SeSsIoN-ToKeN-do-not-leak";

pub fn record() -> String {
    serde_json::json!({"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY,
                       "session_token": SESSION_TOKEN})
    .to_string()
}

pub struct Setup {
    pub server: MockServer,
    pub models: Models,
    pub store: Arc<MemoryCredentialStore>,
}

pub fn entry(id: &str, provider: &str, name: &str, endpoint: &str) -> ModelEntry {
    ModelEntry::new(id, provider, name)
        .with_credential(CRED_ID)
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1000,
            tpm: 10_000_000,
            ..Limits::default()
        })
        .with_option("region", "us-east-1")
        .with_option("endpoint_url", endpoint)
}

/// `Models` over `entries(server_uri)`, retrying with tiny real-time delays.
pub async fn setup_with(
    provider: impl Provider,
    entries: impl FnOnce(&str) -> Vec<ModelEntry>,
) -> Setup {
    let server = MockServer::start().await;
    let store = Arc::new(MemoryCredentialStore::new().with(CRED_ID, record()));
    let mut catalog = Catalog::builder();
    for e in entries(&server.uri()) {
        catalog = catalog.model(e);
    }
    let models = Models::builder()
        .catalog(catalog.embedding_width(4).build().unwrap())
        .credentials_arc(store.clone())
        .provider(provider)
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                jitter_seed: Some(7),
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        })
        .build()
        .unwrap();
    Setup {
        server,
        models,
        store,
    }
}

pub fn no_retries(models: &Models) -> Models {
    models.for_job(JobContext::new("no-retries", 0))
}

pub fn ask(model: &str) -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request(model, SamplingParams::new())
        .unwrap()
}

fn string(name: &str, value: &str) -> Header {
    Header::new(
        name.to_owned(),
        HeaderValue::String(value.to_owned().into()),
    )
}

/// One event-stream event frame: `:event-type` `kind`, JSON payload.
pub fn event_frame(kind: &str, payload: &Value) -> Vec<u8> {
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(string(":message-type", "event"))
        .add_header(string(":event-type", kind))
        .add_header(string(":content-type", "application/json"));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

/// One event-stream exception frame, e.g. `throttlingException`.
pub fn exception_frame(kind: &str, message: &str) -> Vec<u8> {
    let message = Message::new(
        serde_json::json!({"message": message})
            .to_string()
            .into_bytes(),
    )
    .add_header(string(":message-type", "exception"))
    .add_header(string(":exception-type", kind))
    .add_header(string(":content-type", "application/json"));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

pub fn event_stream(frames: &[Vec<u8>]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(frames.concat(), "application/vnd.amazon.eventstream")
}

/// An HTTP error answer the way Bedrock sends one (restJson1).
pub fn exception_response(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header(
            "x-amzn-errortype",
            format!("{kind}:http://internal.amazon.com/coral/"),
        )
        .set_body_json(serde_json::json!({"message": message}))
}

/// The server answers `first` once, then `then` for every later request.
pub async fn once_then(server: &MockServer, first: ResponseTemplate, then: ResponseTemplate) {
    Mock::given(method("POST"))
        .respond_with(first)
        .up_to_n_times(1)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .respond_with(then)
        .with_priority(2)
        .mount(server)
        .await;
}

pub async fn stream_all(models: &Models, model: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let mut stream = match models
        .chat(model)
        .await
        .unwrap()
        .stream_response(&ask(model))
        .await
    {
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
