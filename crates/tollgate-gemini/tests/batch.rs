//! The Gemini API's batch mode against a local server (wiremock on 127.0.0.1) that
//! speaks the real API's shapes: the create body, the operation polled from pending to
//! succeeded with its inline answers, cancel, the list searched for a label, errors of
//! the batch endpoints classified as live ones, the size limits; and what the transport
//! refuses before sending (Vertex, an oversized batch, what the live encoder refuses).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::batch::{BatchCounts, BatchHandle, BatchItem, BatchPhase, BatchTransport};
use tollgate::{
    Catalog, Conversation, Error, LlmRequest, Models, ProviderError, SamplingParams, StopReason,
    ToolDefinition,
};
use tollgate_gemini::batch::{INLINE_BATCH_BYTES, MAX_BATCH_REQUESTS};
use tollgate_gemini::{GeminiProvider, TokenSource, codec};
use wiremock::matchers::{header, method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY_ID: &str = "gemini-main";
const API_KEY: &str = "AIzaBATCH-0123456789-SECRET";
const CREATE_PATH: &str = "/v1beta/models/gemini-2.5-flash:batchGenerateContent";

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("flash", "gemini", "gemini-2.5-flash")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1000,
            input_tpm: 10_000_000,
            ..Limits::default()
        })
        .with_option("base_url", base_url)
}

fn models(entry: ModelEntry) -> Models {
    Models::builder()
        .catalog(Catalog::builder().model(entry).build().unwrap())
        .credentials(MemoryCredentialStore::new().with(KEY_ID, API_KEY))
        .build()
        .unwrap()
}

async fn transport(entry: ModelEntry) -> Arc<dyn BatchTransport> {
    models(entry).batch("flash").await.unwrap()
}

fn ask(text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request("flash", SamplingParams::new())
        .unwrap()
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        defer_loading: false,
        cache: None,
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema: tollgate::Json::new(json!({"type": "object"})),
        strict: None,
        native: None,
    }
}

fn handle(id: &str) -> BatchHandle {
    BatchHandle {
        id: id.into(),
        input_file: None,
    }
}

/// A server that fails the test if anything reaches it.
async fn silent_server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    server
}

/// `result` failed with `InvalidRequest` naming `field`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(result: tollgate::Result<T>, field: &str) {
    match result {
        Err(Error::InvalidRequest { field: f, .. }) if f == field => {}
        other => panic!("expected InvalidRequest on `{field}`, got {other:?}"),
    }
}

fn item(id: &str, request: LlmRequest) -> BatchItem {
    BatchItem {
        custom_id: id.into(),
        request,
    }
}

