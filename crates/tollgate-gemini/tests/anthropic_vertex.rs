//! `anthropic-vertex` (Claude on Vertex AI) against servers on 127.0.0.1: the contract kit
//! over its wire (Anthropic's Messages over `rawPredict`, with Google's and Anthropic's
//! error shapes), then fixtures for what only Vertex does: the URL path, the body
//! (`anthropic_version`, no `model`), the bearer token, streams, cache usage, the two
//! error shapes, and the catalog errors of a model without `project` or `region`.

#![cfg(feature = "vertex")]

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::{CredentialStore, MemoryCredentialStore, Secret};
use tollgate::provider::{CatalogError, Provider, ProviderContext, ProviderTransports};
use tollgate::{
    Block, CacheMark, Catalog, Conversation, Error, JobContext, LlmRequest, Message, Models,
    ModelsBuilder, ProviderError, Role, SamplingParams, StreamEvent, Usage,
};
use tollgate_gemini::claude::{VERTEX_ANTHROPIC_VERSION, read_error};
use tollgate_gemini::{
    ANTHROPIC_VERTEX_KEY, AnthropicVertexOptions, AnthropicVertexProvider, TokenSource,
};
use tollgate_testkit::provider::{
    Recorded, Reply, StreamScript, WireScript, WireToolCall, WireUsage,
};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

// ---- the contract kit ----

/// Hands out, as the access token of a credential, the record the store holds for it:
/// a stand-in for Google's token endpoint that follows the store (a rotated record is a
/// new token), so the kit's credential checks hold for the bearer token.
#[derive(Debug)]
struct StoreTokens {
    store: Arc<dyn CredentialStore>,
}

#[tollgate::async_trait]
impl TokenSource for StoreTokens {
    async fn access_token(&self, credential: Option<&str>) -> tollgate::Result<Secret> {
        let id = credential.ok_or_else(|| Error::invalid_request("credential", "names none"))?;
        Ok(self.store.get(id).await?)
    }
}

/// `anthropic-vertex` with [`StoreTokens`] made from the `Models`' own store.
#[derive(Debug)]
struct KitProvider;

#[tollgate::async_trait]
impl Provider for KitProvider {
    fn key(&self) -> &'static str {
        ANTHROPIC_VERTEX_KEY
    }

    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(
        &self,
        context: &ProviderContext,
    ) -> tollgate::Result<Arc<dyn ProviderTransports>> {
        let tokens = StoreTokens {
            store: context.credentials().clone(),
        };
        AnthropicVertexProvider::with_tokens(Arc::new(tokens))
            .build(context)
            .await
    }
}

struct ClaudeVertexWire;

/// Anthropic's `error.type` for a status, as the model's errors come through Vertex.
fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        408 => "timeout_error",
        413 => "request_too_large",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// Google's canonical code name for a status, as Vertex's own errors carry it.
fn status_name(status: u16) -> &'static str {
    match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        _ => "INTERNAL",
    }
}

fn anthropic_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({"type": "error", "error": {"type": kind, "message": message},
                "request_id": "req_vrtx_1"}),
    )
}

/// A `google.rpc.Status` in the one-element array Vertex sends for Claude's quota 429s.
fn google_error(status: u16, message: &str, details: Value) -> Reply {
    Reply::json(
        status,
        &json!([{"error": {"code": status, "message": message, "status": status_name(status),
                           "details": details}}]),
    )
}

fn message(text: &str, stop: &str, usage: WireUsage) -> Value {
    json!({"id": "msg_vrtx_1", "type": "message", "role": "assistant",
           "model": "claude-sonnet-4-5-20250929",
           "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": usage.input, "output_tokens": usage.output,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
}

fn sse(event: &Value) -> Vec<u8> {
    let name = event["type"].as_str().unwrap_or("error");
    format!("event: {name}\ndata: {event}\n\n").into_bytes()
}

fn message_start(usage: WireUsage) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_vrtx_1", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": usage.input, "output_tokens": 1}}})
}

fn message_end(stop: &str, usage: WireUsage) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": usage.output}}),
        json!({"type": "message_stop"}),
    ]
}

fn text_delta(index: usize, text: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
           "delta": {"type": "text_delta", "text": text}})
}

