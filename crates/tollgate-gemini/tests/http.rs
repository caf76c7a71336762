//! The transports against a local HTTP server (wiremock on 127.0.0.1), through the
//! pipeline (`Models`): paths and headers for both keys, errors by `google.rpc.Status`,
//! CRLF streams and a mid-stream error, thought signatures across turns, embeddings
//! batching, decisions, Vertex addresses and authentication, catalog errors.
//!
//! The wire fixtures are small functions ([`good_answer`], [`stream_frames`],
//! [`error_body`]) so that a shared contract kit can script them later.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry, ModelKind};
use tollgate::credentials::{MemoryCredentialStore, Secret};
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Block, Catalog, Conversation, DecisionRequest, EmbeddingPurpose, Error, JobContext, Message,
    Models, ProviderError, Question, Role, SamplingParams, StopReason, StreamEvent,
};
use tollgate_gemini::{GeminiProvider, TokenSource, codec};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY_ID: &str = "gemini-main";
const API_KEY: &str = "AIzaTEST-0123456789-SECRET";
const MODEL_PATH: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
const STREAM_PATH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
const VERTEX_PATH: &str = "/v1/projects/proj-1/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent";

/// A whole answer: `text`, `STOP`, usage with cached and thought tokens.
fn good_answer(text: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 120, "cachedContentTokenCount": 100,
                          "candidatesTokenCount": 5, "thoughtsTokenCount": 3, "totalTokenCount": 128},
        "modelVersion": "gemini-2.5-flash",
    })
}

/// SSE frames, one whole response per event, with `eol` line ends (Vertex sends CRLF).
fn stream_frames(chunks: &[Value], eol: &str) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}{eol}{eol}"))
        .collect()
}

/// A `google.rpc.Status` body for `code`, with `details`.
fn error_body(code: u16, status: &str, details: Value) -> Value {
    json!({"error": {"code": code, "message": "m", "status": status, "details": details}})
}

fn limits() -> Limits {
    Limits {
        rpm: 1000,
        input_tpm: 10_000_000,
        ..Limits::default()
    }
}

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("flash", "gemini", "gemini-2.5-flash")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(limits())
        .with_option("base_url", base_url)
}

fn pipeline() -> PipelineConfig {
    PipelineConfig {
        retry: RetryPolicy {
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            jitter_seed: Some(1),
            ..RetryPolicy::default()
        },
        ..PipelineConfig::default()
    }
}

fn models(entries: Vec<ModelEntry>) -> Models {
    models_with(entries, Vec::new())
}

fn models_with(entries: Vec<ModelEntry>, providers: Vec<GeminiProvider>) -> Models {
    let mut catalog = Catalog::builder().embedding_width(4);
    for e in entries {
        catalog = catalog.model(e);
    }
    let mut builder = Models::builder()
        .catalog(catalog.build().unwrap())
        .credentials(MemoryCredentialStore::new().with(KEY_ID, API_KEY))
        .pipeline(pipeline());
    for p in providers {
        builder = builder.provider(p);
    }
    builder.build().unwrap()
}

fn ask(model: &str, text: &str) -> tollgate::LlmRequest {
    Conversation::new()
        .user(text)
        .request(model, SamplingParams::new())
        .unwrap()
}

async fn mount(server: &MockServer, at: &str, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(at))
        .respond_with(template)
        .mount(server)
        .await;
}

#[tokio::test]
async fn gemini_posts_generate_content_with_the_api_key_header() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(MODEL_PATH))
        .and(header("x-goog-api-key", API_KEY))
        .and(body_partial_json(json!({
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 500},
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(good_answer("Hello.")))
        .expect(1)
        .mount(&server)
        .await;
    let models = models(vec![entry(&server.uri())]);
    let answer = models
        .chat("flash")
        .await
        .unwrap()
        .single_response(&ask("flash", "hi"))
        .await
        .unwrap();
    assert_eq!(answer.text(), "Hello.");
    let usage = answer.usage();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.output_tokens
        ),
        (20, 100, 8)
    );
    let sent = &server.received_requests().await.unwrap()[0];
    assert!(sent.headers.get("authorization").is_none());
}

