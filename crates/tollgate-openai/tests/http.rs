//! The transports against a local HTTP server (wiremock on 127.0.0.1), through the
//! pipeline (`Models`): what is OpenAI's own (organization and project headers, every
//! finish reason and usage shape, quota and vLLM error bodies, reset durations, `[DONE]`,
//! streamed tool calls), embeddings and decisions. What every provider shares (errors by
//! status, streams cut before and after their first event, keys, secrets) runs in
//! `tests/contract.rs`, the contract kit, for both provider keys.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Block, Conversation, EmbeddingPurpose, Error, JobContext, LlmRequest, Models, ProviderError,
    Question, ResponseShape, SamplingParams, StopReason, StreamEvent, Usage,
};
use tollgate::{Catalog, DecisionRequest, Json, ToolDefinition};
use tollgate_openai::OpenAiProvider;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY_ID: &str = "openai-main";
const API_KEY: &str = "sk-proj-TEST-0123456789-SECRET";

struct Setup {
    server: MockServer,
    models: Models,
}

fn limits() -> Limits {
    Limits {
        rpm: 1000,
        tpm: 10_000_000,
        ..Limits::default()
    }
}

fn entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("gpt", "openai", "gpt-4o-mini")
        .with_credential(KEY_ID)
        .with_output_tokens(2000, 500)
        .with_limits(limits())
        .with_option("base_url", base_url)
        .with_option("organization", "org-test")
        .with_option("project", "proj-test")
}

fn local_entry(base_url: &str) -> ModelEntry {
    ModelEntry::new("local", "openai-compatible", "llama-3")
        .with_output_tokens(2000, 300)
        .with_limits(limits())
        .with_option("base_url", format!("{base_url}/v1/"))
}

fn embed_entry(base_url: &str, batch: i64) -> ModelEntry {
    ModelEntry::new("embed", "openai", "text-embedding-3-small")
        .with_kind(ModelKind::Embeddings)
        .with_credential(KEY_ID)
        .with_limits(limits())
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(1536),
            dimensions_param: true,
            truncation_safe: true,
        })
        .with_option("base_url", base_url)
        .with_option("embedding_batch", batch)
}

fn decide_entry(id: &str, base_url: &str, logprobs: bool) -> ModelEntry {
    ModelEntry::new(id, "openai", "gpt-4o-mini")
        .with_kind(ModelKind::Decision)
        .with_credential(KEY_ID)
        .with_limits(limits())
        .with_option("base_url", base_url)
        .with_option("logprobs", logprobs)
}

fn pipeline() -> PipelineConfig {
    PipelineConfig {
        retry: RetryPolicy {
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            jitter_seed: Some(7),
            ..RetryPolicy::default()
        },
        ..PipelineConfig::default()
    }
}

/// A server, and `Models` (both providers) whose pipeline retries with tiny real-time
/// delays (wiremock needs real I/O, so the clock is not paused).
async fn setup() -> Setup {
    let server = MockServer::start().await;
    let store = Arc::new(MemoryCredentialStore::new().with(KEY_ID, API_KEY));
    let uri = server.uri();
    let catalog = Catalog::builder()
        .model(entry(&uri))
        .model(local_entry(&uri))
        .model(embed_entry(&uri, 3))
        .model(decide_entry("decide", &uri, true))
        .model(decide_entry("no-logprobs", &uri, false))
        .embedding_width(4)
        .build()
        .unwrap();
    let models = Models::builder()
        .catalog(catalog)
        .credentials_arc(store)
        .provider(OpenAiProvider::OPENAI)
        .provider(OpenAiProvider::COMPATIBLE)
        .pipeline(pipeline())
        .build()
        .unwrap();
    Setup { server, models }
}

fn ask() -> LlmRequest {
    Conversation::new()
        .user("Hello?")
        .request("gpt", SamplingParams::new())
        .unwrap()
}

/// Models for one job with no retries: a retryable error reaches the caller at once.
fn no_retries(models: &Models) -> Models {
    models.for_job(JobContext::new("no-retries", 0))
}