fn block_start(index: usize, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn block_stop(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn script(events: &[Value], first_event: usize) -> StreamScript {
    StreamScript {
        content_type: "text/event-stream".into(),
        frames: events.iter().map(sse).collect(),
        first_event,
    }
}

impl WireScript for ClaudeVertexWire {
    fn provider(&self) -> &'static str {
        ANTHROPIC_VERTEX_KEY
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(KitProvider)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, ANTHROPIC_VERTEX_KEY, "claude-sonnet-4-5@20250929")
            .with_credential(credential)
            .with_option("project", "kit-project")
            .with_option("region", "us-east5")
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        let bearer = request.header("authorization")?;
        bearer.strip_prefix("Bearer ").map(str::to_owned)
    }

    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        Reply::json(200, &message(text, "end_turn", usage))
    }

    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        let mut events = vec![
            message_start(usage),
            json!({"type": "ping"}),
            block_start(0, json!({"type": "text", "text": ""})),
        ];
        let first_event = events.len();
        events.extend(pieces.iter().map(|p| text_delta(0, p)));
        events.push(block_stop(0));
        events.extend(message_end("end_turn", usage));
        script(&events, first_event)
    }

    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        Some(sse(
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        ))
    }

    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        let mut answer = message(text, "tool_use", usage);
        answer["content"].as_array_mut()?.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}),
        );
        Some(Reply::json(200, &answer))
    }

    /// Text in block 0, the call in block 1, its input in two `input_json_delta`s.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        let input = call.input.to_string();
        let (head, tail) = input.split_at(input.len() / 2);
        let piece = |p: &str| {
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": p}})
        };
        let mut events = vec![
            message_start(usage),
            block_start(0, json!({"type": "text", "text": ""})),
            text_delta(0, text),
            block_stop(0),
            block_start(
                1,
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            ),
            piece(head),
            piece(tail),
            block_stop(1),
        ];
        events.extend(message_end("tool_use", usage));
        Some(script(&events, 2))
    }

    /// Vertex's own refusals (auth, a model not enabled, quota) in Google's shape; the
    /// model's errors in Anthropic's.
    fn error(&self, status: u16, message: &str) -> Reply {
        match status {
            401 | 403 | 404 | 429 => google_error(status, message, json!([])),
            _ => anthropic_error(status, error_type(status), message),
        }
    }

    /// A quota that waiting a minute will not bring back: a per-day `QuotaFailure`.
    fn quota_exhausted(&self, message: &str) -> Reply {
        google_error(
            429,
            message,
            json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "OnlinePredictionRequestsPerDayPerProject"}]}]),
        )
    }

    fn context_overflow(&self) -> Option<Reply> {
        Some(anthropic_error(
            400,
            "invalid_request_error",
            "prompt is too long: 215000 tokens > 200000 maximum",
        ))
    }

    fn context_window_stop(&self) -> Option<Reply> {
        let usage = WireUsage {
            input: 12,
            output: 1,
        };
        Some(Reply::json(
            200,
            &message("cut", "model_context_window_exceeded", usage),
        ))
    }

    fn refusal(&self, usage: WireUsage) -> Option<Reply> {
        let mut body = message("", "refusal", usage);
        body["stop_details"] =
            json!({"type": "refusal", "category": "cyber", "explanation": "No."});
        Some(Reply::json(200, &body))
    }

    /// Vertex sends no rate-limit headers for Claude (see the docs page).
    fn rate_limit_headers(&self, _: u64, _: u64) -> Vec<(String, String)> {
        Vec::new()
    }
}

tollgate_testkit::provider_contract_tests!(ClaudeVertexWire;
    skip {
        rate_limit_headers_set_the_limiter_buckets: "Vertex sends no rate-limit headers for Claude",
        x_should_retry_false_vetoes_the_retry: "Vertex is not known to pass x-should-retry on",
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each: "Claude serves no embeddings",
        a_failed_embeddings_request_is_resent_alone: "Claude serves no embeddings",
        an_embeddings_request_carries_the_purpose_and_the_width: "Claude serves no embeddings",
        the_secret_never_shows_in_embeddings_errors: "Claude serves no embeddings",
    }
);

// ---- fixtures ----

const NAME: &str = "claude-sonnet-4-5@20250929";
const RAW_PREDICT: &str = "/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict";
const STREAM_RAW_PREDICT: &str = "/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict";

fn entry(base_url: Option<&str>) -> ModelEntry {
    let mut entry = ModelEntry::new("claude", ANTHROPIC_VERTEX_KEY, NAME)
        .with_credential("vertex-sa")
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1000,
            ..Limits::default()
        })
        .with_option("project", "proj-1")
        .with_option("region", "us-east5");
    if let Some(url) = base_url {
        entry = entry.with_option("base_url", url);
    }
    entry
}

