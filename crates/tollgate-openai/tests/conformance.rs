//! The conformance tier: the transports against two third-party mock servers, llmock
//! (PyPI) and aimock (npm), started on 127.0.0.1 by `scripts/peers.sh` (which
//! `cargo xtask test-all` runs before the tests and stops after them).
//!
//! The servers' URLs come from `TOLLGATE_LLMOCK_URL` and `TOLLGATE_AIMOCK_URL`. Without
//! them the tests say so and pass, unless `TOLLGATE_PEERS_REQUIRED` is set (xtask sets
//! it), where a missing server fails the test. Each server gets one test that runs its
//! cases in order, because scripted faults are consumed by whichever request comes next.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry, ModelKind};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Catalog, Conversation, EmbeddingPurpose, Error, JobContext, LlmResponse, Models, ProviderError,
    SamplingParams, StopReason, StreamEvent,
};
use tollgate_openai::OpenAiProvider;
use tollgate_testkit::peers::url as peer;

const KEY_ID: &str = "peer-key";

fn models(base_url: &str, native_width: u64) -> Models {
    let limits = Limits {
        rpm: 6000,
        tpm: 100_000_000,
        ..Limits::default()
    };
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("chat", "openai", "gpt-4o-mini")
                .with_credential(KEY_ID)
                .with_output_tokens(200, 50)
                .with_limits(limits)
                .with_option("base_url", base_url),
        )
        .model(
            ModelEntry::new("embed", "openai", "text-embedding-3-small")
                .with_kind(ModelKind::Embeddings)
                .with_credential(KEY_ID)
                .with_limits(limits)
                .with_embedding(EmbeddingCapabilities {
                    native_width: Some(native_width),
                    dimensions_param: true,
                    truncation_safe: true,
                })
                .with_option("base_url", base_url),
        )
        .embedding_width(4)
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(KEY_ID, "sk-peer-test"))
        .provider(OpenAiProvider::OPENAI)
        .pipeline(PipelineConfig {
            retry: RetryPolicy {
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(2),
                jitter_seed: Some(3),
                ..RetryPolicy::default()
            },
            ..PipelineConfig::default()
        })
        .build()
        .unwrap()
}

fn no_retries(models: &Models) -> Models {
    models.for_job(JobContext::new("no-retries", 0))
}

fn ask(text: &str) -> tollgate::LlmRequest {
    Conversation::new()
        .user(text)
        .request("chat", SamplingParams::new())
        .unwrap()
}

async fn single(models: &Models, text: &str) -> tollgate::Result<LlmResponse> {
    models.chat("chat").await?.single_response(&ask(text)).await
}

async fn stream(models: &Models, text: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let mut s = match models
        .chat("chat")
        .await
        .unwrap()
        .stream_response(&ask(text))
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

/// POSTs a control request to a mock (plain HTTP on 127.0.0.1, no proxy).
async fn control(url: String, body: Value) {
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
}

fn completed(events: &[StreamEvent]) -> &LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(a)) => a,
        other => panic!("the stream did not complete: {other:?}"),
    }
}