async fn read_stream(models: &Models, model: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let mut s = match models
        .chat(model)
        .await
        .unwrap()
        .stream_response(&ask(model, "hi"))
        .await
    {
        Ok(s) => s,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(item) = s.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

#[tokio::test]
async fn a_crlf_framed_stream_asks_for_alt_sse_and_completes() {
    let server = MockServer::start().await;
    let frames = stream_frames(
        &[
            json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}],
                   "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 1}}),
            json!({"candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}],
                   "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2}}),
        ],
        "\r\n",
    );
    Mock::given(method("POST"))
        .and(path(STREAM_PATH))
        .and(wiremock::matchers::query_param("alt", "sse"))
        .and(header("accept", "text/event-stream"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(frames),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (events, error) = read_stream(&models(vec![entry(&server.uri())]), "flash").await;
    assert!(error.is_none(), "{error:?}");
    match events.last() {
        Some(StreamEvent::Completed(answer)) => {
            assert_eq!(answer.text(), "Hello");
            assert_eq!(answer.usage().output_tokens, 2);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_chunk_after_content_interrupts_the_stream_without_a_resend() {
    let server = MockServer::start().await;
    let frames = stream_frames(
        &[
            json!({"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}),
            error_body(500, "INTERNAL", json!([])),
        ],
        "\n",
    );
    Mock::given(method("POST"))
        .and(path(STREAM_PATH))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(frames),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (events, error) = read_stream(&models(vec![entry(&server.uri())]), "flash").await;
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { cause, .. })
            if matches!(**cause, Error::Provider(ProviderError::Server { status: 500, .. }))),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_429_with_retry_info_is_retried_and_without_retries_reports_the_wait() {
    let server = MockServer::start().await;
    let limited = error_body(
        429,
        "RESOURCE_EXHAUSTED",
        json!([{"@type": codec::RETRY_INFO, "retryDelay": "0.001s"}]),
    );
    Mock::given(method("POST"))
        .and(path(MODEL_PATH))
        .respond_with(ResponseTemplate::new(429).set_body_json(&limited))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(
        &server,
        MODEL_PATH,
        ResponseTemplate::new(200).set_body_json(good_answer("ok")),
    )
    .await;
    let first = models(vec![entry(&server.uri())]);
    let chat = first.chat("flash").await.unwrap();
    assert_eq!(
        chat.single_response(&ask("flash", "a"))
            .await
            .unwrap()
            .text(),
        "ok"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);

    let server = MockServer::start().await;
    mount(
        &server,
        MODEL_PATH,
        ResponseTemplate::new(429).set_body_json(&limited),
    )
    .await;
    let models = models(vec![entry(&server.uri())]).for_job(JobContext::new("once", 0));
    let err = models
        .chat("flash")
        .await
        .unwrap()
        .single_response(&ask("flash", "b"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_millis(1)),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_per_day_quota_failure_is_not_retried() {
    let server = MockServer::start().await;
    let body = error_body(
        429,
        "RESOURCE_EXHAUSTED",
        json!([{"@type": codec::QUOTA_FAILURE, "violations": [
            {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]),
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(body))
        .expect(1)
        .mount(&server)
        .await;
    let err = models(vec![entry(&server.uri())])
        .chat("flash")
        .await
        .unwrap()
        .single_response(&ask("flash", "a"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::QuotaExhausted { provider, .. } if provider == "gemini"),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_invalid_key_is_a_request_error_without_the_key_in_it() {
    let server = MockServer::start().await;
    let mut body = error_body(
        400,
        "INVALID_ARGUMENT",
        json!([{"@type": codec::ERROR_INFO, "reason": "API_KEY_INVALID"}]),
    );
    body["error"]["message"] = json!(format!("API key not valid: {API_KEY}"));
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(body))
        .expect(1)
        .mount(&server)
        .await;
    let err = models(vec![entry(&server.uri())])
        .chat("flash")
        .await
        .unwrap()
        .single_response(&ask("flash", "a"))
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400),
        "{err:?}"
    );
    assert!(
        text.contains("API_KEY_INVALID") && !text.contains(API_KEY),
        "{text}"
    );
}

#[tokio::test]
async fn thought_signatures_reach_the_next_request_through_the_pipeline() {
    let server = MockServer::start().await;
    let first = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"id": "fc1", "name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": "c2lnbmF0dXJl"}]}, "finishReason": "STOP"}]});
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"contents": [{"role": "user"}]})))
        .and(|r: &Request| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            body["contents"].as_array().unwrap().len() == 1
        })
        .respond_with(ResponseTemplate::new(200).set_body_json(first))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"contents": [{}, {"role": "model", "parts": [
            {"functionCall": {"id": "fc1", "name": "get_weather"}, "thoughtSignature": "c2lnbmF0dXJl"}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "fc1", "name": "get_weather",
                "response": {"output": "21 C"}}}]}]})))
        .respond_with(ResponseTemplate::new(200).set_body_json(good_answer("Sunny.")))
        .expect(1)
        .mount(&server)
        .await;
    let models = models(vec![entry(&server.uri())]);
    let chat = models.chat("flash").await.unwrap();
    let mut conversation =
        Conversation::new()
            .user("Weather?")
            .with_tool(tollgate::ToolDefinition {
                defer_loading: false,
                cache: None,
                name: "get_weather".into(),
                description: "d".into(),
                input_schema: tollgate::Json::new(json!({"type": "object"})),
                strict: None,
                native: None,
            });
    let answer = chat
        .single_response(
            &conversation
                .request("flash", SamplingParams::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    conversation.push_response(&answer);
    conversation.messages.push(Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: "fc1".into(),
            content: vec![Block::text("21 C")],
            is_error: false,
            cache: None,
        }],
    });
    let answer = chat
        .single_response(
            &conversation
                .request("flash", SamplingParams::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(answer.text(), "Sunny.");
}

fn embed_entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("embed", "gemini", "gemini-embedding-001")
        .with_kind(ModelKind::Embeddings)
        .with_credential(KEY_ID)
        .with_limits(limits())
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(3072),
            dimensions_param: true,
            truncation_safe: true,
        })
        .with_option("base_url", base_url)
}