fn completion(content: Value, finish: &str, usage: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini-2024",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": null},
                        "finish_reason": finish, "logprobs": null}],
           "usage": usage})
}

fn usage(prompt: u64, cached: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
           "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
           "completion_tokens_details": {"reasoning_tokens": 2}})
}

fn text_answer(text: &str, finish: &str) -> Value {
    completion(json!(text), finish, usage(12, 0, 4))
}

fn error_body(kind: &str, code: Value) -> Value {
    json!({"error": {"message": format!("{kind} happened"), "type": kind, "param": null, "code": code}})
}

fn sse(chunks: &[Value], done: bool) -> String {
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        out.push_str("data: [DONE]\n\n");
    }
    out
}

fn sse_response(chunks: &[Value], done: bool) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(sse(chunks, done), "text/event-stream")
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
           "usage": null})
}

fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini-2024",
           "choices": [], "usage": usage(20, 8, 2)})
}

fn good_stream() -> Vec<Value> {
    vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo"}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(),
    ]
}

async fn single(
    models: &Models,
    id: &str,
    request: &LlmRequest,
) -> tollgate::Result<tollgate::LlmResponse> {
    models.chat(id).await?.single_response(request).await
}

async fn stream_all(models: &Models, id: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let request = ask().with_model_id(id).unwrap();
    let mut stream = match models
        .chat(id)
        .await
        .unwrap()
        .stream_response(&request)
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

async fn sent_bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect()
}

#[tokio::test]
async fn a_call_sends_bearer_auth_organization_and_project_and_decodes_the_answer() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .and(header("openai-organization", "org-test"))
        .and(header("openai-project", "proj-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_answer("Hi!", "stop")))
        .expect(1)
        .mount(&s.server)
        .await;
    let answer = single(&s.models, "gpt", &ask()).await.unwrap();
    assert_eq!(answer.text(), "Hi!");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert_eq!(answer.model(), "gpt-4o-mini-2024");
    let sent = &sent_bodies(&s.server).await[0];
    assert_eq!(sent["model"], "gpt-4o-mini");
    assert_eq!(sent["max_completion_tokens"], 500, "the catalog's default");
    assert!(sent.get("max_tokens").is_none());
    assert!(sent.get("stream").is_none());
    assert_eq!(sent["messages"][0]["role"], "user");
}

#[tokio::test]
async fn openai_compatible_needs_no_key_sends_max_tokens_and_strips_v1_from_the_base_url() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_answer("local", "stop")))
        .expect(1)
        .mount(&s.server)
        .await;
    let request = ask().with_model_id("local").unwrap();
    let answer = single(&s.models, "local", &request).await.unwrap();
    assert_eq!(answer.text(), "local");
    let received = &s.server.received_requests().await.unwrap()[0];
    assert!(received.headers.get("authorization").is_none());
    let sent: Value = received.body_json().unwrap();
    assert_eq!(sent["max_tokens"], 300);
    assert!(sent.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn openai_compatible_without_base_url_and_unknown_options_are_catalog_errors() {
    let server = MockServer::start().await;
    let no_url = ModelEntry::new("local", "openai-compatible", "llama")
        .with_output_tokens(100, 100)
        .with_limits(limits());
    let odd = entry(&server.uri()).with_option("temperature_hack", 1);
    for (model, field) in [
        (no_url, "options.base_url"),
        (odd, "options.temperature_hack"),
    ] {
        let id = model.id.clone();
        let models = Models::builder()
            .catalog(Catalog::builder().model(model).build().unwrap())
            .credentials(MemoryCredentialStore::new().with(KEY_ID, API_KEY))
            .provider(OpenAiProvider::OPENAI)
            .provider(OpenAiProvider::COMPATIBLE)
            .build()
            .unwrap();
        let err = models.chat(&id).await.unwrap_err();
        assert!(
            matches!(&err, Error::Catalog(tollgate::catalog::CatalogError::InvalidField { field: f, .. }) if f == field),
            "{err}"
        );
    }
}

#[tokio::test]
async fn every_finish_reason_maps_to_its_stop_reason() {
    // `content_filter` is a refusal: see a_content_filter_finish_is_a_refusal_that_is_costed.
    for (finish, expected) in [("stop", StopReason::EndTurn)] {
        let s = setup().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(text_answer("x", finish)))
            .mount(&s.server)
            .await;
        let answer = single(&s.models, "gpt", &ask()).await;
        // A content filter's stop is a refusal, categorised, not an answer.
        match expected {
            StopReason::ContentFilter => assert!(
                matches!(&answer, Err(Error::ProviderRefusal { category, .. }) if category == "content_filter"),
                "{answer:?}"
            ),
            _ => assert_eq!(answer.unwrap().stop_reason(), expected, "{finish}"),
        }
    }
}