/// `Models` for `entry`, whose credential `vertex-sa` gives the token `token-1`.
fn models(entry: ModelEntry) -> Models {
    Models::builder()
        .catalog(Catalog::builder().model(entry).build().unwrap())
        .credentials(MemoryCredentialStore::new().with("vertex-sa", "token-1"))
        .provider(KitProvider)
        .build()
        .unwrap()
}

/// A server answering POSTs to `at` with `template`.
async fn serve(at: &str, template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(at))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

/// The one request `server` received: its headers and its JSON body.
async fn sent(server: &MockServer) -> (wiremock::http::HeaderMap, Value) {
    let requests = server.received_requests().await.unwrap();
    let [request] = &requests[..] else {
        panic!("{} requests, not one", requests.len())
    };
    let body = serde_json::from_slice(&request.body).unwrap();
    (request.headers.clone(), body)
}

fn ask(text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request("claude", SamplingParams::new())
        .unwrap()
}

/// One whole answer to `request` through `models`.
async fn call(models: &Models, request: &LlmRequest) -> tollgate::Result<tollgate::LlmResponse> {
    models.chat("claude").await?.single_response(request).await
}

fn answer(text: &str, usage: Value) -> Value {
    json!({"id": "msg_vrtx_1", "type": "message", "role": "assistant",
           "model": "claude-sonnet-4-5-20250929", "content": [{"type": "text", "text": text}],
           "stop_reason": "end_turn", "stop_sequence": null, "usage": usage})
}

#[tokio::test]
async fn raw_predict_is_posted_to_the_project_region_and_model_path_with_a_bearer_token() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(RAW_PREDICT))
        .and(header("authorization", "Bearer token-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer(
            "hello",
            json!({"input_tokens": 9, "output_tokens": 2}),
        )))
        .expect(1)
        .mount(&server)
        .await;
    let reply = call(&models(entry(Some(&server.uri()))), &ask("hi"))
        .await
        .unwrap();
    assert_eq!(reply.text(), "hello");
}

/// Application Default Credentials as a token source sees them: asked for no credential.
#[derive(Debug)]
struct DefaultCredentials;

#[tollgate::async_trait]
impl TokenSource for DefaultCredentials {
    async fn access_token(&self, credential: Option<&str>) -> tollgate::Result<Secret> {
        match credential {
            None => Ok(Secret::new("adc-token")),
            Some(id) => Err(Error::invalid_request(
                "credential",
                format!("`{id}` asked"),
            )),
        }
    }
}

#[tokio::test]
async fn a_model_without_a_credential_asks_for_default_credentials() {
    let ok = answer("adc", json!({"input_tokens": 1, "output_tokens": 1}));
    let server = serve(RAW_PREDICT, ResponseTemplate::new(200).set_body_json(ok)).await;
    let mut entry = entry(Some(&server.uri()));
    entry.credential = None;
    let models = Models::builder()
        .catalog(Catalog::builder().model(entry).build().unwrap())
        .provider(AnthropicVertexProvider::with_tokens(Arc::new(
            DefaultCredentials,
        )))
        .build()
        .unwrap();
    assert_eq!(call(&models, &ask("hi")).await.unwrap().text(), "adc");
    let (headers, _) = sent(&server).await;
    assert_eq!(headers["authorization"], "Bearer adc-token");
}