/// Answers a `batchEmbedContents` request with one `[3, 4, 0, 0]` per text.
fn embeddings_answer(request: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let n = body["requests"].as_array().unwrap().len();
    let embeddings: Vec<Value> = (0..n)
        .map(|_| json!({"values": [3.0, 4.0, 0.0, 0.0]}))
        .collect();
    ResponseTemplate::new(200).set_body_json(json!({ "embeddings": embeddings }))
}

#[tokio::test]
async fn embeddings_are_sent_in_batches_of_at_most_100_with_the_task_and_width() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        ))
        .and(body_partial_json(
            json!({"requests": [{"model": "models/gemini-embedding-001",
            "taskType": "RETRIEVAL_DOCUMENT", "outputDimensionality": 4}]}),
        ))
        .respond_with(embeddings_answer)
        .expect(3)
        .mount(&server)
        .await;
    let texts: Vec<String> = (0..250).map(|i| format!("text {i}")).collect();
    let vectors = models(vec![embed_entry(&server.uri())])
        .embeddings("embed")
        .await
        .unwrap()
        .embed_batch(&texts, EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 250);
    assert!(vectors.iter().all(|v| v.as_slice() == [0.6, 0.8, 0.0, 0.0]));
    let sizes: Vec<usize> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["requests"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(sizes, [100, 100, 50]);
}

