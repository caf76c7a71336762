//! The transport against a local HTTP server (wiremock on 127.0.0.1), through the
//! pipeline (`Models`): headers, keys from the store, errors by status, rate-limit
//! headers, streams, retries before the first event and `StreamInterrupted` after it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Block, CacheMark, Catalog, Conversation, Dimension, Error, JobContext, LlmRequest, Message,
    Models, ProviderError, Role, SamplingParams, StopReason, StreamEvent,
};
use tollgate_anthropic::AnthropicProvider;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY_ID: &str = "anthropic-main";
const API_KEY: &str = "sk-ant-TEST-0123456789-SECRET";

struct Setup {
    server: MockServer,
    models: Models,
    store: Arc<MemoryCredentialStore>,
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
        .credentials_arc(store.clone())
        .provider(AnthropicProvider)
        .pipeline(PipelineConfig {
            retry,
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

fn overloaded_event() -> Value {
    json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
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
async fn the_key_is_fetched_from_the_store_on_every_call_so_rotation_needs_no_rebuild() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message("ok", "end_turn")))
        .mount(&s.server)
        .await;
    single(&s.models, &ask()).await.unwrap();
    s.store.insert(KEY_ID, "sk-ant-ROTATED");
    single(&s.models, &ask()).await.unwrap();
    let keys: Vec<String> = s
        .server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.headers["x-api-key"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys, vec![API_KEY.to_owned(), "sk-ant-ROTATED".to_owned()]);
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

/// The server answers `first` once, then `then` for every later request.
async fn once_then(server: &MockServer, first: ResponseTemplate, then: ResponseTemplate) {
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

#[tokio::test]
async fn status_400_401_403_404_and_413_are_rejections_that_keep_their_status() {
    for (status, kind) in [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
    ] {
        match status_error(status, error_body(kind)).await {
            Error::ProviderRequest(e) => assert_eq!(e.status, status),
            other => panic!("{status}: {other}"),
        }
    }
}

#[tokio::test]
async fn status_402_billing_is_quota_exhausted() {
    let err = status_error(402, error_body("billing_error")).await;
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
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
async fn status_429_is_rate_limited_with_retry_after_seconds() {
    let err = error_for(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "3")
            .set_body_json(error_body("rate_limit_error")),
    )
    .await;
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(3)),
        "{err}"
    );
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
async fn status_500_is_a_server_error_retried_then_answered() {
    let s = setup().await;
    once_then(
        &s.server,
        ResponseTemplate::new(500).set_body_json(error_body("api_error")),
        ResponseTemplate::new(200).set_body_json(message("after", "end_turn")),
    )
    .await;
    assert_eq!(single(&s.models, &ask()).await.unwrap().text(), "after");
    assert_eq!(s.server.received_requests().await.unwrap().len(), 2);
    let err = status_error(500, error_body("api_error")).await;
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Server { status: 500, .. })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn status_529_is_overloaded() {
    let err = status_error(529, error_body("overloaded_error")).await;
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded {
                retry_after: None,
                ..
            })
        ),
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
async fn retry_after_on_503_is_honoured() {
    // The error carries the server's wait, and `retry_after()` reports it.
    let err = error_for(
        ResponseTemplate::new(503)
            .insert_header("retry-after", "1")
            .set_body_json(error_body("api_error")),
    )
    .await;
    assert!(
        matches!(&err, Error::Provider(ProviderError::Server { status: 503, retry_after: Some(d) }) if *d == Duration::from_secs(1)),
        "{err}"
    );
    assert!(
        matches!(&err, Error::Provider(p) if p.retry_after() == Some(Duration::from_secs(1))),
        "{err}"
    );
    // The pipeline waits it out as a floor: a policy that honours at most 100 ms does
    // not retry a 503 that asks for a second (it would have, without the header).
    let s = setup_with(RetryPolicy {
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
        max_retry_after: Duration::from_millis(100),
        jitter_seed: Some(7),
        ..RetryPolicy::default()
    })
    .await;
    once_then(
        &s.server,
        ResponseTemplate::new(503)
            .insert_header("retry-after", "1")
            .set_body_json(error_body("api_error")),
        ResponseTemplate::new(200).set_body_json(message("after", "end_turn")),
    )
    .await;
    let err = single(&s.models, &ask()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Server { status: 503, .. })
        ),
        "{err}"
    );
    assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
    // A wait within the policy is waited, then retried.
    let s = setup().await;
    once_then(
        &s.server,
        ResponseTemplate::new(529)
            .insert_header("retry-after-ms", "20")
            .set_body_json(error_body("overloaded_error")),
        ResponseTemplate::new(200).set_body_json(message("after", "end_turn")),
    )
    .await;
    assert_eq!(single(&s.models, &ask()).await.unwrap().text(), "after");
    assert_eq!(s.server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn x_should_retry_false_vetoes_the_retry_of_a_500() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(500)
                .insert_header("x-should-retry", "false")
                .set_body_json(error_body("api_error")),
        )
        .mount(&s.server)
        .await;
    let err = single(&s.models, &ask()).await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Server { .. })),
        "{err}"
    );
    assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn ratelimit_remaining_headers_lower_the_limiter_buckets() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("anthropic-ratelimit-requests-limit", "1000")
                .insert_header("anthropic-ratelimit-requests-remaining", "7")
                .insert_header("anthropic-ratelimit-requests-reset", "2026-11-29T12:00:30Z")
                .insert_header("anthropic-ratelimit-tokens-remaining", "5000")
                .set_body_json(message("ok", "end_turn")),
        )
        .mount(&s.server)
        .await;
    single(&s.models, &ask()).await.unwrap();
    let snapshot = s
        .models
        .limiter("claude")
        .unwrap()
        .snapshot()
        .await
        .unwrap();
    let level = |d: Dimension| {
        snapshot
            .levels
            .iter()
            .find(|(dim, _, _)| *dim == d)
            .map(|(_, level, _)| *level)
            .unwrap()
    };
    // Without the headers the buckets would be nearly full (1000 and 10 million).
    assert!(level(Dimension::Requests) <= 8.0, "{snapshot:?}");
    assert!(level(Dimension::Tokens) <= 1_000_000.0, "{snapshot:?}"); // refills 166k/s
}

