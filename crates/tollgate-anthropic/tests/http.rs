//! The transport against a local HTTP server (wiremock on 127.0.0.1), through the
//! pipeline (`Models`): what is Anthropic's own (headers, beta flags, cache marks, the
//! spend-limit 429, `retry-after-ms`, reset headers, refusal categories). What every
//! provider shares (errors by status, streams cut before and after their first event,
//! keys from the store, secrets) runs in `tests/contract.rs`, the contract kit.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Block, CacheMark, Catalog, Conversation, Error, JobContext, LlmRequest, Message, Models,
    ProviderError, Role, SamplingParams, StopReason, StreamEvent,
};
use tollgate_anthropic::AnthropicProvider;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY_ID: &str = "anthropic-main";
const API_KEY: &str = "sk-ant-TEST-0123456789-SECRET";

struct Setup {
    server: MockServer,
    models: Models,
}

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("claude", "anthropic-direct", "claude-test")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1000,
            tpm: 10_000_000,
            ..Limits::default()
        })
        .with_option("base_url", base_url)
        .with_option("beta", vec!["beta-one", "beta-two"])
}

/// A server, and `Models` whose pipeline retries with tiny real-time delays (wiremock
/// needs real I/O, so the clock is not paused).
async fn setup() -> Setup {
    setup_with(RetryPolicy {
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        jitter_seed: Some(7),
        ..RetryPolicy::default()
    })
    .await
}

/// [`setup`] with another retry policy.
async fn setup_with(retry: RetryPolicy) -> Setup {
    let server = MockServer::start().await;
    let store = Arc::new(MemoryCredentialStore::new().with(KEY_ID, API_KEY));
    let catalog = Catalog::builder()
        .model(entry(&server.uri()))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials_arc(store)
        .provider(AnthropicProvider)
        .pipeline(PipelineConfig {
            retry,
            ..PipelineConfig::default()
        })
        .build()
        .unwrap();
    Setup { server, models }
}

fn ask() -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request("claude", SamplingParams::new())
        .unwrap()
}

/// Models for one job with no retries: a retryable error reaches the caller at once.
fn no_retries(models: &Models) -> Models {
    models.for_job(JobContext::new("no-retries", 0))
}

fn message(text: &str, stop: &str) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 12, "output_tokens": 4, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 0}})
}

fn error_body(kind: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": format!("{kind} happened")},
           "request_id": "req_1"})
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn sse_response(events: &[Value]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(sse(events), "text/event-stream")
}

fn start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 1}}})
}

fn text_start() -> Value {
    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
}

fn text_delta(text: &str) -> Value {
    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
}

fn good_stream() -> Vec<Value> {
    vec![
        start(),
        json!({"type": "ping"}),
        text_start(),
        text_delta("Hel"),
        text_delta("lo"),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]
}

async fn single(models: &Models, request: &LlmRequest) -> tollgate::Result<tollgate::LlmResponse> {
    models.chat("claude").await?.single_response(request).await
}

async fn stream_all(models: &Models) -> (Vec<StreamEvent>, Option<Error>) {
    let mut stream = match models
        .chat("claude")
        .await
        .unwrap()
        .stream_response(&ask())
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

#[tokio::test]
async fn a_call_sends_the_key_version_and_beta_headers_and_decodes_the_answer() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", API_KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message("Hi!", "end_turn")))
        .expect(1)
        .mount(&s.server)
        .await;
    let answer = single(&s.models, &ask()).await.unwrap();
    assert_eq!(answer.text(), "Hi!");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let sent: Value = s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["model"], "claude-test");
    assert_eq!(
        sent["max_tokens"], 500,
        "the catalog's default output limit"
    );
    assert!(sent.get("stream").is_none());
}

#[tokio::test]
async fn five_cache_marks_are_rejected_before_anything_is_sent() {
    let s = setup().await;
    let marked = |t: &str| Block::text(t).with_cache(CacheMark::FiveMinutes);
    let request = LlmRequest::new(
        "claude",
        vec![
            Message {
                role: Role::System,
                content: vec![marked("1"), marked("2")],
            },
            Message {
                role: Role::User,
                content: vec![marked("3"), marked("4"), marked("5")],
            },
        ],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let err = single(&s.models, &request).await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "messages[1].content[2].cache"),
        "{err}"
    );
    let err = s
        .models
        .chat("claude")
        .await
        .unwrap()
        .stream_response(&request)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidRequest { .. }), "{err}");
    assert!(s.server.received_requests().await.unwrap().is_empty());
}

