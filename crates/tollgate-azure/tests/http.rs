//! Azure OpenAI's own behaviour against a local server (wiremock on 127.0.0.1), through
//! the pipeline: deployment URLs with `api-version`, the v1 and Responses paths, the
//! `api-key` header, Entra ID tokens, content-filter refusals whole and streamed, the
//! 400 `content_filter` error, the token rate-limit headers and the options' errors.
//! What every provider shares runs in `tests/contract.rs`, the contract kit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{CatalogError, Dimension, EmbeddingCapabilities, Limits, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{
    Catalog, Conversation, DecisionRequest, EmbeddingPurpose, Error, LlmRequest, ModelEntry,
    Models, Question, Result, SamplingParams, Secret, StopReason, StreamEvent,
};
use tollgate_azure::{AzureProvider, TokenSource};
use wiremock::matchers::{body_string_contains, header, method, path, query_param};
use wiremock::{Mock, MockBuilder, MockServer, Request, ResponseTemplate};

const KEY_ID: &str = "azure-key";
const API_KEY: &str = "azure-TEST-0123456789-SECRET";
const PRINCIPAL_ID: &str = "azure-principal";

fn limits() -> Limits {
    Limits {
        rpm: 1000,
        tpm: 1_000_000,
        ..Limits::default()
    }
}

/// Chat model `id` deployed as `dep-1` at `endpoint`, with `options` besides.
fn entry(id: &str, endpoint: &str, options: &[(&str, &str)]) -> ModelEntry {
    let mut entry = ModelEntry::new(id, tollgate_azure::KEY, "gpt-4o")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(limits())
        .with_option("endpoint", endpoint);
    for (name, value) in options {
        entry = entry.with_option(*name, value.to_string());
    }
    entry
}

fn models_with(provider: AzureProvider, entries: Vec<ModelEntry>) -> Result<Models> {
    let mut catalog = Catalog::builder().embedding_width(4);
    for entry in entries {
        catalog = catalog.model(entry);
    }
    let principal = json!({"tenant_id": "tenant-1", "client_id": "client-1",
                           "client_secret": "principal-SECRET"});
    Models::builder()
        .catalog(catalog.build()?)
        .credentials(
            MemoryCredentialStore::new()
                .with(KEY_ID, API_KEY)
                .with(PRINCIPAL_ID, principal.to_string()),
        )
        .provider(provider)
        .build()
}

fn models(entries: Vec<ModelEntry>) -> Models {
    models_with(AzureProvider::new(), entries).unwrap()
}

fn ask(id: &str) -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request(id, SamplingParams::new())
        .unwrap()
}

async fn single(models: &Models, id: &str) -> Result<tollgate::LlmResponse> {
    models.chat(id).await?.single_response(&ask(id)).await
}

/// A streamed answer's events, and the error that ended it, if any.
async fn stream_all(models: &Models, id: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let chat = models.chat(id).await.unwrap();
    let items: Vec<Result<StreamEvent>> = match chat.stream_response(&ask(id)).await {
        Ok(stream) => stream.collect().await,
        Err(e) => vec![Err(e)],
    };
    let (events, errors): (Vec<_>, Vec<_>) = items.into_iter().partition(Result::is_ok);
    let error = errors.into_iter().find_map(Result::err);
    (events.into_iter().flatten().collect(), error)
}

/// A whole answer of `text`, unfiltered.
fn answered(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(completion("stop", json!(text), filter_results(&[])))
}

fn completion(finish: &str, content: Value, filter: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "gpt-4o-2024-08-06",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {
            "hate": {"filtered": false, "severity": "safe"}}}],
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": null,
                     "message": {"role": "assistant", "content": content},
                     "content_filter_results": filter}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})
}