#[tokio::test]
async fn limit_headers_are_read() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("anthropic-ratelimit-requests-limit", "100")
                .insert_header("anthropic-ratelimit-requests-remaining", "99")
                .insert_header("anthropic-ratelimit-tokens-limit", "50000")
                .insert_header("anthropic-ratelimit-tokens-remaining", "49000")
                .set_body_json(message("ok", "end_turn")),
        )
        .mount(&s.server)
        .await;
    single(&s.models, &ask()).await.unwrap();
    let snapshot = s
        .models
        .limiter("claude")
        .unwrap()
        .snapshot()
        .await
        .unwrap();
    let capacity = |d: Dimension| {
        snapshot
            .levels
            .iter()
            .find(|(dim, _, _)| *dim == d)
            .map(|(_, _, capacity)| *capacity)
            .unwrap()
    };
    // The catalog says 1000 rpm and 10 million tpm; the provider's limits are lower.
    assert_eq!(capacity(Dimension::Requests), 100, "{snapshot:?}");
    assert_eq!(capacity(Dimension::Tokens), 50_000, "{snapshot:?}");
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
async fn anthropic_context_window_stop_is_overflow_not_truncation() {
    // A `max_tokens` answer would be re-run at the ceiling; a full context window would
    // not fit a larger output limit either, so it is reported at once, sent once.
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(message("cut", "model_context_window_exceeded")),
        )
        .expect(1)
        .mount(&s.server)
        .await;
    let err = single(&s.models, &ask()).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::ContextWindowExceeded { model_id, needed, window: None }
                if model_id == "claude" && *needed > 500
        ),
        "{err:?}"
    );
    assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
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