#[tokio::test]
async fn finish_reason_length_is_max_tokens_so_the_pipeline_reruns_then_reports_truncation() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_answer("cut", "length")))
        .mount(&s.server)
        .await;
    let err = single(&s.models, "gpt", &ask()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutputTruncated {
                max_output_tokens: 2000,
                ..
            }
        ),
        "{err}"
    );
    // The first attempt at the default limit, then a re-run at the model's ceiling.
    let limits: Vec<Value> = sent_bodies(&s.server)
        .await
        .iter()
        .map(|b| b["max_completion_tokens"].clone())
        .collect();
    assert_eq!(limits.first(), Some(&json!(500)));
    assert_eq!(limits.last(), Some(&json!(2000)));
}

#[tokio::test]
async fn finish_reason_tool_calls_decodes_the_calls_and_their_json_arguments() {
    let s = setup().await;
    let mut body = completion(Value::Null, "tool_calls", usage(30, 0, 9));
    body["choices"][0]["message"]["tool_calls"] = json!([
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": ""}}
    ]);
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(&s.server)
        .await;
    let answer = single(&s.models, "gpt", &ask()).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert_eq!(
        answer.blocks(),
        &[
            Block::ToolUse {
                id: "call_1".into(),
                name: "weather".into(),
                input: Json::new(json!({"city": "Oslo"})),
                cache: None
            },
            Block::ToolUse {
                id: "call_2".into(),
                name: "time".into(),
                input: Json::new(json!({})),
                cache: None
            },
        ]
    );
}

#[tokio::test]
async fn usage_with_cached_tokens_takes_them_out_of_the_input() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!("ok"),
            "stop",
            usage(2000, 1536, 40),
        )))
        .mount(&s.server)
        .await;
    let answer = single(&s.models, "gpt", &ask()).await.unwrap();
    assert_eq!(
        answer.usage(),
        Usage {
            input_tokens: 464,
            cache_read_tokens: 1536,
            output_tokens: 40,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn usage_without_details_or_without_usage_at_all_is_read_defensively() {
    for (wire, expected) in [
        (
            json!({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}),
            Usage {
                input_tokens: 10,
                output_tokens: 3,
                ..Usage::default()
            },
        ),
        (Value::Null, Usage::default()),
    ] {
        let s = setup().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion(
                json!("ok"),
                "stop",
                wire,
            )))
            .mount(&s.server)
            .await;
        let answer = single(&s.models, "gpt", &ask()).await.unwrap();
        assert_eq!(answer.usage(), expected);
    }
}