#[tokio::test]
async fn the_body_has_anthropic_version_and_no_model_and_betas_go_as_a_header() {
    let ok = answer("ok", json!({"input_tokens": 1, "output_tokens": 1}));
    let server = serve(RAW_PREDICT, ResponseTemplate::new(200).set_body_json(ok)).await;
    let entry = entry(Some(&server.uri()))
        .with_option("beta", vec!["context-1m-2025-08-07", "b2"])
        .with_option("quota_project", "billing-1")
        .with_option("top_k", 40);
    call(&models(entry), &ask("hi")).await.unwrap();
    let (headers, body) = sent(&server).await;
    assert_eq!(body["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
    assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
    assert!(body.get("model").is_none(), "{body}");
    assert!(body.get("stream").is_none(), "{body}");
    assert_eq!(body["top_k"], 40);
    assert_eq!(body["messages"][0]["content"][0]["text"], "hi");
    assert_eq!(headers["authorization"], "Bearer token-1");
    assert_eq!(headers["anthropic-beta"], "context-1m-2025-08-07,b2");
    assert_eq!(headers["x-goog-user-project"], "billing-1");
    assert!(headers.get("anthropic-version").is_none());
    assert!(headers.get("x-api-key").is_none());
}

#[tokio::test]
async fn a_stream_goes_to_stream_raw_predict_with_stream_in_the_body() {
    let usage = WireUsage {
        input: 7,
        output: 3,
    };
    let mut events = vec![
        message_start(usage),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Ol"),
        text_delta(0, "á!"),
        block_stop(0),
    ];
    events.extend(message_end("end_turn", usage));
    let frames: Vec<u8> = events.iter().flat_map(sse).collect();
    let template = ResponseTemplate::new(200).set_body_raw(frames, "text/event-stream");
    let server = serve(STREAM_RAW_PREDICT, template).await;
    let mut stream = models(entry(Some(&server.uri())))
        .chat("claude")
        .await
        .unwrap()
        .stream_response(&ask("hi"))
        .await
        .unwrap();
    let mut completed = None;
    while let Some(event) = stream.next().await {
        if let StreamEvent::Completed(response) = event.unwrap() {
            completed = Some(response);
        }
    }
    let response = completed.expect("a completed answer");
    assert_eq!(response.text(), "Olá!");
    assert_eq!(response.usage(), Usage::from_cache_exclusive(7, 0, 0, 0, 3));
    let (headers, body) = sent(&server).await;
    assert_eq!(headers["authorization"], "Bearer token-1");
    assert_eq!(body["stream"], true);
    assert_eq!(body["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
    assert!(body.get("model").is_none(), "{body}");
}

#[tokio::test]
async fn cache_marks_are_sent_as_cache_control_and_cache_usage_is_read() {
    let cached = answer(
        "cached",
        json!({"input_tokens": 4, "output_tokens": 2, "cache_read_input_tokens": 1000,
               "cache_creation_input_tokens": 300,
               "cache_creation": {"ephemeral_5m_input_tokens": 100,
                                  "ephemeral_1h_input_tokens": 200}}),
    );
    let server = serve(
        RAW_PREDICT,
        ResponseTemplate::new(200).set_body_json(cached),
    )
    .await;
    let request = LlmRequest::new(
        "claude",
        vec![Message {
            role: Role::User,
            content: vec![
                Block::text("a long document").with_cache(CacheMark::OneHour),
                Block::text("the question"),
            ],
        }],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let reply = call(&models(entry(Some(&server.uri()))), &request)
        .await
        .unwrap();
    assert_eq!(
        reply.usage(),
        Usage::from_cache_exclusive(4, 1000, 100, 200, 2)
    );
    let (_, body) = sent(&server).await;
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
}

/// The error a call to a server answering `status` with `body` ends in, without retries.
async fn failure(status: u16, body: Value) -> Error {
    let server = serve(
        RAW_PREDICT,
        ResponseTemplate::new(status).set_body_json(body),
    )
    .await;
    let models = models(entry(Some(&server.uri()))).for_job(JobContext::new("no-retries", 0));
    call(&models, &ask("hi")).await.unwrap_err()
}

#[tokio::test]
async fn a_google_quota_429_is_rate_limited_with_its_retry_info() {
    let body = json!([{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}]);
    let err = failure(429, body).await;
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d.as_secs() == 7
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_anthropic_overloaded_error_is_overloaded_and_a_rate_limit_error_rate_limited() {
    let overloaded = json!({"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let err = failure(529, overloaded).await;
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 529, .. })
        ),
        "{err:?}"
    );
    let limited = json!({"type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"}});
    let err = failure(429, limited).await;
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_prompt_too_long_from_the_model_is_a_context_overflow() {
    let body = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 215000 tokens > 200000 maximum"}});
    let err = failure(400, body).await;
    assert!(
        matches!(err, Error::ContextWindowExceeded { .. }),
        "{err:?}"
    );
}

#[test]
fn errors_are_read_by_their_shape_status_and_type() {
    let google = |code: u16, name: &str| {
        json!({"error": {"code": code, "message": "m", "status": name}})
            .to_string()
            .into_bytes()
    };
    let anthropic = |kind: &str| {
        json!({"type": "error", "error": {"type": kind, "message": "m"}})
            .to_string()
            .into_bytes()
    };
    // Google's shape: the canonical code name is the kind; a 503 is overloaded.
    let wire = read_error(403, &google(403, "PERMISSION_DENIED"));
    assert_eq!(wire.kind, "PERMISSION_DENIED");
    assert!(matches!(wire.verdict(), Error::ProviderRequest(_)));
    assert!(read_error(503, &google(503, "UNAVAILABLE")).overloaded);
    // A Google 429 without a QuotaFailure is the project's quota, not shared capacity.
    assert!(!read_error(429, &google(429, "RESOURCE_EXHAUSTED")).overloaded);
    // Anthropic's shape: its `error.type` is the kind.
    let wire = read_error(529, &anthropic("overloaded_error"));
    assert_eq!(wire.kind, "overloaded_error");
    assert!(wire.overloaded);
    let wire = read_error(401, &anthropic("authentication_error"));
    assert_eq!(wire.kind, "authentication_error");
    // Neither: the status decides, the text is the message.
    let wire = read_error(502, b"<html>Bad Gateway</html>");
    assert!(matches!(
        wire.verdict(),
        Error::Provider(ProviderError::Server { status: 502, .. })
    ));
}

/// The catalog error a model's first call ends in.
async fn catalog_error(entry: ModelEntry) -> (String, String) {
    match models(entry).chat("claude").await.unwrap_err() {
        Error::Catalog(CatalogError::InvalidField {
            model_id, field, ..
        }) => (model_id, field),
        other => panic!("expected a catalog error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_model_without_a_region_or_a_project_is_a_catalog_error_naming_the_option() {
    for missing in ["region", "project"] {
        let mut model = entry(Some("http://127.0.0.1:9"));
        model.options.remove(missing);
        let (model_id, field) = catalog_error(model).await;
        assert_eq!(model_id, "claude");
        assert_eq!(field, format!("options.{missing}"));
    }
}

#[tokio::test]
async fn an_unknown_option_and_a_name_that_is_no_path_segment_are_catalog_errors() {
    let (_, field) = catalog_error(entry(None).with_option("location", "us-east5")).await;
    assert_eq!(field, "options.location");
    let mut model = entry(None);
    model.name = "claude/../other".into();
    let (_, field) = catalog_error(model).await;
    assert_eq!(field, "name");
}

#[test]
fn the_region_picks_the_host_and_global_uses_aiplatform_googleapis_com() {
    let base_url = |region: &str| {
        let model = entry(None).with_option("region", region);
        AnthropicVertexOptions::from_model(&model).unwrap().base_url
    };
    assert_eq!(
        base_url("us-east5"),
        "https://us-east5-aiplatform.googleapis.com"
    );
    assert_eq!(base_url("global"), "https://aiplatform.googleapis.com");
    let options =
        AnthropicVertexOptions::from_model(&entry(None).with_option("region", "global")).unwrap();
    assert_eq!(
        options
            .place
            .publisher_path("anthropic", NAME, "rawPredict"),
        "/v1/projects/proj-1/locations/global/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
    );
}

#[tokio::test]
async fn the_registered_key_signs_its_token_from_a_service_account_key_in_the_store() {
    let signed = answer("signed", json!({"input_tokens": 1, "output_tokens": 1}));
    let server = serve(
        RAW_PREDICT,
        ResponseTemplate::new(200).set_body_json(signed),
    )
    .await;
    let key = include_str!("fixtures/test-service-account.json");
    // The key as `use tollgate_gemini as _;` registers it, from a catalog's text.
    let catalog = Catalog::from_toml_str(&format!(
        r#"
        [models.claude]
        provider = "anthropic-vertex"
        name = "{NAME}"
        credential = "vertex-sa"
        max_output_tokens = 4096
        [models.claude.options]
        project = "proj-1"
        region = "us-east5"
        base_url = "{}"
        "#,
        server.uri()
    ))
    .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("vertex-sa", key))
        .build()
        .unwrap();
    let reply = call(&models, &ask("hi")).await.unwrap();
    assert_eq!(reply.text(), "signed");
    let (headers, _) = sent(&server).await;
    let bearer = headers["authorization"].to_str().unwrap();
    let jwt = bearer.strip_prefix("Bearer ").unwrap();
    assert_eq!(jwt.split('.').count(), 3, "a self-signed JWT: {jwt}");
    assert!(
        !key.contains(jwt),
        "the token is made from the key, not taken from it"
    );
}
