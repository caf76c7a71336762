//! The batch transport against a local HTTP server (wiremock on 127.0.0.1), in the
//! shapes of OpenAI's Batch API reference where llmock differs or cannot say: the
//! upload's multipart form, the create body, the key and organization headers, HTTP
//! errors of the batch endpoints classified as live calls' are, results files, paging
//! in `find`, the results byte limit, the input file deleted when its batch cannot be
//! created. Which presets have a batch API, and the lines being the live encoder's, are
//! here too.

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate::catalog::{KnownProviders, Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::batch::{BatchHandle, BatchItem, BatchPhase, BatchTransport};
use tollgate::{
    Catalog, Error, Json, LlmRequest, Message, Models, ProviderError, SamplingParams, StopReason,
    ToolDefinition, Verbosity,
};
use tollgate_openai::OpenAiProvider;
use tollgate_openai::preset::{BatchApi, Dialect, Preset, Setting};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY_ID: &str = "openai-main";
const API_KEY: &str = "sk-proj-BATCH-0123456789-SECRET";

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("gpt", "openai", "gpt-4o-mini")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1000,
            tpm: 10_000_000,
            ..Limits::default()
        })
        .with_option("base_url", base_url)
        .with_option("organization", "org-test")
}

fn models_of(entry: ModelEntry, provider: OpenAiProvider) -> Models {
    let known = KnownProviders::linked().with(provider.preset().key, "tests", false);
    let catalog = Catalog::builder()
        .known_providers(known)
        .model(entry)
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(KEY_ID, API_KEY))
        .provider(provider)
        .build()
        .unwrap()
}

async fn batch_of(entry: ModelEntry) -> Arc<dyn BatchTransport> {
    let id = entry.id.clone();
    models_of(entry, OpenAiProvider::OPENAI)
        .batch(&id)
        .await
        .unwrap()
}

fn ask(text: &str, tools: Vec<ToolDefinition>) -> LlmRequest {
    LlmRequest::new(
        "gpt",
        vec![Message::user(text)],
        tools,
        SamplingParams::new(),
    )
    .unwrap()
}

fn weather() -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
}

fn item(id: &str, request: LlmRequest) -> BatchItem {
    BatchItem {
        custom_id: id.into(),
        request,
    }
}

fn batch_object(status: &str) -> Value {
    json!({
        "id": "batch_1", "object": "batch", "endpoint": "/v1/chat/completions",
        "errors": null, "input_file_id": "file-in", "completion_window": "24h",
        "status": status, "output_file_id": "file-out", "error_file_id": "file-err",
        "request_counts": {"total": 3, "completed": 2, "failed": 1},
        "metadata": {"tollgate_label": "run-1"}
    })
}

/// Answers `verb at` with `response`: the first `times` requests, or every one.
async fn serve(
    server: &MockServer,
    verb: &str,
    at: &str,
    response: ResponseTemplate,
    times: Option<u64>,
) {
    let mock = Mock::given(method(verb))
        .and(path(at))
        .respond_with(response);
    match times {
        Some(n) => mock.up_to_n_times(n).mount(server).await,
        None => mock.mount(server).await,
    }
}

/// Answers the batch's reads with `first` once, then with `then`.
async fn batch_reads(server: &MockServer, first: Value, then: Value) {
    let at = "/v1/batches/batch_1";
    serve(server, "GET", at, ok(first), Some(1)).await;
    serve(server, "GET", at, ok(then), None).await;
}

/// Answers the upload with file `file-in`, and the batch's create with `create`.
async fn upload_then_create(server: &MockServer, create: ResponseTemplate) {
    let file = json!({"id": "file-in", "object": "file", "purpose": "batch"});
    serve(server, "POST", "/v1/files", ok(file), None).await;
    serve(server, "POST", "/v1/batches", create, None).await;
}

/// Submits one line to the server's batch API, labelled `run-1`.
async fn submit_one(server: &MockServer) -> tollgate::Result<BatchHandle> {
    let batch = batch_of(entry(&server.uri())).await;
    let line = batch.encode(&item("a", ask("one", vec![]))).unwrap();
    batch.submit(&[line], "run-1").await
}