/// Azure's per-choice filter results with `filtered` set where named.
fn filter_results(filtered: &[&str]) -> Value {
    let mut results = json!({
        "hate": {"filtered": false, "severity": "safe"},
        "self_harm": {"filtered": false, "severity": "safe"},
        "sexual": {"filtered": false, "severity": "safe"},
        "violence": {"filtered": false, "severity": "safe"},
        "protected_material_text": {"filtered": false, "detected": false},
        "protected_material_code": {"filtered": false, "detected": false}});
    for name in filtered {
        results[*name]["filtered"] = json!(true);
    }
    results
}

fn sse(chunks: &[Value]) -> ResponseTemplate {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn chunk(delta: Value, finish: Value, filter: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                     "content_filter_results": filter}]})
}

/// Azure's first chunk: the prompt's filter results, no choices, no model.
fn prompt_chunk() -> Value {
    json!({"id": "", "object": "", "created": 0, "model": "", "choices": [],
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]})
}

fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o-2024-08-06", "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}})
}

/// A POST to `to` with `api-version=version` and the `api-key` header.
fn keyed(to: &str, version: &str) -> MockBuilder {
    Mock::given(method("POST"))
        .and(path(to))
        .and(query_param("api-version", version))
        .and(header("api-key", API_KEY))
}

async fn sent(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

#[tokio::test]
async fn chat_goes_to_the_deployment_url_with_the_api_version_and_the_api_key_header() {
    let server = MockServer::start().await;
    keyed("/openai/deployments/dep-1/chat/completions", "2024-10-21")
        .respond_with(answered("Hi."))
        .expect(1)
        .mount(&server)
        .await;
    let models = models(vec![entry(
        "gpt",
        &server.uri(),
        &[("deployment", "dep-1")],
    )]);
    let answer = single(&models, "gpt").await.unwrap();
    assert_eq!(answer.text(), "Hi.");
    assert_eq!(answer.usage().input_tokens, 9);
    let request = &sent(&server).await[0];
    assert!(request.headers.get("authorization").is_none());
    let body: Value = request.body_json().unwrap();
    assert_eq!(body["max_completion_tokens"], 500);
}

#[tokio::test]
async fn the_deployment_defaults_to_the_model_name_and_api_version_is_the_models() {
    let server = MockServer::start().await;
    keyed(
        "/openai/deployments/gpt-4o/chat/completions",
        "2025-04-01-preview",
    )
    .respond_with(answered("Hi."))
    .expect(1)
    .mount(&server)
    .await;
    let options = [("api_version", "2025-04-01-preview")];
    let models = models(vec![entry("gpt", &server.uri(), &options)]);
    assert_eq!(single(&models, "gpt").await.unwrap().text(), "Hi.");
}

#[tokio::test]
async fn a_streamed_chat_with_azures_prompt_filter_chunk_completes() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/dep-1/chat/completions"))
        .and(body_string_contains("\"include_usage\":true"))
        .respond_with(sse(&[
            prompt_chunk(),
            chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
                json!({}),
            ),
            chunk(
                json!({"content": "Hello"}),
                Value::Null,
                filter_results(&[]),
            ),
            chunk(
                json!({"content": " there"}),
                Value::Null,
                filter_results(&[]),
            ),
            chunk(json!({}), json!("stop"), json!({})),
            usage_chunk(),
        ]))
        .expect(1)
        .mount(&server)
        .await;
    let models = models(vec![entry(
        "gpt",
        &server.uri(),
        &[("deployment", "dep-1")],
    )]);
    let (events, error) = stream_all(&models, "gpt").await;
    assert!(error.is_none(), "{error:?}");
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("no completed answer: {events:?}");
    };
    assert_eq!(answer.text(), "Hello there");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
}