#[tokio::test]
async fn tools_tool_choice_sampling_and_a_response_shape_are_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_answer("{}", "stop")))
        .mount(&server)
        .await;
    let model = entry(&server.uri()).with_option("tool_choice", "tool:weather");
    let models = Models::builder()
        .catalog(Catalog::builder().model(model).build().unwrap())
        .credentials(MemoryCredentialStore::new().with(KEY_ID, API_KEY))
        .provider(OpenAiProvider::OPENAI)
        .build()
        .unwrap();
    let sampling = SamplingParams::new()
        .with_temperature(0.5)
        .unwrap()
        .with_top_p(0.9)
        .unwrap()
        .with_stop("END")
        .with_max_output_tokens(77)
        .unwrap()
        .with_response_shape(ResponseShape {
            name: "answer shape".into(),
            schema: Json::new(json!({"type": "object"})),
            strict: Some(true),
        });
    let request = Conversation::new()
        .with_system("Be brief.")
        .with_tool(ToolDefinition {
            defer_loading: false,
            cache: None,
            name: "weather".into(),
            description: "The weather in a city".into(),
            input_schema: Json::new(json!({"type": "object"})),
            strict: None,
            native: None,
        })
        .user("Weather?")
        .request("gpt", sampling)
        .unwrap();
    single(&models, "gpt", &request).await.unwrap();
    let sent = &sent_bodies(&server).await[0];
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(sent["tools"][0]["function"]["name"], "weather");
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert_eq!(sent["temperature"], 0.5);
    assert_eq!(sent["top_p"], 0.9);
    assert_eq!(sent["stop"], json!(["END"]));
    assert_eq!(sent["max_completion_tokens"], 77);
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(
        sent["response_format"]["json_schema"]["name"],
        "answer_shape"
    );
    assert_eq!(sent["response_format"]["json_schema"]["strict"], true);
}

/// The error a call without retries meets when the server always answers `template`.
async fn error_for(template: ResponseTemplate) -> Error {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&s.server)
        .await;
    single(&no_retries(&s.models), "gpt", &ask())
        .await
        .unwrap_err()
}

async fn status_error(status: u16, body: Value) -> Error {
    error_for(ResponseTemplate::new(status).set_body_json(body)).await
}

#[tokio::test]
async fn retry_after_ms_is_preferred_to_retry_after() {
    let err = error_for(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "3")
            .insert_header("retry-after-ms", "250")
            .set_body_json(error_body("tokens", json!("rate_limit_exceeded"))),
    )
    .await;
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_millis(250)),
        "{err}"
    );
}

#[tokio::test]
async fn status_429_insufficient_quota_as_type_or_code_is_quota_exhausted_and_sent_once() {
    for body in [
        error_body("insufficient_quota", json!("insufficient_quota")),
        error_body("insufficient_quota", Value::Null),
        error_body("billing", json!("insufficient_quota")),
        error_body(
            "insufficient_quota",
            json!("organization_spend_limit_exceeded"),
        ),
    ] {
        let s = setup().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).set_body_json(body.clone()))
            .mount(&s.server)
            .await;
        // With retries on: quota is never retried.
        let err = single(&s.models, "gpt", &ask()).await.unwrap_err();
        assert!(matches!(err, Error::QuotaExhausted { .. }), "{body}: {err}");
        assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_vllm_style_top_level_error_body_is_read() {
    let err = status_error(
        400,
        json!({"object": "error", "message": "bad prompt", "type": "BadRequestError", "code": 400}),
    )
    .await;
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400 && e.message.contains("bad prompt")),
        "{err}"
    );
}

#[tokio::test]
async fn overloaded_and_server_keep_wire_status() {
    for status in [502, 503, 504] {
        let err = status_error(status, error_body("server_error", Value::Null)).await;
        assert!(
            matches!(&err, Error::Provider(p @ ProviderError::Server { .. }) if p.status() == Some(status)),
            "{err}"
        );
        assert!(err.to_string().contains(&format!("HTTP {status}")), "{err}");
    }
}