#[tokio::test]
async fn an_error_event_before_the_first_delta_is_retried() {
    let s = setup().await;
    once_then(
        &s.server,
        sse_response(&[start(), json!({"type": "ping"}), overloaded_event()]),
        sse_response(&good_stream()),
    )
    .await;
    let (events, error) = stream_all(&s.models).await;
    assert!(error.is_none(), "{error:?}");
    assert!(matches!(events.last(), Some(StreamEvent::Completed(a)) if a.text() == "Hello"));
    assert_eq!(s.server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn an_error_event_after_the_first_delta_interrupts_the_stream_without_a_retry() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(&[
            start(),
            text_start(),
            text_delta("Hel"),
            overloaded_event(),
        ]))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models).await;
    assert_eq!(
        events,
        vec![StreamEvent::TextDelta {
            index: 0,
            text: "Hel".into()
        }]
    );
    match error {
        Some(Error::StreamInterrupted {
            delivered_events,
            cause,
            ..
        }) => {
            assert_eq!(delivered_events, 1);
            assert!(
                matches!(*cause, Error::Provider(ProviderError::Overloaded { .. })),
                "{cause}"
            );
        }
        other => panic!("expected StreamInterrupted, got {other:?}"),
    }
    assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_midway_interrupts_the_reader() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(&[start(), text_start(), text_delta("Hel")]))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models).await;
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { cause, .. }) if matches!(**cause, Error::Provider(ProviderError::Connection { cause: tollgate::ConnectionCause::ClosedEarly, .. }))),
        "{error:?}"
    );
    assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_stream_cut_before_any_content_is_retried() {
    let s = setup().await;
    once_then(
        &s.server,
        sse_response(&[start()]),
        sse_response(&good_stream()),
    )
    .await;
    let (_, error) = stream_all(&s.models).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(s.server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_stream_opened_with_an_error_status_is_that_typed_error() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(error_body("authentication_error")))
        .mount(&s.server)
        .await;
    let (_, error) = stream_all(&s.models).await;
    assert!(matches!(error, Some(Error::ProviderRequest(e)) if e.status == 401));
}

#[tokio::test]
async fn a_connection_refused_is_a_retryable_failure_not_a_hang() {
    // Bind a port, then free it: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let catalog = Catalog::builder().model(entry(&url)).build().unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(KEY_ID, API_KEY))
        .provider(AnthropicProvider)
        .build()
        .unwrap();
    let err = single(&no_retries(&models), &ask()).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
}

/// Every log line and span field, as text.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<String>>);

impl tracing::field::Visit for Logs {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let mut text = self.0.lock().unwrap();
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
        event.record(&mut self.clone());
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn the_api_key_never_appears_in_an_error_a_debug_dump_or_a_log_line() {
    let logs = Logs::default();
    let _guard = tracing::subscriber::set_default(logs.clone());
    let s = setup().await;
    // A server that echoes the key back in its error message.
    Mock::given(method("POST"))
        .respond_with(|request: &Request| {
            let key = request.headers["x-api-key"].to_str().unwrap().to_owned();
            ResponseTemplate::new(401).set_body_json(json!({"type": "error", "error": {
                "type": "authentication_error", "message": format!("invalid x-api-key {key}")}}))
        })
        .mount(&s.server)
        .await;
    let chat = s.models.chat("claude").await.unwrap();
    let err = chat.single_response(&ask()).await.unwrap_err();
    let mut seen = vec![
        err.to_string(),
        format!("{err:?}"),
        format!("{chat:?}"),
        format!("{:?}", s.models),
    ];
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 401 && e.message.contains("[redacted]"))
    );
    let stream_err = chat.stream_response(&ask()).await.unwrap_err();
    seen.push(format!("{stream_err} {stream_err:?}"));
    seen.push(logs.0.lock().unwrap().clone());
    assert!(
        !seen.last().unwrap().is_empty(),
        "the subscriber saw the calls"
    );
    for text in seen {
        assert!(!text.contains(API_KEY), "the key leaked into: {text}");
    }
}

/// Regression: an empty stored key was "redacted" by replacing `""`, which put
/// `[redacted]` between every character of every error message.
#[tokio::test]
async fn empty_stored_key_redacts_nothing() {
    let s = setup().await;
    s.store.insert(KEY_ID, "");
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401).set_body_json(json!({"type": "error", "error": {
            "type": "authentication_error", "message": "invalid x-api-key"}})),
        )
        .mount(&s.server)
        .await;
    let err = single(&s.models, &ask()).await.unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e)
            if e.status == 401 && e.message == "authentication_error: invalid x-api-key"),
        "{err:?}"
    );
}