#[tokio::test]
async fn a_content_filter_answer_is_a_refusal_naming_the_filtered_categories() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            "content_filter",
            Value::Null,
            filter_results(&["sexual", "violence"]),
        )))
        .expect(1)
        .mount(&server)
        .await;
    let models = models(vec![entry("gpt", &server.uri(), &[])]);
    let error = single(&models, "gpt").await.unwrap_err();
    assert!(
        matches!(&error, Error::ProviderRefusal { category, usage, .. }
            if category == "content_filter:sexual,violence" && usage.output_tokens == 3),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_streamed_content_filter_stop_is_a_refusal_naming_the_filtered_categories() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(&[
            prompt_chunk(),
            chunk(json!({"content": "Once"}), Value::Null, filter_results(&[])),
            chunk(
                json!({}),
                json!("content_filter"),
                filter_results(&["protected_material_text"]),
            ),
            usage_chunk(),
        ]))
        .mount(&server)
        .await;
    let models = models(vec![entry("gpt", &server.uri(), &[])]);
    let (_, error) = stream_all(&models, "gpt").await;
    assert!(
        matches!(&error, Some(Error::ProviderRefusal { category, .. })
            if category == "content_filter:protected_material_text"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_prompt_refused_by_the_content_filter_is_a_refusal_naming_the_categories() {
    let server = MockServer::start().await;
    let body = json!({"error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
        "type": null, "param": "prompt", "code": "content_filter", "status": 400,
        "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": {
            "hate": {"filtered": true, "severity": "high"},
            "jailbreak": {"filtered": true, "detected": true},
            "self_harm": {"filtered": false, "severity": "safe"}}}}});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(body))
        .mount(&server)
        .await;
    let models = models(vec![entry("gpt", &server.uri(), &[])]);
    let error = single(&models, "gpt").await.unwrap_err();
    let Error::ProviderRefusal {
        category,
        explanation,
        ..
    } = &error
    else {
        panic!("a refusal, not {error:?}");
    };
    assert_eq!(category, "content_filter:hate,jailbreak");
    assert!(explanation.contains("(hate, jailbreak)"), "{explanation}");
    assert_eq!(
        sent(&server).await.len(),
        1,
        "a refused prompt is not retried"
    );
}

#[tokio::test]
async fn the_token_rate_limit_headers_set_the_token_bucket_and_the_request_ones_are_not_read() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("stop", json!("ok"), filter_results(&[])))
                .insert_header("x-ratelimit-limit-tokens", "50000")
                .insert_header("x-ratelimit-remaining-tokens", "1234")
                .insert_header("x-ratelimit-limit-requests", "5")
                .insert_header("x-ratelimit-remaining-requests", "1"),
        )
        .mount(&server)
        .await;
    let models = models(vec![entry("gpt", &server.uri(), &[])]);
    single(&models, "gpt").await.unwrap();
    let snapshot = models.limiter("gpt").unwrap().snapshot().await.unwrap();
    let level = |dimension| {
        snapshot
            .levels
            .iter()
            .find(|(d, _, _)| *d == dimension)
            .map(|(_, level, capacity)| (*level, *capacity))
            .unwrap()
    };
    let (tokens, token_capacity) = level(Dimension::Tokens);
    assert_eq!(token_capacity, 50_000);
    assert!(tokens < 2_000.0, "1234 left (plus refill), not {tokens}");
    let (requests, request_capacity) = level(Dimension::Requests);
    assert_eq!(
        request_capacity, 1000,
        "the catalog's rpm, not the 10-second window's"
    );
    assert!(requests > 900.0, "{requests}");
}

#[tokio::test]
async fn embeddings_go_to_the_deployment_embeddings_url_with_the_width() {
    let server = MockServer::start().await;
    keyed("/openai/deployments/embed-dep/embeddings", "2024-10-21")
        .and(body_string_contains("\"dimensions\":4"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "model": "text-embedding-3-small",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.5, 0.5, 0.5]}],
            "usage": {"prompt_tokens": 2, "total_tokens": 2}})))
        .expect(1)
        .mount(&server)
        .await;
    let embed = ModelEntry::new("embed", tollgate_azure::KEY, "text-embedding-3-small")
        .with_kind(ModelKind::Embeddings)
        .with_credential(KEY_ID)
        .with_limits(limits())
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(1536),
            dimensions_param: true,
            truncation_safe: true,
        })
        .with_option("endpoint", server.uri())
        .with_option("deployment", "embed-dep");
    let models = models(vec![embed]);
    let vector = models
        .embeddings("embed")
        .await
        .unwrap()
        .embed("x", EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vector.width(), 4);
}