fn decide_entry(id: &str, base_url: &str, logprobs: bool) -> ModelEntry {
    ModelEntry::new(id, "gemini", "gemini-2.0-flash")
        .with_kind(ModelKind::Decision)
        .with_credential(KEY_ID)
        .with_limits(limits())
        .with_option("base_url", base_url)
        .with_option("logprobs", logprobs)
}

#[tokio::test]
async fn decisions_need_the_catalog_to_say_the_model_returns_logprobs() {
    let server = MockServer::start().await;
    let answer = json!({"candidates": [{"content": {"parts": [{"text": "yes"}]}, "finishReason": "STOP",
        "logprobsResult": {"topCandidates": [{"candidates": [
            {"token": "yes", "logProbability": (0.8f64).ln()},
            {"token": "no", "logProbability": (0.2f64).ln()}]}]}}]});
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-2.0-flash:generateContent"))
        .and(body_partial_json(
            json!({"generationConfig": {"responseLogprobs": true}}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .expect(1)
        .mount(&server)
        .await;
    let models = models(vec![
        decide_entry("judge", &server.uri(), true),
        decide_entry("plain", &server.uri(), false),
    ]);
    let err = models.decision("plain").await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { model_id, .. } if model_id == "plain"),
        "{err}"
    );
    let request = DecisionRequest::new(
        "judge",
        "a sunny day",
        vec![Question::Noul {
            name: "outside".into(),
            prompt: "Go outside?".into(),
        }],
    )
    .unwrap();
    let decision = models
        .decision("judge")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    let p = decision.probability("outside", "yes").unwrap();
    assert!((p - 0.8).abs() < 1e-9, "{p}");
}

#[tokio::test]
async fn a_model_whose_limits_count_output_tokens_is_refused_at_its_first_call() {
    let entry = entry("http://127.0.0.1:9").with_limits(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    });
    let err = models(vec![entry]).chat("flash").await.unwrap_err();
    assert!(err.to_string().contains("input_tpm"), "{err}");
}

/// Hands out `token-N` for each call, and records which credential it was asked for.
#[derive(Debug, Default)]
struct CountingTokens {
    asked: std::sync::Mutex<Vec<Option<String>>>,
}

#[tollgate::async_trait]
impl TokenSource for CountingTokens {
    async fn access_token(&self, credential: Option<&str>) -> tollgate::Result<Secret> {
        let mut asked = self.asked.lock().unwrap();
        asked.push(credential.map(str::to_owned));
        Ok(Secret::new(format!("token-{}", asked.len())))
    }
}

fn vertex_entry(base_url: Option<&str>) -> ModelEntry {
    let mut e = ModelEntry::new("pro", "vertex", "gemini-2.5-pro")
        .with_output_tokens(2000, 500)
        .with_limits(limits())
        .with_option("project", "proj-1")
        .with_option("location", "us-central1")
        .with_option("quota_project", "billing-1");
    if let Some(url) = base_url {
        e = e.with_option("base_url", url);
    }
    e
}