fn ok(body: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

fn handle() -> BatchHandle {
    BatchHandle {
        id: "batch_1".into(),
        input_file: Some("file-in".into()),
    }
}

#[tokio::test]
async fn only_presets_naming_a_batch_api_hand_out_a_batch_transport() {
    let compatible = ModelEntry::new("local", "openai-compatible", "llama")
        .with_output_tokens(2000, 500)
        .with_option("base_url", "http://127.0.0.1:9");
    let models = models_of(compatible, OpenAiProvider::COMPATIBLE);
    assert!(matches!(
        models.batch("local").await.unwrap_err(),
        Error::Unsupported { capability, .. } if capability.starts_with("batch")
    ));
    assert_eq!(Preset::OPENAI.dialect.batch, Some(BatchApi::OpenAi));
    assert_eq!(Preset::COMPATIBLE.dialect.batch, None);
    assert_eq!(Dialect::OPENAI.batch, None);
}

#[tokio::test]
async fn a_responses_api_model_has_no_batch_transport() {
    let entry = entry("http://127.0.0.1:9").with_option("api", "responses");
    let models = models_of(entry, OpenAiProvider::OPENAI);
    assert!(matches!(
        models.batch("gpt").await.unwrap_err(),
        Error::Unsupported { capability, .. } if capability.contains("responses")
    ));
}

#[tokio::test]
async fn caps_are_the_apis_lowered_by_the_catalogs_terms() {
    let own = batch_of(entry("http://127.0.0.1:9")).await.caps();
    assert_eq!((own.max_requests, own.max_bytes), (50_000, 209_715_200));
    let mut lowered = entry("http://127.0.0.1:9");
    lowered.batch.max_requests = Some(10);
    lowered.batch.max_bytes = Some(u64::MAX);
    let caps = batch_of(lowered).await.caps();
    assert_eq!((caps.max_requests, caps.max_bytes), (10, 209_715_200));
}

#[tokio::test]
async fn a_line_carries_the_live_chat_body_never_streamed() {
    let server = MockServer::start().await;
    serve(
        &server,
        "POST",
        "/v1/chat/completions",
        ok(json!({
            "id": "c", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
        })),
        None,
    )
    .await;
    let models = models_of(entry(&server.uri()), OpenAiProvider::OPENAI);
    let request = ask("weather in Paris?", vec![weather()]);
    models
        .chat("gpt")
        .await
        .unwrap()
        .single_response(&request)
        .await
        .unwrap();
    let live: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();

    let batch = models.batch("gpt").await.unwrap();
    let bytes = batch.encode(&item("q-1", request)).unwrap();
    assert_eq!(
        bytes.last(),
        Some(&b'\n'),
        "a line is its whole share of the file"
    );
    let line: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(line["custom_id"], "q-1");
    assert_eq!(line["method"], "POST");
    assert_eq!(line["url"], "/v1/chat/completions");
    assert_eq!(line["body"], live);
    assert!(line["body"].get("stream").is_none());
    assert_eq!(line["body"]["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn encode_refuses_what_the_live_encoder_refuses() {
    const REFUSING: Preset = Preset {
        key: "batch-refusing",
        dialect: Dialect {
            refuses: &[Setting::Verbosity],
            batch: Some(BatchApi::OpenAi),
            ..Dialect::OPENAI
        },
        ..Preset::COMPATIBLE
    };
    let entry = ModelEntry::new("gpt", "batch-refusing", "m")
        .with_output_tokens(2000, 500)
        .with_option("base_url", "http://127.0.0.1:9");
    let models = models_of(entry, OpenAiProvider::new(REFUSING));
    let params = SamplingParams::new().with_verbosity(Verbosity::Low);
    let request = LlmRequest::new("gpt", vec![Message::user("hi")], vec![], params).unwrap();
    let live = models
        .chat("gpt")
        .await
        .unwrap()
        .single_response(&request)
        .await
        .unwrap_err();
    let batch = models.batch("gpt").await.unwrap();
    let refused = batch.encode(&item("q", request.clone())).unwrap_err();
    assert!(
        matches!(refused, Error::UnsupportedSetting { .. }),
        "{refused:?}"
    );
    assert_eq!(format!("{refused}"), format!("{live}"));
    assert!(matches!(
        batch.encode(&item("", ask("hi", vec![]))).unwrap_err(),
        Error::InvalidRequest { .. }
    ));
}

#[tokio::test]
async fn submit_uploads_one_jsonl_file_and_creates_a_labelled_batch() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/files"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .and(header("OpenAI-Organization", "org-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "file-in", "object": "file", "bytes": 10, "purpose": "batch"
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/batches"))
        .and(body_json(json!({
            "input_file_id": "file-in", "endpoint": "/v1/chat/completions",
            "completion_window": "24h", "metadata": {"tollgate_label": "run-1"}
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("validating")))
        .expect(1)
        .mount(&server)
        .await;
    let batch = batch_of(entry(&server.uri())).await;
    let lines = vec![
        batch.encode(&item("a", ask("one", vec![]))).unwrap(),
        batch.encode(&item("b", ask("two", vec![]))).unwrap(),
    ];
    let handle = batch.submit(&lines, "run-1").await.unwrap();
    assert_eq!(handle, self::handle());

    let upload: &Request = &server.received_requests().await.unwrap()[0];
    let content_type = upload.headers["content-type"].to_str().unwrap();
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .expect("a multipart upload");
    let body = String::from_utf8(upload.body.clone()).unwrap();
    assert!(body.contains("name=\"purpose\"\r\n\r\nbatch\r\n"), "{body}");
    assert!(body.contains("filename=\"tollgate-run-1.jsonl\""), "{body}");
    let file = format!(
        "{}{}",
        String::from_utf8_lossy(&lines[0]),
        String::from_utf8_lossy(&lines[1])
    );
    assert!(
        body.contains(&format!("\r\n\r\n{file}\r\n--{boundary}--")),
        "{body}"
    );
    assert!(matches!(
        batch.submit(&[], "run-1").await.unwrap_err(),
        Error::InvalidRequest { .. }
    ));
}

#[tokio::test]
async fn batch_endpoint_errors_are_classified_as_live_errors_are_without_the_key() {
    let server = MockServer::start().await;
    let limited = ResponseTemplate::new(429)
        .insert_header("retry-after", "7")
        .set_body_json(
            json!({"error": {"type": "requests", "code": "rate_limit_exceeded",
            "message": "slow down"}}),
        );
    upload_then_create(&server, limited).await;
    serve(
        &server,
        "GET",
        "/v1/batches/batch_1",
        ResponseTemplate::new(401).set_body_json(json!({"error": {
            "type": "invalid_request_error", "code": "invalid_api_key",
            "message": format!("Incorrect API key provided: {API_KEY}")}})),
        None,
    )
    .await;
    let limited = submit_one(&server).await.unwrap_err();
    assert!(
        matches!(limited, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) })
            if d.as_secs() == 7),
        "{limited:?}"
    );
    let batch = batch_of(entry(&server.uri())).await;
    let refused = batch.status(&handle()).await.unwrap_err();
    assert!(
        matches!(&refused, Error::ProviderRequest(e) if e.status == 401),
        "{refused:?}"
    );
    assert!(!format!("{refused} {refused:?}").contains(API_KEY));
}

#[tokio::test]
async fn status_reads_phase_counts_and_a_whole_batch_failure() {
    let server = MockServer::start().await;
    let mut failed = batch_object("failed");
    failed["errors"] = json!({"data": [{"code": "token_limit_exceeded", "message": "Enqueued token limit reached"}]});
    batch_reads(&server, batch_object("in_progress"), failed).await;
    let batch = batch_of(entry(&server.uri())).await;
    let running = batch.status(&handle()).await.unwrap();
    assert_eq!(running.phase, BatchPhase::Running);
    assert_eq!((running.counts.total, running.counts.succeeded), (3, 2));
    let over = batch.status(&handle()).await.unwrap();
    assert_eq!(over.phase, BatchPhase::Ended);
    assert!(matches!(
        over.failure,
        Some(Error::Provider(ProviderError::RateLimited { .. }))
    ));
}

#[tokio::test]
async fn results_read_the_output_and_error_files_as_live_answers_and_errors_without_the_key() {
    let server = MockServer::start().await;
    serve(
        &server,
        "GET",
        "/v1/batches/batch_1",
        ok(batch_object("expired")),
        None,
    )
    .await;
    let answer = json!({"id": "r1", "custom_id": "a", "response": {"status_code": 200,
        "request_id": "q1", "body": {"id": "c", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."},
        "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 22, "completion_tokens": 2, "total_tokens": 24}}}, "error": null});
    let refused = json!({"id": "r2", "custom_id": "b", "response": {"status_code": 400,
        "request_id": "q2", "body": {"error": {"type": "invalid_request_error",
        "message": format!("bad key {API_KEY}"), "code": null}}}, "error": null});
    let expired = json!({"id": "r3", "custom_id": "c", "response": null,
        "error": {"code": "batch_expired", "message": "not run in time"}});
    serve(
        &server,
        "GET",
        "/v1/files/file-out/content",
        ResponseTemplate::new(200).set_body_string(format!("{answer}\n")),
        None,
    )
    .await;
    serve(
        &server,
        "GET",
        "/v1/files/file-err/content",
        ResponseTemplate::new(200).set_body_string(format!("{refused}\n{expired}\n\n")),
        None,
    )
    .await;
    let batch = batch_of(entry(&server.uri())).await;
    let mut outcomes = batch.results(&handle()).await.unwrap();
    outcomes.sort_by(|x, y| x.custom_id.cmp(&y.custom_id));
    let ids: Vec<&str> = outcomes.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    let hello = outcomes[0].result.as_ref().unwrap();
    assert_eq!(
        (hello.text().as_str(), hello.stop_reason()),
        ("Hello.", StopReason::EndTurn)
    );
    assert_eq!(hello.usage().output_tokens, 2);
    assert!(matches!(&outcomes[1].result, Err(Error::ProviderRequest(e)) if e.status == 400));
    // A results file that echoes the key hands it to no one.
    let refused = outcomes[1].result.as_ref().unwrap_err();
    assert!(
        !format!("{refused} {refused:?}").contains(API_KEY),
        "{refused}"
    );
    assert!(matches!(&outcomes[2].result,
        Err(Error::BatchLineUnfinished { batch_id, how }) if batch_id == "batch_1" && how == "expired"));
}

#[tokio::test]
async fn results_of_a_running_batch_are_refused_and_a_file_past_the_byte_limit_is_too_large() {
    let server = MockServer::start().await;
    batch_reads(
        &server,
        batch_object("in_progress"),
        batch_object("completed"),
    )
    .await;
    serve(
        &server,
        "GET",
        "/v1/files/file-out/content",
        ResponseTemplate::new(200).set_body_string("x".repeat(5000)),
        None,
    )
    .await;
    let batch = batch_of(entry(&server.uri()).with_max_response_bytes(4096)).await;
    assert!(matches!(
        batch.results(&handle()).await.unwrap_err(),
        Error::InvalidRequest { .. }
    ));
    assert!(matches!(
        batch.results(&handle()).await.unwrap_err(),
        Error::ResponseTooLarge {
            limit_bytes: 4096,
            ..
        }
    ));
}

#[tokio::test]
async fn find_follows_the_list_cursor_to_the_labelled_batch() {
    let server = MockServer::start().await;
    let other = |id: &str| json!({"id": id, "status": "completed", "metadata": {"tollgate_label": "other"}});
    Mock::given(method("GET"))
        .and(path("/v1/batches"))
        .and(query_param("after", "batch_9"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": [batch_object("in_progress")],
            "first_id": "batch_1", "last_id": "batch_1", "has_more": false
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/batches"))
        .and(query_param("limit", "100"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": [other("batch_8"), other("batch_9")],
            "first_id": "batch_8", "last_id": "batch_9", "has_more": true
        })))
        .mount(&server)
        .await;
    let batch = batch_of(entry(&server.uri())).await;
    assert_eq!(batch.find("run-1").await.unwrap(), Some(handle()));
    assert_eq!(batch.find("never-submitted").await.unwrap(), None);
}

/// Groq's list pages by `paging.next_cursor`, asked for again as `?cursor=` (its batch
/// guide): `find` follows it, the cursor encoded as one query value.
#[tokio::test]
async fn find_follows_groqs_next_cursor_to_the_labelled_batch() {
    let server = MockServer::start().await;
    let other = json!({"id": "batch_8", "status": "completed", "metadata": null});
    Mock::given(method("GET"))
        .and(path("/v1/batches"))
        .and(query_param("cursor", "cursor_eyJpZCI6ODl9=="))
        .respond_with(ok(
            json!({"object": "list", "data": [batch_object("completed")],
            "paging": {}}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/batches"))
        .and(query_param("limit", "100"))
        .respond_with(ok(json!({"object": "list", "data": [other],
            "paging": {"next_cursor": "cursor_eyJpZCI6ODl9=="}})))
        .mount(&server)
        .await;
    let batch = batch_of(entry(&server.uri())).await;
    assert_eq!(batch.find("run-1").await.unwrap(), Some(handle()));
    let asked: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.query().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(asked, ["limit=100", "cursor=cursor_eyJpZCI6ODl9%3D%3D"]);
}

#[tokio::test]
async fn cancel_posts_to_the_batches_cancel_path_and_refuses_a_foreign_id() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/batches/batch_1/cancel"))
        .respond_with(ok(batch_object("cancelling")))
        .expect(1)
        .mount(&server)
        .await;
    let batch = batch_of(entry(&server.uri())).await;
    batch.cancel(&handle()).await.unwrap();
    let foreign = BatchHandle {
        id: "../files/file-x".into(),
        input_file: None,
    };
    assert!(matches!(
        batch.cancel(&foreign).await.unwrap_err(),
        Error::InvalidRequest { .. }
    ));
}

/// The warnings logged on this thread while a guard lives: a subscriber of its own
/// (the crate's `tracing`, no subscriber crate needed).
mod logged {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    /// The warnings' fields, one text each.
    #[derive(Clone, Default)]
    pub(super) struct Warnings(pub(super) Arc<Mutex<Vec<String>>>);

    struct Text(String);

    impl Visit for Text {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!("{}={value:?} ", field.name()));
        }
    }

    impl Subscriber for Warnings {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            *metadata.level() == Level::WARN
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Collects warnings until the guard is dropped.
    pub(super) fn capture() -> (Warnings, tracing::subscriber::DefaultGuard) {
        let warnings = Warnings::default();
        let guard = tracing::subscriber::set_default(warnings.clone());
        (warnings, guard)
    }
}

#[tokio::test]
async fn an_uploaded_file_whose_batch_is_not_created_is_deleted() {
    let server = MockServer::start().await;
    let limited = ResponseTemplate::new(429)
        .insert_header("retry-after", "3")
        .set_body_json(json!({"error": {"type": "requests",
            "code": "rate_limit_exceeded", "message": "too many batches"}}));
    upload_then_create(&server, limited).await;
    Mock::given(method("DELETE"))
        .and(path("/v1/files/file-in"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .and(header("OpenAI-Organization", "org-test"))
        .respond_with(ok(
            json!({"id": "file-in", "object": "file", "deleted": true}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    let refused = submit_one(&server).await.unwrap_err();
    assert!(
        matches!(refused, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) })
            if d.as_secs() == 3),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_delete_that_fails_after_a_failed_create_is_logged_and_the_creates_error_returned() {
    let server = MockServer::start().await;
    let invalid = ResponseTemplate::new(400).set_body_json(json!({"error": {
        "type": "invalid_request_error", "code": "invalid_value",
        "message": "completion_window is invalid"}}));
    upload_then_create(&server, invalid).await;
    Mock::given(method("DELETE"))
        .and(path("/v1/files/file-in"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"error": {
            "type": "server_error", "message": format!("cannot delete, key {API_KEY}")}})))
        .expect(1)
        .mount(&server)
        .await;
    let (warnings, guard) = logged::capture();
    let refused = submit_one(&server).await.unwrap_err();
    drop(guard);
    assert!(
        matches!(&refused, Error::ProviderRequest(e) if e.status == 400),
        "{refused:?}"
    );
    let warnings = warnings.0.lock().unwrap().clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("file-in"), "{warnings:?}");
    assert!(warnings[0].contains("500"), "{warnings:?}");
    assert!(!warnings[0].contains(API_KEY), "{warnings:?}");
}

#[tokio::test]
async fn a_created_batch_keeps_its_input_file() {
    let server = MockServer::start().await;
    upload_then_create(&server, ok(batch_object("validating"))).await;
    Mock::given(method("DELETE"))
        .respond_with(ok(json!({"deleted": true})))
        .expect(0)
        .mount(&server)
        .await;
    assert_eq!(submit_one(&server).await.unwrap(), handle());
}