#[tokio::test]
async fn a_decision_goes_to_the_deployments_chat_url_with_logprobs() {
    let server = MockServer::start().await;
    let top = [("yes", 0.75f64.ln()), ("no", 0.25f64.ln())].map(
        |(token, logprob)| json!({"token": token, "logprob": logprob, "bytes": token.as_bytes()}),
    );
    keyed(
        "/openai/deployments/judge-dep/chat/completions",
        "2024-10-21",
    )
    .and(body_string_contains("\"top_logprobs\":20"))
    .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "length",
                "message": {"role": "assistant", "content": "yes"},
                "logprobs": {"content": [{"token": "yes", "logprob": top[0]["logprob"],
                                          "bytes": [], "top_logprobs": top}]},
                "content_filter_results": filter_results(&[])}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}})))
    .expect(1)
    .mount(&server)
    .await;
    let judge = ModelEntry::new("judge", tollgate_azure::KEY, "gpt-4o-mini")
        .with_kind(ModelKind::Decision)
        .with_credential(KEY_ID)
        .with_limits(limits())
        .with_option("endpoint", server.uri())
        .with_option("deployment", "judge-dep");
    let models = models(vec![judge]);
    let question = Question::Noul {
        name: "safe".into(),
        prompt: "Is it safe?".into(),
    };
    let request = DecisionRequest::new("judge", "state", vec![question]).unwrap();
    let decision = models
        .decision("judge")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    assert!((decision.probability("safe", "yes").unwrap() - 0.75).abs() < 1e-9);
}

fn responses_answer() -> Value {
    json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]}],
        "usage": {"input_tokens": 9, "output_tokens": 3, "total_tokens": 12}})
}

#[tokio::test]
async fn the_responses_api_goes_to_openai_responses_with_the_deployment_as_model() {
    let server = MockServer::start().await;
    keyed("/openai/responses", "2025-04-01-preview")
        .respond_with(ResponseTemplate::new(200).set_body_json(responses_answer()))
        .expect(1)
        .mount(&server)
        .await;
    let options = [
        ("deployment", "dep-1"),
        ("api", "responses"),
        ("api_version", "2025-04-01-preview"),
    ];
    let models = models(vec![entry("gpt", &server.uri(), &options)]);
    assert_eq!(single(&models, "gpt").await.unwrap().text(), "Hi.");
    let body: Value = sent(&server).await[0].body_json().unwrap();
    assert_eq!(body["model"], "dep-1");
}

#[tokio::test]
async fn api_version_v1_uses_the_v1_paths_with_the_deployment_as_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/v1/chat/completions"))
        .respond_with(answered("Hi."))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/openai/v1/responses"))
        .respond_with(ResponseTemplate::new(200).set_body_json(responses_answer()))
        .expect(1)
        .mount(&server)
        .await;
    let uri = server.uri();
    let models = models(vec![
        entry(
            "chat",
            &uri,
            &[("deployment", "dep-1"), ("api_version", "v1")],
        ),
        entry(
            "resp",
            &uri,
            &[
                ("deployment", "dep-2"),
                ("api_version", "v1"),
                ("api", "responses"),
            ],
        ),
    ]);
    single(&models, "chat").await.unwrap();
    single(&models, "resp").await.unwrap();
    let requests = sent(&server).await;
    assert!(
        requests.iter().all(|r| r.url.query().is_none()),
        "no api-version on v1"
    );
    let models_sent: Vec<Value> = requests
        .iter()
        .map(|r| r.body_json::<Value>().unwrap()["model"].clone())
        .collect();
    assert_eq!(models_sent, [json!("dep-1"), json!("dep-2")]);
}