#[tokio::test]
async fn vertex_posts_to_the_project_location_path_with_a_fresh_bearer_token() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(VERTEX_PATH))
        .and(header("authorization", "Bearer token-1"))
        .and(header("x-goog-user-project", "billing-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(good_answer("one")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(VERTEX_PATH))
        .and(header("authorization", "Bearer token-2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(good_answer("two")))
        .expect(1)
        .mount(&server)
        .await;
    let tokens = Arc::new(CountingTokens::default());
    let models = models_with(
        vec![vertex_entry(Some(&server.uri())).with_credential("vertex-sa")],
        vec![GeminiProvider::vertex_with_tokens(tokens.clone())],
    );
    let chat = models.chat("pro").await.unwrap();
    for want in ["one", "two"] {
        assert_eq!(
            chat.single_response(&ask("pro", want))
                .await
                .unwrap()
                .text(),
            want
        );
    }
    assert_eq!(
        *tokens.asked.lock().unwrap(),
        [Some("vertex-sa".to_owned()), Some("vertex-sa".to_owned())]
    );
    assert!(
        server.received_requests().await.unwrap()[0]
            .headers
            .get("x-goog-api-key")
            .is_none()
    );
}

#[tokio::test]
async fn vertex_without_a_credential_asks_for_default_credentials_and_without_a_project_fails() {
    let server = MockServer::start().await;
    mount(
        &server,
        VERTEX_PATH,
        ResponseTemplate::new(200).set_body_json(good_answer("adc")),
    )
    .await;
    let tokens = Arc::new(CountingTokens::default());
    let models = models_with(
        vec![vertex_entry(Some(&server.uri()))],
        vec![GeminiProvider::vertex_with_tokens(tokens.clone())],
    );
    let chat = models.chat("pro").await.unwrap();
    assert_eq!(
        chat.single_response(&ask("pro", "x")).await.unwrap().text(),
        "adc"
    );
    assert_eq!(*tokens.asked.lock().unwrap(), [None]);

    let mut missing = vertex_entry(None);
    missing.options.remove("project");
    let models = models_with(
        vec![missing],
        vec![GeminiProvider::vertex_with_tokens(tokens)],
    );
    let err = models.chat("pro").await.unwrap_err().to_string();
    assert!(
        err.contains("pro") && err.contains("options.project"),
        "{err}"
    );
}

#[tokio::test]
async fn vertex_signs_its_own_token_from_a_service_account_key_in_the_store() {
    let server = MockServer::start().await;
    mount(
        &server,
        VERTEX_PATH,
        ResponseTemplate::new(200).set_body_json(good_answer("signed")),
    )
    .await;
    let key = include_str!("fixtures/test-service-account.json");
    let catalog = Catalog::builder()
        .model(vertex_entry(Some(&server.uri())).with_credential("vertex-sa"))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("vertex-sa", key))
        .pipeline(pipeline())
        .build()
        .unwrap();
    let answer = models
        .chat("pro")
        .await
        .unwrap()
        .single_response(&ask("pro", "x"))
        .await
        .unwrap();
    assert_eq!(answer.text(), "signed");
    let sent = &server.received_requests().await.unwrap()[0];
    let bearer = sent.headers["authorization"].to_str().unwrap();
    let jwt = bearer.strip_prefix("Bearer ").unwrap();
    let [head, claims, _signature] = jwt.split('.').collect::<Vec<_>>()[..] else {
        panic!("not a JWT: {jwt}")
    };
    let head: Value = serde_json::from_slice(&base64url(head)).unwrap();
    let claims: Value = serde_json::from_slice(&base64url(claims)).unwrap();
    assert_eq!(head["kid"], "test-key-id-1");
    assert_eq!(
        claims["iss"],
        "tollgate-test@tollgate-test.iam.gserviceaccount.com"
    );
    assert_eq!(claims["scope"], tollgate_gemini::auth::CLOUD_PLATFORM_SCOPE);
}

#[tokio::test]
async fn a_stored_record_that_is_not_a_service_account_key_is_named_without_its_content() {
    let catalog = Catalog::builder()
        .model(vertex_entry(Some("http://127.0.0.1:9")).with_credential("vertex-sa"))
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("vertex-sa", "not-json-SECRET"))
        .pipeline(pipeline())
        .build()
        .unwrap();
    let err = models
        .chat("pro")
        .await
        .unwrap()
        .single_response(&ask("pro", "x"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("vertex-sa") && !err.contains("SECRET"),
        "{err}"
    );
}

/// Decodes unpadded base64url (a JWT's segments).
fn base64url(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => panic!("not base64url: {c}"),
    };
    let mut out = Vec::new();
    let (mut bits, mut n) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        bits = (bits << 6) | u32::from(value(c));
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    out
}