#[tokio::test]
async fn ratelimit_reset_as_a_go_duration_with_nothing_left_waits_one_request_not_the_reset() {
    let s = setup().await;
    // Full again in 45.5 s (a duration); at 100 a minute one request refills in 0.6 s.
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("x-ratelimit-limit-requests", "100")
                .insert_header("x-ratelimit-remaining-requests", "0")
                .insert_header("x-ratelimit-reset-requests", "0m45.5s")
                .set_body_json(text_answer("ok", "stop")),
        )
        .mount(&s.server)
        .await;
    single(&s.models, "gpt", &ask()).await.unwrap();
    let limiter = s.models.limiter("gpt").unwrap();
    match limiter
        .try_reserve(
            tollgate::limit::Cost::call(1, 1),
            tollgate::limit::Priority::Default,
        )
        .await
    {
        Err(tollgate::limit::TryReserveError::WouldWait { ready_in }) => {
            assert!(
                ready_in <= Duration::from_millis(600),
                "one request at 100 a minute, not the reset: {ready_in:?}"
            );
        }
        other => panic!("the bucket should be empty, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stream_asks_for_usage_and_reaches_the_reader_with_usage_and_completes() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(&good_stream(), true))
        .expect(1)
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, "gpt").await;
    assert!(error.is_none(), "{error:?}");
    let sent = &sent_bodies(&s.server).await[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    let expected_usage = Usage {
        input_tokens: 12,
        cache_read_tokens: 8,
        output_tokens: 2,
        ..Usage::default()
    };
    assert_eq!(
        events[..4],
        [
            StreamEvent::TextDelta {
                index: 0,
                text: "Hel".into()
            },
            StreamEvent::TextDelta {
                index: 0,
                text: "lo".into()
            },
            StreamEvent::Stop(StopReason::EndTurn),
            StreamEvent::Usage(expected_usage),
        ]
    );
    match events.last() {
        Some(StreamEvent::Completed(a)) => {
            assert_eq!(a.text(), "Hello");
            assert_eq!(a.usage(), expected_usage);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_tool_call_is_assembled_from_its_fragments() {
    let s = setup().await;
    let call = |first: bool, args: &str| {
        let mut c = json!({"index": 0, "function": {"arguments": args}});
        if first {
            c["id"] = json!("call_9");
            c["type"] = json!("function");
            c["function"]["name"] = json!("weather");
        }
        chunk(json!({"tool_calls": [c]}), None)
    };
    Mock::given(method("POST"))
        .respond_with(sse_response(
            &[
                chunk(json!({"role": "assistant", "content": null}), None),
                call(true, ""),
                call(false, "{\"city\":"),
                call(false, "\"Oslo\"}"),
                chunk(json!({}), Some("tool_calls")),
                usage_chunk(),
            ],
            true,
        ))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, "gpt").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[0],
        StreamEvent::ToolUseDelta {
            index: 0,
            id: Some("call_9".into()),
            name: Some("weather".into()),
            input_json: String::new()
        }
    );
    match events.last() {
        Some(StreamEvent::Completed(a)) => {
            assert_eq!(a.stop_reason(), StopReason::ToolUse);
            assert_eq!(
                a.blocks(),
                &[Block::ToolUse {
                    id: "call_9".into(),
                    name: "weather".into(),
                    input: Json::new(json!({"city": "Oslo"})),
                    cache: None
                }]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_refusal_is_a_provider_refusal() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(
            &[
                chunk(json!({"role": "assistant", "refusal": "I can't"}), None),
                chunk(json!({"refusal": " help."}), None),
                chunk(json!({}), Some("stop")),
            ],
            true,
        ))
        .mount(&s.server)
        .await;
    let (_, error) = stream_all(&s.models, "gpt").await;
    assert!(
        matches!(&error, Some(Error::ProviderRefusal { explanation, .. }) if explanation == "I can't help."),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_stream_with_finish_reason_length_stops_at_max_tokens() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(
            &[
                chunk(json!({"content": "cut"}), None),
                chunk(json!({}), Some("length")),
                usage_chunk(),
            ],
            true,
        ))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, "gpt").await;
    assert!(error.is_none(), "{error:?}");
    assert!(
        matches!(events.last(), Some(StreamEvent::Completed(a)) if a.stop_reason() == StopReason::MaxTokens)
    );
}

#[tokio::test]
async fn an_openai_stream_without_done_after_its_finish_reason_is_cut() {
    let s = setup().await;
    // Cut after the finish reason, before the usage chunk and `[DONE]`.
    let mut cut = good_stream();
    cut.pop();
    Mock::given(method("POST"))
        .respond_with(sse_response(&cut, false))
        .mount(&s.server)
        .await;
    let (_, error) = stream_all(&no_retries(&s.models), "gpt").await;
    assert!(
        matches!(&error, Some(Error::StreamInterrupted { .. })),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_compatible_stream_without_done_or_usage_completes_at_its_finish_reason() {
    let s = setup().await;
    let mut stream = good_stream();
    stream.pop();
    Mock::given(method("POST"))
        .respond_with(sse_response(&stream, false))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, "local").await;
    assert!(error.is_none(), "{error:?}");
    assert!(matches!(events.last(), Some(StreamEvent::Completed(a)) if a.text() == "Hello"));
}

#[tokio::test]
async fn a_stream_opened_with_a_quota_error_is_quota_exhausted() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(error_body(
            "insufficient_quota",
            json!("insufficient_quota"),
        )))
        .mount(&s.server)
        .await;
    let (_, error) = stream_all(&s.models, "gpt").await;
    assert!(
        matches!(error, Some(Error::QuotaExhausted { .. })),
        "{error:?}"
    );
}

fn embeddings_answer(request: &Request) -> ResponseTemplate {
    // Each input's vector encodes its text's number, in reverse order on the wire.
    let body: Value = request.body_json().unwrap();
    let inputs = body["input"].as_array().unwrap();
    let mut data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let n: f32 = t.as_str().unwrap().trim_start_matches('t').parse().unwrap();
            json!({"object": "embedding", "index": i, "embedding": [n + 1.0, 0.0, 0.0, 0.0]})
        })
        .collect();
    data.reverse();
    ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": data,
        "model": "text-embedding-3-small", "usage": {"prompt_tokens": inputs.len() * 2, "total_tokens": inputs.len() * 2}}))
}