/// An answer from the token endpoint, counting its calls.
async fn token_endpoint(server: &MockServer, calls: Arc<AtomicUsize>) {
    Mock::given(method("POST"))
        .and(path("/tenant-1/oauth2/v2.0/token"))
        .and(body_string_contains("grant_type=client_credentials"))
        .and(body_string_contains("client_id=client-1"))
        .and(body_string_contains("client_secret=principal-SECRET"))
        .and(body_string_contains(
            "scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default",
        ))
        .respond_with(move |_: &Request| {
            calls.fetch_add(1, Ordering::SeqCst);
            ResponseTemplate::new(200).set_body_json(json!({
                "token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
                "access_token": "entra-TOKEN-1"}))
        })
        .mount(server)
        .await;
}

#[tokio::test]
async fn an_entra_model_sends_the_service_principals_token_as_a_bearer_and_reuses_it() {
    let server = MockServer::start().await;
    let calls = Arc::new(AtomicUsize::new(0));
    token_endpoint(&server, calls.clone()).await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/gpt-4o/chat/completions"))
        .and(header("authorization", "Bearer entra-TOKEN-1"))
        .respond_with(answered("Hi."))
        .expect(2)
        .mount(&server)
        .await;
    let uri = server.uri();
    let entry = entry("gpt", &uri, &[("auth", "entra"), ("authority_host", &uri)])
        .with_credential(PRINCIPAL_ID);
    let models = models(vec![entry]);
    single(&models, "gpt").await.unwrap();
    single(&models, "gpt").await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the token is cached");
    let chat = sent(&server).await;
    assert!(chat.iter().all(|r| r.headers.get("api-key").is_none()));
}

/// A token with less than five minutes of life left is not kept: the next call fetches
/// a new one (a token of 3599 s is kept, above).
#[tokio::test]
async fn an_entra_token_within_five_minutes_of_its_expiry_is_fetched_again() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/tenant-1/oauth2/v2.0/token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "token_type": "Bearer", "expires_in": 299, "access_token": "entra-SHORT"})))
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/gpt-4o/chat/completions"))
        .respond_with(answered("Hi."))
        .expect(2)
        .mount(&server)
        .await;
    let uri = server.uri();
    let entry = entry("gpt", &uri, &[("auth", "entra"), ("authority_host", &uri)])
        .with_credential(PRINCIPAL_ID);
    let models = models(vec![entry]);
    single(&models, "gpt").await.unwrap();
    single(&models, "gpt").await.unwrap();
}

#[tokio::test]
async fn a_principal_entra_refuses_is_a_credential_error_naming_its_code_not_the_secret() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/tenant-1/oauth2/v2.0/token"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": "invalid_client",
            "error_description": "AADSTS7000215: Invalid client secret provided: principal-SECRET",
            "error_codes": [7000215]})))
        .expect(1)
        .mount(&server)
        .await;
    let uri = server.uri();
    let entry = entry("gpt", &uri, &[("auth", "entra"), ("authority_host", &uri)])
        .with_credential(PRINCIPAL_ID);
    let error = single(&models(vec![entry]), "gpt").await.unwrap_err();
    assert!(
        matches!(&error, Error::InvalidRequest { field, reason }
            if field == "credential" && reason.contains("`invalid_client`")),
        "{error:?}"
    );
    assert!(!format!("{error:?} {error}").contains("principal-SECRET"));
    assert_eq!(
        sent(&server).await.len(),
        1,
        "only the token endpoint was asked"
    );
}

