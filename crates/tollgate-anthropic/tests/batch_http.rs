//! The Message Batches transport against a local HTTP server (wiremock on 127.0.0.1),
//! reached as the command reaches it (`Models::batch`): what each call sends (key,
//! version, betas, the live body), how the endpoints' error answers are judged, where
//! results are read from. The wire format alone is unit-tested in `src/batch/tests.rs`;
//! llmock's batches in `tests/batch_llmock.rs`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate::catalog::ModelEntry;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::batch::{BatchHandle, BatchItem, BatchPhase, BatchTransport};
use tollgate::{
    Catalog, Conversation, Error, LlmRequest, Message, Models, ProviderError, SamplingParams,
};
use tollgate_anthropic::AnthropicProvider;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY_ID: &str = "anthropic-main";
const API_KEY: &str = "sk-ant-TEST-0123456789-SECRET";
const BATCH: &str = "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF";

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("claude", "anthropic-direct", "claude-test")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_option("base_url", base_url)
        .with_option("beta", vec!["beta-one", "beta-two"])
}

fn models_of(entry: ModelEntry) -> Models {
    Models::builder()
        .catalog(Catalog::builder().model(entry).build().unwrap())
        .credentials_arc(Arc::new(MemoryCredentialStore::new().with(KEY_ID, API_KEY)))
        .provider(AnthropicProvider)
        .build()
        .unwrap()
}

async fn setup() -> (MockServer, Arc<dyn BatchTransport>) {
    let server = MockServer::start().await;
    let batch = models_of(entry(&server.uri()))
        .batch("claude")
        .await
        .unwrap();
    (server, batch)
}

fn item(id: &str, request: LlmRequest) -> BatchItem {
    BatchItem {
        custom_id: id.into(),
        request,
    }
}

fn ask(text: &str) -> LlmRequest {
    Conversation::new()
        .user(text)
        .request("claude", SamplingParams::new())
        .unwrap()
}

fn handle() -> BatchHandle {
    BatchHandle {
        id: BATCH.into(),
        input_file: None,
    }
}

fn batch_object(status: &str, results_url: Option<String>) -> Value {
    json!({"id": BATCH, "type": "message_batch", "processing_status": status,
        "request_counts": {"processing": 0, "succeeded": 1, "errored": 1, "canceled": 1,
            "expired": 1},
        "created_at": "2024-09-24T18:37:24.100435Z", "ended_at": null,
        "expires_at": "2024-09-25T18:37:24.100435Z", "cancel_initiated_at": null,
        "results_url": results_url})
}