fn unit(v: &[f32]) -> bool {
    (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5
}

#[tokio::test]
async fn llmock_chat_streams_embeddings_and_scripted_faults() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let scenario = |behaviors: Value| {
        control(
            format!("{base}/_llmock/scenario"),
            json!({ "behaviors": behaviors }),
        )
    };
    control(format!("{base}/_llmock/reset"), json!({})).await;
    let models = models(&base, 1536);

    // Chat, not streamed and streamed (with include_usage).
    let answer = single(&models, "hello").await.unwrap();
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let (events, error) = stream(&models, "hello").await;
    assert!(error.is_none(), "{error:?}");
    assert!(!completed(&events).text().is_empty());
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Usage(u) if u.output_tokens > 0)),
        "the usage chunk arrived: {events:?}"
    );

    // A 429 with retry-after, then an answer: retried.
    scenario(json!([{"type": "fail", "status": 429, "retry_after": 1, "times": 1}])).await;
    assert!(single(&models, "after a 429").await.is_ok());
    // The same 429, without retries: RateLimited with the server's wait.
    scenario(json!([{"type": "fail", "status": 429, "retry_after": 1, "times": 1}])).await;
    let err = single(&no_retries(&models), "429").await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(1)),
        "{err}"
    );

    // Quota (llmock sends `type: rate_limit_error, code: insufficient_quota`): not retried.
    scenario(json!([{"type": "fail", "status": 429, "code": "insufficient_quota", "times": 1}]))
        .await;
    let err = single(&models, "quota").await.unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");

    // 500, 503 and 529 once each: retried to an answer.
    scenario(json!([
        {"type": "fail", "status": 500, "times": 1},
        {"type": "fail", "status": 503, "times": 1},
        {"type": "fail", "status": 529, "times": 1}
    ]))
    .await;
    assert!(single(&models, "after three 5xx").await.is_ok());

    // A 4xx: rejected, not retried.
    scenario(json!([{"type": "fail", "status": 400, "times": 1}])).await;
    let err = single(&models, "bad").await.unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400),
        "{err}"
    );

    // Truncation: re-run at the ceiling, still cut: OutputTruncated.
    scenario(json!([{"type": "reply", "text": "cut", "finish_reason": "length", "times": 2}]))
        .await;
    let err = single(&models, "truncate").await.unwrap_err();
    assert!(matches!(err, Error::OutputTruncated { .. }), "{err}");

    // Refusal.
    scenario(json!([{"type": "reply", "text": "No.", "finish_reason": "refusal", "times": 1}]))
        .await;
    let err = single(&models, "refuse").await.unwrap_err();
    assert!(matches!(err, Error::ProviderRefusal { .. }), "{err}");

    // A stream dropped after its first delta: interrupted, not retried.
    scenario(
        json!([{"type": "stream_fault", "kind": "disconnect", "after_chunks": 2, "times": 1}]),
    )
    .await;
    let (events, error) = stream(&models, "drop").await;
    assert!(!events.is_empty());
    assert!(
        matches!(error, Some(Error::StreamInterrupted { .. })),
        "{error:?}"
    );

    // Embeddings (llmock ignores `dimensions`: the core truncates, declared safe here).
    let texts: Vec<String> = vec!["one".into(), "two".into(), "three".into()];
    let vectors = models
        .embeddings("embed")
        .await
        .unwrap()
        .embed_batch(&texts, EmbeddingPurpose::Document)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 3);
    assert!(vectors.iter().all(|v| v.width() == 4 && unit(v.as_slice())));
}

#[tokio::test]
async fn aimock_chat_streams_embeddings_fixtures_and_one_shot_errors() {
    let Some(base) = peer("TOLLGATE_AIMOCK_URL") else {
        return;
    };
    let fresh = || models(&base, 4);
    let models = fresh();
    let error_once = |status: u16, body: Value| {
        control(
            format!("{base}/__aimock/error"),
            json!({"status": status, "body": body}),
        )
    };

    let answer = single(&models, "hello").await.unwrap();
    assert_eq!(answer.text(), "Answer from the conformance mock.");
    assert_eq!(answer.usage().input_tokens, 9);
    assert_eq!(answer.usage().output_tokens, 5);
    let (events, error) = stream(&models, "hello").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        completed(&events).text(),
        "Answer from the conformance mock."
    );

    // A tool call.
    let answer = single(&models, "conformance: use the tool").await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert!(
        matches!(&answer.blocks()[0], tollgate::Block::ToolUse { name, .. } if name == "lookup")
    );

    // Truncation, always: OutputTruncated after the re-run.
    let err = single(&models, "conformance: cut short").await.unwrap_err();
    assert!(matches!(err, Error::OutputTruncated { .. }), "{err}");

    // A dropped stream: a retryable failure (cut before content, or interrupted after).
    let (_, error) = stream(&no_retries(&models), "conformance: drop the stream").await;
    match error {
        Some(Error::StreamInterrupted { .. }) => {}
        Some(e) => assert!(e.is_retryable(), "{e}"),
        None => panic!("the stream should have been dropped"),
    }

    // One-shot errors (aimock takes a flat `{message, type, code}`). Its 429s also say
    // `x-ratelimit-remaining-*: 0` with a reset of up to `6m0s`, which rightly pauses the
    // model: each 429 case gets `Models` of its own so later cases do not wait.
    error_once(503, json!({"message": "busy", "type": "server_error"})).await;
    assert!(single(&models, "after a 503").await.is_ok());
    error_once(
        429,
        json!({"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}),
    )
    .await;
    let err = single(&fresh(), "quota").await.unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
    error_once(
        429,
        json!({"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}),
    )
    .await;
    let err = single(&no_retries(&fresh()), "429").await.unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
        "{err}"
    );

    // Embeddings: [3, 4, 0, 0] comes back unit length.
    let vectors = models
        .embeddings("embed")
        .await
        .unwrap()
        .embed_batch(&["a".to_owned(), "b".to_owned()], EmbeddingPurpose::Query)
        .await
        .unwrap();
    for v in vectors {
        assert_eq!(v.as_slice(), &[0.6, 0.8, 0.0, 0.0]);
    }
}