/// The error a call without retries meets when the server always answers `template`.
async fn error_for(template: ResponseTemplate) -> Error {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&s.server)
        .await;
    single(&no_retries(&s.models), &ask()).await.unwrap_err()
}

async fn status_error(status: u16, body: Value) -> Error {
    error_for(ResponseTemplate::new(status).set_body_json(body)).await
}

#[tokio::test]
async fn status_429_enforced_spend_limit_is_quota_exhausted_and_sent_once() {
    let s = setup().await;
    let body = json!({"type": "error", "error": {"type": "rate_limit_error", "message": "cap",
                      "details": {"error_code": "enforced_spend_limit_reached"}}});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(body))
        .expect(1)
        .mount(&s.server)
        .await;
    let err = single(&s.models, &ask()).await.unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
}

#[tokio::test]
async fn retry_after_ms_is_preferred_to_retry_after() {
    let err = error_for(
        ResponseTemplate::new(529)
            .insert_header("retry-after", "9")
            .insert_header("retry-after-ms", "1500")
            .set_body_json(error_body("overloaded_error")),
    )
    .await;
    assert!(
        matches!(err, Error::Provider(ProviderError::Overloaded { retry_after: Some(d), .. }) if d == Duration::from_millis(1500)),
        "{err}"
    );
}

#[tokio::test]
async fn overloaded_and_server_keep_wire_status() {
    // An "overloaded" body on a 503 is overloaded, with the 503 the wire said.
    let err = status_error(503, error_body("overloaded_error")).await;
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 503, .. })
        ),
        "{err}"
    );
    let Error::Provider(p) = &err else {
        unreachable!()
    };
    assert_eq!(p.status(), Some(503));
    assert!(err.to_string().contains("HTTP 503"), "{err}");
    let err = status_error(529, error_body("overloaded_error")).await;
    assert!(
        matches!(&err, Error::Provider(p) if p.status() == Some(529)),
        "{err}"
    );
    let err = status_error(502, error_body("api_error")).await;
    assert!(
        matches!(&err, Error::Provider(p @ ProviderError::Server { .. }) if p.status() == Some(502)),
        "{err}"
    );
}

#[tokio::test]
async fn ratelimit_reset_with_nothing_left_waits_one_request_not_the_reset() {
    let s = setup().await;
    // The reset is a wall-clock date, when the provider's bucket is *full* again (20 s
    // from now): with 100 a minute, one request refills long before.
    #[allow(clippy::disallowed_methods)]
    let reset = std::time::SystemTime::now() + std::time::Duration::from_secs(20);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("anthropic-ratelimit-requests-limit", "100")
                .insert_header("anthropic-ratelimit-requests-remaining", "0")
                .insert_header(
                    "anthropic-ratelimit-requests-reset",
                    humantime::format_rfc3339(reset).to_string(),
                )
                .set_body_json(message("ok", "end_turn")),
        )
        .mount(&s.server)
        .await;
    single(&s.models, &ask()).await.unwrap();
    let limiter = s.models.limiter("claude").unwrap();
    match limiter
        .try_reserve(
            tollgate::limit::Cost::call(1, 1),
            tollgate::limit::Priority::Default,
        )
        .await
    {
        Err(tollgate::limit::TryReserveError::WouldWait { ready_in }) => {
            assert!(
                ready_in <= std::time::Duration::from_millis(600),
                "one request at 100 a minute, not the reset: {ready_in:?}"
            );
        }
        other => panic!("the bucket should be empty, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refusal_with_stop_details_is_a_provider_refusal() {
    let s = setup().await;
    let mut body = message("", "refusal");
    body["stop_details"] = json!({"type": "refusal", "category": "cyber", "explanation": "No."});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .expect(1)
        .mount(&s.server)
        .await;
    let err = single(&s.models, &ask()).await.unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRefusal { category, .. } if category == "cyber"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stream_of_every_event_type_reaches_the_reader_and_completes() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(header("accept", "text/event-stream"))
        .respond_with(sse_response(&good_stream()))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[0],
        StreamEvent::TextDelta {
            index: 0,
            text: "Hel".into()
        }
    );
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(answer.text(), "Hello");
    assert_eq!(answer.usage().output_tokens, 2);
    let sent: Value = s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn a_stream_in_crlf_lines_is_read_the_same() {
    let s = setup().await;
    let body = sse(&good_stream()).replace('\n', "\r\n");
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models).await;
    assert!(error.is_none(), "{error:?}");
    assert!(matches!(events.last(), Some(StreamEvent::Completed(a)) if a.text() == "Hello"));
}