fn headers_of(request: &wiremock::Request, name: &str) -> Option<String> {
    request
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[tokio::test]
async fn encode_writes_the_live_body_under_the_custom_id_without_stream() {
    let (_server, batch) = setup().await;
    let line: Value = serde_json::from_slice(&batch.encode(&item("q-1", ask("Hi?"))).unwrap())
        .expect("a JSON line");
    assert_eq!(line["custom_id"], "q-1");
    let params = &line["params"];
    assert_eq!(params["model"], "claude-test");
    assert_eq!(
        params["max_tokens"], 500,
        "the catalog's default output limit"
    );
    assert_eq!(params["messages"][0]["role"], "user");
    assert!(params.get("stream").is_none(), "{params}");
}

#[tokio::test]
async fn encode_refuses_a_custom_id_outside_anthropics_rule() {
    let (_server, batch) = setup().await;
    let refused = batch.encode(&item("not ok!", ask("Hi?")));
    assert!(
        matches!(&refused, Err(Error::InvalidRequest { field, .. }) if field == "custom_id"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn encode_refuses_what_the_live_encoder_refuses() {
    let (_server, batch) = setup().await;
    let seeded = LlmRequest::new(
        "claude",
        vec![Message::user("hi")],
        vec![],
        SamplingParams::new().with_seed(1),
    )
    .unwrap();
    let refused = batch.encode(&item("seeded", seeded));
    assert!(
        matches!(&refused, Err(Error::UnsupportedSetting { provider, .. }) if provider == "anthropic"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn caps_are_anthropics_lowered_by_the_catalog_batch_terms() {
    let (server, batch) = setup().await;
    assert_eq!(batch.caps().max_requests, 100_000);
    assert!(batch.caps().max_bytes < 256_000_000);
    assert!(batch.caps().max_bytes > 255_000_000);
    let mut lowered = entry(&server.uri());
    lowered.batch.max_requests = Some(10);
    lowered.batch.max_bytes = Some(4096);
    let batch = models_of(lowered).batch("claude").await.unwrap();
    assert_eq!(
        (batch.caps().max_requests, batch.caps().max_bytes),
        (10, 4096)
    );
    let mut raised = entry(&server.uri());
    raised.batch.max_requests = Some(5_000_000);
    let batch = models_of(raised).batch("claude").await.unwrap();
    assert_eq!(
        batch.caps().max_requests,
        100_000,
        "never above Anthropic's"
    );
}

#[tokio::test]
async fn submit_posts_the_lines_with_the_key_version_and_betas() {
    let (server, batch) = setup().await;
    let lines = vec![
        batch.encode(&item("a", ask("one"))).unwrap(),
        batch.encode(&item("b", ask("two"))).unwrap(),
    ];
    Mock::given(method("POST"))
        .and(path("/v1/messages/batches"))
        .and(header("x-api-key", API_KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("in_progress", None)))
        .expect(1)
        .mount(&server)
        .await;
    let handle = batch.submit(&lines, "run-label").await.unwrap();
    assert_eq!(handle, self::handle());
    let request = &server.received_requests().await.unwrap()[0];
    assert_eq!(
        headers_of(request, "anthropic-beta").as_deref(),
        Some("beta-one,beta-two")
    );
    let sent: Value = request.body_json().unwrap();
    let requests = sent["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["custom_id"], "b");
    assert_eq!(
        requests[1]["params"]["messages"][0]["content"][0]["text"],
        "two"
    );
}

#[tokio::test]
async fn a_429_on_create_is_rate_limited_with_the_servers_wait() {
    let (server, batch) = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/batches"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "30")
                .set_body_json(
                    json!({"type": "error", "error": {"type": "rate_limit_error",
                    "message": "Too many batch requests in the queue"}}),
                ),
        )
        .mount(&server)
        .await;
    let line = batch.encode(&item("a", ask("one"))).unwrap();
    let error = batch.submit(&[line], "label").await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Provider(ProviderError::RateLimited { retry_after: Some(wait) })
                if wait == Duration::from_secs(30)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn submit_refuses_no_lines_and_more_than_the_cap_before_sending() {
    let (server, _) = setup().await;
    let mut small = entry(&server.uri());
    small.batch.max_requests = Some(1);
    let batch = models_of(small).batch("claude").await.unwrap();
    let line = batch.encode(&item("a", ask("one"))).unwrap();
    for lines in [vec![], vec![line.clone(), line]] {
        let refused = batch.submit(&lines, "label").await;
        assert!(
            matches!(refused, Err(Error::InvalidRequest { .. })),
            "{refused:?}"
        );
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn status_gets_the_batch_with_the_key_version_and_betas() {
    let (server, batch) = setup().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("canceling", None)))
        .expect(1)
        .mount(&server)
        .await;
    let status = batch.status(&handle()).await.unwrap();
    assert_eq!(status.phase, BatchPhase::Cancelling);
    assert_eq!((status.counts.total, status.counts.failed), (4, 3));
    let sent = &server.received_requests().await.unwrap()[0];
    assert_eq!(headers_of(sent, "x-api-key").as_deref(), Some(API_KEY));
    assert_eq!(
        headers_of(sent, "anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(
        headers_of(sent, "anthropic-beta").as_deref(),
        Some("beta-one,beta-two")
    );
}

#[tokio::test]
async fn a_401_on_status_is_the_live_verdict_without_the_key_it_echoes() {
    let (server, batch) = setup().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"type": "error",
            "error": {"type": "authentication_error", "message": format!("invalid x-api-key {API_KEY}")}})))
        .mount(&server)
        .await;
    let error = batch.status(&handle()).await.unwrap_err();
    assert!(
        matches!(&error, Error::ProviderRequest(e) if e.status == 401),
        "{error:?}"
    );
    assert!(!format!("{error} {error:?}").contains(API_KEY), "{error:?}");
}

#[tokio::test]
async fn a_529_on_status_is_overloaded_with_the_servers_wait() {
    let (server, batch) = setup().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(
            ResponseTemplate::new(529)
                .insert_header("retry-after", "7")
                .set_body_json(
                    json!({"type": "error", "error": {"type": "overloaded_error",
                    "message": "Overloaded"}}),
                ),
        )
        .mount(&server)
        .await;
    let error = batch.status(&handle()).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Provider(ProviderError::Overloaded { status: 529, retry_after: Some(wait) })
                if wait == Duration::from_secs(7)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_batch_object_is_read_up_to_the_models_limit_and_its_results_file_past_it() {
    let server = MockServer::start().await;
    let batch = models_of(entry(&server.uri()).with_max_response_bytes(2048))
        .batch("claude")
        .await
        .unwrap();
    let mut big = batch_object("ended", None);
    big["padding"] = json!("x".repeat(4096));
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(big))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let too_large = batch.status(&handle()).await;
    let limit = match too_large {
        Err(Error::ResponseTooLarge { limit_bytes, .. }) => limit_bytes,
        other => panic!("expected ResponseTooLarge, got {other:?}"),
    };
    assert_eq!(limit, 2048);
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("ended", None)))
        .mount(&server)
        .await;
    let long = format!("{}\n{}", results_file(), " ".repeat(4096));
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}/results")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(long, "application/binary"))
        .mount(&server)
        .await;
    assert_eq!(batch.results(&handle()).await.unwrap().len(), 4);
}

/// A results file with one line of each type.
fn results_file() -> String {
    [
        json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"id": "msg_1",
            "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "Paris."}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 2}}}}),
        json!({"custom_id": "bad", "result": {"type": "errored", "error": {"type": "error",
            "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}}}),
        json!({"custom_id": "stopped", "result": {"type": "canceled"}}),
        json!({"custom_id": "late", "result": {"type": "expired"}}),
    ]
    .map(|v| v.to_string())
    .join("\n")
}

#[tokio::test]
async fn results_follow_a_results_url_on_the_apis_origin_and_decode_each_line() {
    let (server, batch) = setup().await;
    let results_path = format!("/elsewhere/{BATCH}/results");
    let results_url = format!("{}{results_path}", server.uri());
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(batch_object("ended", Some(results_url))),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(results_path))
        .and(header("x-api-key", API_KEY))
        .and(header("accept", "application/binary"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(results_file(), "application/binary"))
        .expect(1)
        .mount(&server)
        .await;
    let mut out = batch.results(&handle()).await.unwrap();
    out.sort_by(|a, b| a.custom_id.cmp(&b.custom_id));
    let ids: Vec<&str> = out.iter().map(|o| o.custom_id.as_str()).collect();
    assert_eq!(ids, ["bad", "late", "ok", "stopped"]);
    assert!(matches!(&out[0].result, Err(Error::ProviderRequest(e)) if e.status == 400));
    assert!(
        matches!(&out[1].result, Err(Error::BatchLineUnfinished { how, .. }) if how == "expired")
    );
    let answer = out[2].result.as_ref().unwrap();
    assert_eq!(answer.text(), "Paris.");
    assert_eq!(answer.usage().output_tokens, 2);
    assert!(
        matches!(&out[3].result, Err(Error::BatchLineUnfinished { how, .. }) if how == "was cancelled")
    );
}

#[tokio::test]
async fn results_named_on_another_origin_are_read_from_the_base_url() {
    let (server, batch) = setup().await;
    // Never contacted: only the address is compared.
    let foreign = format!("https://results.invalid/v1/messages/batches/{BATCH}/results");
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(batch_object("ended", Some(foreign))),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}/results")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(results_file(), "application/binary"))
        .expect(1)
        .mount(&server)
        .await;
    assert_eq!(batch.results(&handle()).await.unwrap().len(), 4);
}

#[tokio::test]
async fn results_of_a_batch_not_ended_are_refused_without_reading_them() {
    let (server, batch) = setup().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("in_progress", None)))
        .expect(1)
        .mount(&server)
        .await;
    let refused = batch.results(&handle()).await;
    assert!(
        matches!(refused, Err(Error::InvalidRequest { .. })),
        "{refused:?}"
    );
}

#[tokio::test]
async fn cancel_posts_to_the_batchs_cancel_path() {
    let (server, batch) = setup().await;
    Mock::given(method("POST"))
        .and(path(format!("/v1/messages/batches/{BATCH}/cancel")))
        .and(header("x-api-key", API_KEY))
        .and(body_json(json!({})))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("canceling", None)))
        .expect(1)
        .mount(&server)
        .await;
    batch.cancel(&handle()).await.unwrap();
}

#[tokio::test]
async fn a_handle_whose_id_is_not_one_path_segment_sends_nothing() {
    let (server, batch) = setup().await;
    let odd = BatchHandle {
        id: "../../v1/messages".into(),
        input_file: None,
    };
    assert!(matches!(
        batch.status(&odd).await,
        Err(Error::InvalidRequest { .. })
    ));
    assert!(matches!(
        batch.cancel(&odd).await,
        Err(Error::InvalidRequest { .. })
    ));
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn find_is_none_since_message_batches_keep_no_label() {
    let (server, batch) = setup().await;
    assert!(batch.find("run-label").await.unwrap().is_none());
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_results_file_that_echoes_the_key_is_read_with_the_key_cut_out() {
    let (server, batch) = setup().await;
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(batch_object("ended", None)))
        .mount(&server)
        .await;
    let echo = json!({"custom_id": "echo", "result": {"type": "succeeded", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": format!("your key is {API_KEY}")}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}}});
    Mock::given(method("GET"))
        .and(path(format!("/v1/messages/batches/{BATCH}/results")))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(echo.to_string(), "application/binary"),
        )
        .mount(&server)
        .await;
    let out = batch.results(&handle()).await.unwrap();
    let text = out[0].result.as_ref().unwrap().text();
    assert!(text.starts_with("your key is "), "{text}");
    assert!(!text.contains(API_KEY), "{text}");
}