/// A `GenerateContentResponse`: `text`, or a call of `get_weather` when `text` is
/// `None`; usage 10 in, `out` out.
fn answer(text: Option<&str>, out: u64) -> Value {
    let part = match text {
        Some(text) => json!({"text": text}),
        None => json!({"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}),
    };
    json!({
        "candidates": [{"content": {"role": "model", "parts": [part]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": out,
                          "totalTokenCount": 10 + out},
        "modelVersion": "gemini-2.5-flash",
    })
}

/// The batch operation as the real API answers `batches.get`.
fn operation(name: &str, state: &str, extra: Value) -> Value {
    let mut op = json!({
        "name": name,
        "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": "models/gemini-2.5-flash",
            "displayName": "run-7",
            "state": state,
        },
    });
    if let (Some(op), Some(extra)) = (op.as_object_mut(), extra.as_object()) {
        op.extend(extra.clone());
    }
    op
}

/// Records the keys the create body carried and answers with a pending operation.
struct Create {
    keys: Arc<Mutex<Vec<String>>>,
}

impl Respond for Create {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let entries = body
            .pointer("/batch/inputConfig/requests/requests")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut keys = self.keys.lock().unwrap();
        for e in &entries {
            // Each entry is exactly `request` and `metadata` (the API refuses others).
            let fields: Vec<&String> = e
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            assert_eq!(fields, ["metadata", "request"], "{e}");
            keys.extend(
                e.pointer("/metadata/key")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            );
        }
        ResponseTemplate::new(200).set_body_json(operation(
            "batches/b1",
            "BATCH_STATE_PENDING",
            json!({}),
        ))
    }
}

/// `batches.get`: pending, then running, then succeeded with an answer per key (the
/// key `tool` gets a function call).
struct Poll {
    keys: Arc<Mutex<Vec<String>>>,
    calls: AtomicUsize,
}

impl Respond for Poll {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let op = match call {
            0 => operation("batches/b1", "BATCH_STATE_PENDING", json!({})),
            1 => operation(
                "batches/b1",
                "BATCH_STATE_RUNNING",
                json!({"metadata": {"state": "BATCH_STATE_RUNNING",
                    "batchStats": {"requestCount": "3", "pendingRequestCount": "3"}}}),
            ),
            _ => {
                let keys = self.keys.lock().unwrap();
                let answers: Vec<Value> = keys
                    .iter()
                    .enumerate()
                    .map(|(i, key)| {
                        let text = format!("answer to {key}");
                        let text = (key != "tool").then_some(text.as_str());
                        json!({"response": answer(text, 5 + i as u64), "metadata": {"key": key}})
                    })
                    .collect();
                json!({
                    "name": "batches/b1",
                    "metadata": {"state": "BATCH_STATE_SUCCEEDED", "displayName": "run-7",
                        "batchStats": {"requestCount": "3", "successfulRequestCount": "3"}},
                    "done": true,
                    "response": {"inlinedResponses": {"inlinedResponses": answers}},
                })
            }
        };
        ResponseTemplate::new(200).set_body_json(op)
    }
}

#[tokio::test]
async fn three_requests_are_submitted_polled_to_their_end_and_collected_per_key() {
    let server = MockServer::start().await;
    let keys = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path(CREATE_PATH))
        .and(header("x-goog-api-key", API_KEY))
        .respond_with(Create { keys: keys.clone() })
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1beta/batches/b1"))
        .and(header("x-goog-api-key", API_KEY))
        .respond_with(Poll {
            keys: keys.clone(),
            calls: AtomicUsize::new(0),
        })
        .mount(&server)
        .await;
    let batch = transport(entry(&server.uri())).await;

    let with_tool = Conversation::new()
        .user("Weather in Oslo?")
        .with_tool(weather_tool())
        .request("flash", SamplingParams::new())
        .unwrap();
    let lines: Vec<Vec<u8>> = [
        item("a", ask("one")),
        item("b", ask("two")),
        item("tool", with_tool),
    ]
    .iter()
    .map(|i| batch.encode(i).unwrap())
    .collect();
    let handle = batch.submit(&lines, "run-7").await.unwrap();
    assert_eq!(handle.id, "batches/b1");
    assert_eq!(*keys.lock().unwrap(), ["a", "b", "tool"]);
    // The label is the batch's display name.
    let sent = &server.received_requests().await.unwrap()[0];
    let sent: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(sent["batch"]["displayName"], "run-7");

    let mut phases = Vec::new();
    let status = loop {
        let status = batch.status(&handle).await.unwrap();
        phases.push(status.phase);
        if status.phase == BatchPhase::Ended || phases.len() > 5 {
            break status;
        }
    };
    assert_eq!(
        phases,
        [BatchPhase::Queued, BatchPhase::Running, BatchPhase::Ended]
    );
    assert!(status.failure.is_none(), "{:?}", status.failure);
    assert_eq!(
        status.counts,
        BatchCounts {
            total: 3,
            succeeded: 3,
            failed: 0
        }
    );

    let mut outcomes = batch.results(&handle).await.unwrap();
    outcomes.sort_by(|x, y| x.custom_id.cmp(&y.custom_id));
    let ids: Vec<&str> = outcomes.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "tool"]);
    for (outcome, (text, out)) in outcomes
        .iter()
        .zip([("answer to a", 5), ("answer to b", 6)])
    {
        let answer = outcome.result.as_ref().unwrap();
        assert_eq!(answer.text(), text);
        assert_eq!(answer.stop_reason(), StopReason::EndTurn);
        assert_eq!(answer.usage().input_tokens, 10);
        assert_eq!(answer.usage().output_tokens, out);
    }
    let tool = outcomes[2].result.as_ref().unwrap();
    assert_eq!(tool.stop_reason(), StopReason::ToolUse);
    let calls: Vec<&str> = tool
        .blocks()
        .iter()
        .filter_map(|b| match b {
            tollgate::Block::ToolUse { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["get_weather"]);
}

#[tokio::test]
async fn cancel_posts_the_batch_s_cancel_method_and_the_batch_ends_as_cancelled() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1beta/batches/b2:cancel"))
        .and(header("x-goog-api-key", API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1beta/batches/b2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(operation(
            "batches/b2",
            "BATCH_STATE_CANCELLED",
            json!({"done": true}),
        )))
        .mount(&server)
        .await;
    let batch = transport(entry(&server.uri())).await;
    let handle = handle("batches/b2");
    batch.cancel(&handle).await.unwrap();
    let status = batch.status(&handle).await.unwrap();
    assert_eq!(status.phase, BatchPhase::Ended);
    assert!(
        matches!(&status.failure, Some(Error::BatchLineUnfinished { batch_id, how })
            if batch_id == "batches/b2" && how == "was cancelled"),
        "{:?}",
        status.failure
    );
}

#[tokio::test]
async fn find_reads_the_batch_list_page_by_page_for_the_label() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1beta/batches"))
        .and(query_param_is_missing("pageToken"))
        .and(header("x-goog-api-key", API_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "operations": [operation("batches/old", "BATCH_STATE_SUCCEEDED", json!({
                "metadata": {"displayName": "run-6", "state": "BATCH_STATE_SUCCEEDED"}}))],
            "nextPageToken": "page 2/+",
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1beta/batches"))
        .and(query_param("pageToken", "page 2/+"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "operations": [operation("batches/mine", "BATCH_STATE_RUNNING", json!({}))],
        })))
        .mount(&server)
        .await;
    let batch = transport(entry(&server.uri())).await;
    let found = batch.find("run-7").await.unwrap();
    assert_eq!(found.map(|h| h.id).as_deref(), Some("batches/mine"));
    assert_eq!(batch.find("run-404").await.unwrap(), None);
}