#[tokio::test]
async fn a_record_that_is_not_a_service_principal_is_a_credential_error_without_the_record() {
    let server = MockServer::start().await;
    let uri = server.uri();
    // The API key's record, where a service principal's is expected.
    let entry = entry("gpt", &uri, &[("auth", "entra"), ("authority_host", &uri)]);
    let models = models(vec![entry]);
    let error = single(&models, "gpt").await.unwrap_err();
    assert!(
        matches!(&error, Error::InvalidRequest { field, reason }
            if field == "credential" && reason.contains("tenant_id")),
        "{error:?}"
    );
    assert!(!format!("{error:?}").contains(API_KEY));
    assert!(sent(&server).await.is_empty());
}

/// A token broker of the application's.
#[derive(Debug)]
struct Broker;

#[tollgate::provider::async_trait]
impl TokenSource for Broker {
    async fn access_token(&self, credential: Option<&str>, _: &str) -> Result<Secret> {
        assert_eq!(credential, None);
        Ok(Secret::new("broker-TOKEN"))
    }
}

#[tokio::test]
async fn a_token_source_given_to_the_provider_signs_entra_models_without_a_credential() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer broker-TOKEN"))
        .respond_with(answered("Hi."))
        .expect(1)
        .mount(&server)
        .await;
    let mut entry = entry("gpt", &server.uri(), &[("auth", "entra")]);
    entry.credential = None;
    let models = models_with(AzureProvider::with_tokens(Arc::new(Broker)), vec![entry]).unwrap();
    assert_eq!(single(&models, "gpt").await.unwrap().text(), "Hi.");
}

#[tokio::test]
async fn an_api_key_model_without_a_credential_is_refused_before_sending() {
    let server = MockServer::start().await;
    let mut entry = entry("gpt", &server.uri(), &[]);
    entry.credential = None;
    let models = models(vec![entry]);
    let error = single(&models, "gpt").await.unwrap_err();
    assert!(
        matches!(
            &error,
            Error::Catalog(CatalogError::MissingCredential { .. })
        ),
        "{error:?}"
    );
    assert!(sent(&server).await.is_empty());
}

#[tokio::test]
async fn options_name_what_to_fix() {
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[("base_url", "https://x.openai.azure.com")],
            "options.base_url",
        ),
        (&[("organization", "org-1")], "options.organization"),
        (&[("api_version", "latest")], "options.api_version"),
        (&[("auth", "password")], "options.auth"),
        (&[("deployment", "a/b")], "options.deployment"),
    ];
    for (options, field) in cases {
        let models = models(vec![entry(
            "gpt",
            "https://myres.openai.azure.com",
            options,
        )]);
        let error = models.chat("gpt").await.unwrap_err();
        assert!(
            matches!(&error, Error::Catalog(CatalogError::InvalidField { field: f, .. }) if f == field),
            "{field}: {error:?}"
        );
    }
    let mut entry = entry("gpt", "https://myres.openai.azure.com", &[]);
    entry.options.remove("endpoint");
    let error = models(vec![entry]).chat("gpt").await.unwrap_err();
    assert!(error.to_string().contains("options.endpoint"), "{error}");
}

#[tokio::test]
async fn the_guides_catalog_examples_load_and_make_their_transports() {
    let page = include_str!("../../../docs/providers/azure-openai.md");
    let blocks: Vec<&str> = page
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect();
    assert_eq!(blocks.len(), 2);
    for block in blocks {
        let catalog = Catalog::from_toml_str(block).unwrap();
        let models = Models::builder()
            .catalog(catalog.clone())
            .credentials(MemoryCredentialStore::new())
            .provider(AzureProvider::new())
            .build()
            .unwrap();
        for entry in catalog.models() {
            let id = entry.id.as_str();
            let made = match entry.kind {
                ModelKind::Embeddings => models.embeddings(id).await.map(drop),
                _ => models.chat(id).await.map(drop),
            };
            made.unwrap_or_else(|e| panic!("{id}: {e}"));
        }
    }
}