#[tokio::test]
async fn embeddings_are_split_into_batches_sent_with_dimensions_and_reassembled_in_order() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .respond_with(embeddings_answer)
        .mount(&s.server)
        .await;
    let texts: Vec<String> = (0..7).map(|i| format!("t{i}")).collect();
    let client = s.models.embeddings("embed").await.unwrap();
    let vectors = client
        .embed_batch(&texts, EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 7);
    for v in &vectors {
        assert_eq!(v.as_slice(), &[1.0, 0.0, 0.0, 0.0], "unit length, width 4");
    }
    let sent = sent_bodies(&s.server).await;
    let sizes: Vec<usize> = sent
        .iter()
        .map(|b| b["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![3, 3, 1], "batches of at most 3");
    let order: Vec<String> = sent
        .iter()
        .flat_map(|b| b["input"].as_array().unwrap().clone())
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(order, texts);
    assert!(sent.iter().all(|b| b["dimensions"] == 4));
    assert!(sent.iter().all(|b| b["model"] == "text-embedding-3-small"));
}

#[tokio::test]
async fn embeddings_come_back_in_input_order_whatever_the_wire_order() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(|request: &Request| {
            let body: Value = request.body_json().unwrap();
            let inputs = body["input"].as_array().unwrap();
            // Vector i points along axis i (inputs.len() <= 3 per batch); reversed on the wire.
            let mut data: Vec<Value> = (0..inputs.len())
                .map(|i| {
                    let mut v = vec![0.0f32; 4];
                    v[i] = 2.0;
                    json!({"object": "embedding", "index": i, "embedding": v})
                })
                .collect();
            data.reverse();
            ResponseTemplate::new(200).set_body_json(
                json!({"object": "list", "data": data, "usage": {"prompt_tokens": 3, "total_tokens": 3}}),
            )
        })
        .mount(&s.server)
        .await;
    let texts: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
    let vectors = s
        .models
        .embeddings("embed")
        .await
        .unwrap()
        .embed_batch(&texts, EmbeddingPurpose::Query)
        .await
        .unwrap();
    for (i, v) in vectors.iter().enumerate() {
        let mut expected = vec![0.0f32; 4];
        expected[i] = 1.0;
        assert_eq!(v.as_slice(), expected.as_slice(), "vector {i}");
    }
}