#[tokio::test]
async fn a_429_on_create_is_rate_limited_with_its_retry_delay_as_a_live_429() {
    let server = MockServer::start().await;
    let body = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "m",
        "details": [{"@type": codec::RETRY_INFO, "retryDelay": "31s"}]}});
    Mock::given(method("POST"))
        .and(path(CREATE_PATH))
        .respond_with(ResponseTemplate::new(429).set_body_json(body))
        .mount(&server)
        .await;
    let batch = transport(entry(&server.uri())).await;
    let line = batch.encode(&item("a", ask("x"))).unwrap();
    let err = batch.submit(&[line], "run").await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) })
            if d == Duration::from_secs(31)),
        "{err}"
    );
}

#[tokio::test]
async fn an_error_answer_to_a_get_is_classified_and_never_carries_the_key() {
    let server = MockServer::start().await;
    let body = json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
        "message": format!("API key not valid: {API_KEY}"),
        "details": [{"@type": codec::ERROR_INFO, "reason": "API_KEY_INVALID"}]}});
    Mock::given(method("GET"))
        .and(path("/v1beta/batches/b3"))
        .respond_with(ResponseTemplate::new(400).set_body_json(body))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1beta/batches/b4"))
        .respond_with(ResponseTemplate::new(503).set_body_json(
            json!({"error": {"code": 503, "status": "UNAVAILABLE", "message": "overloaded"}}),
        ))
        .mount(&server)
        .await;
    let batch = transport(entry(&server.uri())).await;
    let err = batch.status(&handle("batches/b3")).await.unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400 && e.message.contains("API_KEY_INVALID")),
        "{err}"
    );
    assert!(!format!("{err} {err:?}").contains(API_KEY), "{err:?}");
    let err = batch.results(&handle("batches/b4")).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 503, .. })
        ),
        "{err}"
    );
}

#[tokio::test]
async fn the_batch_resource_is_read_up_to_the_model_s_max_response_bytes() {
    let server = MockServer::start().await;
    let big = operation(
        "batches/b5",
        "BATCH_STATE_SUCCEEDED",
        json!({"response": {"inlinedResponses": {"inlinedResponses": [
            {"response": answer(Some(&"x".repeat(4096)), 5), "metadata": {"key": "a"}}]}}}),
    );
    Mock::given(method("GET"))
        .and(path("/v1beta/batches/b5"))
        .respond_with(ResponseTemplate::new(200).set_body_json(big))
        .mount(&server)
        .await;
    let handle = handle("batches/b5");
    let small = transport(entry(&server.uri()).with_max_response_bytes(2048)).await;
    let err = small.results(&handle).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::ResponseTooLarge {
                limit_bytes: 2048,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn without_a_catalog_limit_a_batch_resource_past_a_chat_answer_s_limit_is_read() {
    let server = MockServer::start().await;
    let text = "x".repeat(33 << 20);
    let big = operation(
        "batches/b6",
        "BATCH_STATE_SUCCEEDED",
        json!({"response": {"inlinedResponses": {"inlinedResponses": [
            {"response": answer(Some(&text), 5), "metadata": {"key": "a"}}]}}}),
    );
    Mock::given(method("GET"))
        .and(path("/v1beta/batches/b6"))
        .respond_with(ResponseTemplate::new(200).set_body_json(big))
        .mount(&server)
        .await;
    let handle = handle("batches/b6");
    let batch = transport(entry(&server.uri())).await;
    let outcomes = batch.results(&handle).await.unwrap();
    assert_eq!(outcomes[0].result.as_ref().unwrap().text().len(), 33 << 20);
}

#[tokio::test]
async fn caps_are_the_inline_limit_lowered_by_the_catalog_s_batch_terms() {
    let batch = transport(entry("http://127.0.0.1:9")).await;
    let caps = batch.caps();
    assert_eq!(caps.max_requests, MAX_BATCH_REQUESTS);
    assert!(caps.max_bytes < INLINE_BATCH_BYTES && caps.max_bytes > INLINE_BATCH_BYTES - (1 << 20));

    let mut lowered = entry("http://127.0.0.1:9");
    lowered.batch.max_requests = Some(5);
    lowered.batch.max_bytes = Some(1000);
    let caps = transport(lowered).await.caps();
    assert_eq!((caps.max_requests, caps.max_bytes), (5, 1000));

    let mut raised = entry("http://127.0.0.1:9");
    raised.batch.max_requests = Some(1 << 40);
    raised.batch.max_bytes = Some(1 << 40);
    let caps = transport(raised).await.caps();
    assert_eq!(caps.max_requests, MAX_BATCH_REQUESTS);
    assert!(caps.max_bytes < INLINE_BATCH_BYTES);
}

#[tokio::test]
async fn an_encoded_line_is_the_live_body_under_its_key() {
    let batch = transport(entry("http://127.0.0.1:9").with_option("top_k", 7)).await;
    let request = ask("hello");
    let line: Value =
        serde_json::from_slice(&batch.encode(&item("k-1", request.clone())).unwrap()).unwrap();
    let live = codec::encode_request(
        &request,
        &codec::EncodeOptions {
            model: "gemini-2.5-flash".into(),
            max_output_tokens: Some(500),
            top_k: Some(7),
            ..codec::EncodeOptions::default()
        },
    )
    .unwrap();
    assert_eq!(line, json!({"request": live, "metadata": {"key": "k-1"}}));
}

#[tokio::test]
async fn encode_refuses_what_the_live_encoder_refuses() {
    let batch =
        transport(entry("http://127.0.0.1:9").with_option("cached_content", "cachedContents/abc"))
            .await;
    let with_system = Conversation::new()
        .with_system("Be brief.")
        .user("hi")
        .request("flash", SamplingParams::new())
        .unwrap();
    assert_refused(
        batch.encode(&item("a", with_system)),
        "options.cached_content",
    );
}

#[tokio::test]
async fn a_batch_over_the_inline_limit_is_refused_before_anything_is_sent() {
    let server = silent_server().await;
    let batch = transport(entry(&server.uri())).await;
    let big = "x".repeat(usize::try_from(INLINE_BATCH_BYTES).unwrap());
    let line = serde_json::to_vec(&json!({
        "request": {"contents": [{"role": "user", "parts": [{"text": big}]}]},
        "metadata": {"key": "a"},
    }))
    .unwrap();
    assert_refused(batch.submit(&[line], "run").await, "lines");
    assert_refused(batch.submit(&[], "run").await, "lines");
    assert_refused(
        batch.submit(&[b"not json".to_vec()], "run").await,
        "lines[0]",
    );
}

#[tokio::test]
async fn a_handle_id_that_is_not_a_batch_name_is_refused_before_anything_is_sent() {
    let server = silent_server().await;
    let batch = transport(entry(&server.uri())).await;
    let bad = handle("batches/../models/x");
    assert_refused(batch.status(&bad).await, "batch.id");
    assert_refused(batch.results(&bad).await, "batch.id");
    assert_refused(batch.cancel(&bad).await, "batch.id");
}

#[derive(Debug)]
struct StaticToken;

#[tollgate::async_trait]
impl TokenSource for StaticToken {
    async fn access_token(
        &self,
        _: Option<&str>,
    ) -> tollgate::Result<tollgate::credentials::Secret> {
        Ok(tollgate::credentials::Secret::new("ya29.test"))
    }
}

#[tokio::test]
async fn vertex_has_no_batch_transport() {
    let vertex = ModelEntry::new("pro", "vertex", "gemini-2.5-pro")
        .with_output_tokens(2000, 500)
        .with_option("project", "proj-1")
        .with_option("location", "us-central1");
    let models = Models::builder()
        .catalog(Catalog::builder().model(vertex).build().unwrap())
        .provider(GeminiProvider::vertex_with_tokens(Arc::new(StaticToken)))
        .build()
        .unwrap();
    let err = models.batch("pro").await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { capability, .. } if capability.starts_with("batch")),
        "{err}"
    );
}

#[tokio::test]
async fn batch_body_takes_gemini_or_llmock_and_nothing_else() {
    for body in ["gemini", "llmock"] {
        let entry = entry("http://127.0.0.1:9").with_option("batch_body", body);
        assert!(models(entry).batch("flash").await.is_ok(), "{body}");
    }
    let entry = entry("http://127.0.0.1:9").with_option("batch_body", "jsonl");
    let err = models(entry).batch("flash").await.unwrap_err().to_string();
    assert!(
        err.contains("batch_body") && err.contains("`llmock`"),
        "{err}"
    );
}