#[tokio::test]
async fn embeddings_errors_are_typed_like_chat_errors() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(429).set_body_json(error_body(
            "insufficient_quota",
            json!("insufficient_quota"),
        )))
        .mount(&s.server)
        .await;
    let err = s
        .models
        .embeddings("embed")
        .await
        .unwrap()
        .embed("x", EmbeddingPurpose::Document)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
}

fn logprobs_answer(top: &[(&str, f64)]) -> Value {
    let top: Vec<Value> = top
        .iter()
        .map(|(t, l)| json!({"token": t, "logprob": l, "bytes": t.as_bytes()}))
        .collect();
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": top[0]["token"]},
                        "finish_reason": "length",
                        "logprobs": {"content": [{"token": top[0]["token"], "logprob": top[0]["logprob"],
                                                  "bytes": [], "top_logprobs": top}]}}],
           "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51}})
}

#[tokio::test]
async fn a_decision_over_three_options_gives_probabilities_that_sum_to_one() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(logprobs_answer(&[
            ("B", (0.6f64).ln()),
            (" A", (0.2f64).ln()),
            ("c", (0.1f64).ln()),
            ("The", (0.05f64).ln()),
            ("D", -9999.0),
        ])))
        .expect(1)
        .mount(&s.server)
        .await;
    let request = DecisionRequest::new(
        "decide",
        "The door is open.",
        vec![Question::Choice {
            name: "action".into(),
            prompt: "What next?".into(),
            options: vec!["wait".into(), "enter".into(), "leave".into()],
        }],
    )
    .unwrap();
    let decision = s
        .models
        .decision("decide")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    let p = |o: &str| decision.probability("action", o).unwrap();
    let sum = p("wait") + p("enter") + p("leave");
    assert!((sum - 1.0).abs() < 1e-9, "{sum}");
    assert!((p("enter") - 0.6 / 0.9).abs() < 1e-9);
    assert!((p("wait") - 0.2 / 0.9).abs() < 1e-9);
    assert!((p("leave") - 0.1 / 0.9).abs() < 1e-9);
    let sent = &sent_bodies(&s.server).await[0];
    assert_eq!(sent["logprobs"], true);
    assert_eq!(sent["top_logprobs"], 20);
    assert_eq!(sent["max_completion_tokens"], 1);
    let prompt = sent["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("A: wait") && prompt.contains("B: enter") && prompt.contains("C: leave")
    );
    assert!(prompt.contains("The door is open."));
}

#[tokio::test]
async fn a_yes_no_question_gives_the_probability_of_yes_with_one_request_per_question() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(logprobs_answer(&[
            ("Yes", (0.3f64).ln()),
            ("no", (0.1f64).ln()),
            (" yes", (0.1f64).ln()),
        ])))
        .expect(2)
        .mount(&s.server)
        .await;
    let noul = |name: &str| Question::Noul {
        name: name.into(),
        prompt: "Is it safe?".into(),
    };
    let request = DecisionRequest::new("decide", "state", vec![noul("q1"), noul("q2")]).unwrap();
    let decision = s
        .models
        .decision("decide")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap();
    for q in ["q1", "q2"] {
        assert!((decision.probability(q, "yes").unwrap() - 0.8).abs() < 1e-9);
        assert!((decision.probability(q, "no").unwrap() - 0.2).abs() < 1e-9);
    }
}

#[tokio::test]
async fn a_model_without_logprobs_refuses_the_decision_client_clearly() {
    let s = setup().await;
    let err = s.models.decision("no-logprobs").await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { capability, .. } if capability.contains("logprobs")),
        "{err}"
    );
    assert!(s.server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_answer_without_logprobs_is_a_clear_error() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(text_answer("A", "length")))
        .mount(&s.server)
        .await;
    let request = DecisionRequest::new(
        "decide",
        "s",
        vec![Question::Noul {
            name: "q".into(),
            prompt: "?".into(),
        }],
    )
    .unwrap();
    let err = no_retries(&s.models)
        .decision("decide")
        .await
        .unwrap()
        .decide(&request)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("logprobs"), "{err}");
}
