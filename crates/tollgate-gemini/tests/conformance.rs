//! The conformance tier: the `gemini` and `vertex` transports against two third-party
//! mock servers, llmock (PyPI; Gemini under `/gemini/v1beta`) and aimock (npm; Gemini
//! under `/v1beta`, Vertex under `/v1/projects/…`), started on 127.0.0.1 by
//! `scripts/peers.sh` (which `cargo xtask test-all` runs before the tests).
//!
//! The servers' URLs come from `TOLLGATE_LLMOCK_URL` and `TOLLGATE_AIMOCK_URL`. Without
//! them the tests say so and pass, unless `TOLLGATE_PEERS_REQUIRED` is set (xtask sets
//! it), where a missing server fails the test. What neither mock fakes (`RetryInfo`,
//! `QuotaFailure`, thought signatures, prompt blocks, CRLF, mid-stream errors,
//! `batchEmbedContents`, Vertex `:predict`) is covered by local fixtures in `http.rs`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{EmbeddingCapabilities, Limits, ModelEntry, ModelKind};
use tollgate::credentials::{MemoryCredentialStore, Secret};
use tollgate::pipeline::{PipelineConfig, RetryPolicy};
use tollgate::{
    Catalog, Conversation, EmbeddingPurpose, Error, JobContext, LlmResponse, Models, ProviderError,
    SamplingParams, StopReason, StreamEvent,
};
use tollgate_gemini::{GeminiProvider, TokenSource};
use tollgate_testkit::peers::url as peer;

const KEY_ID: &str = "peer-key";

/// A fixed token: the mocks check no authentication, and no test reaches Google.
#[derive(Debug)]
struct StaticToken;

#[tollgate::async_trait]
impl TokenSource for StaticToken {
    async fn access_token(&self, _credential: Option<&str>) -> tollgate::Result<Secret> {
        Ok(Secret::new("ya29.peer-test"))
    }
}

fn limits() -> Limits {
    Limits {
        rpm: 6000,
        input_tpm: 100_000_000,
        ..Limits::default()
    }
}

/// `chat` (gemini), `embed` (gemini, `:embedContent`) and `vertex-chat` at `base_url`.
fn models(base_url: &str) -> Models {
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("chat", "gemini", "gemini-2.5-flash")
                .with_credential(KEY_ID)
                .with_output_tokens(200, 50)
                .with_limits(limits())
                .with_option("base_url", base_url),
        )
        .model(
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
                .with_option("embedding_api", "embed_content"),
        )
        .model(
            ModelEntry::new("vertex-chat", "vertex", "gemini-2.5-pro")
                .with_output_tokens(200, 50)
                .with_limits(limits())
                .with_option("base_url", base_url)
                .with_option("project", "peer-project")
                .with_option("location", "us-central1"),
        )
        .embedding_width(4)
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with(KEY_ID, "AIza-peer-test"))
        .provider(GeminiProvider::vertex_with_tokens(Arc::new(StaticToken)))
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

fn ask(model: &str, text: &str) -> tollgate::LlmRequest {
    Conversation::new()
        .user(text)
        .request(model, SamplingParams::new())
        .unwrap()
}

async fn single(models: &Models, model: &str, text: &str) -> tollgate::Result<LlmResponse> {
    models
        .chat(model)
        .await?
        .single_response(&ask(model, text))
        .await
}

async fn stream(models: &Models, model: &str, text: &str) -> (Vec<StreamEvent>, Option<Error>) {
    let mut s = match models
        .chat(model)
        .await
        .unwrap()
        .stream_response(&ask(model, text))
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

#[tokio::test]
async fn llmock_gemini_chat_streams_and_scripted_faults() {
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
    let models = models(&format!("{base}/gemini"));

    let answer = single(&models, "chat", "hello").await.unwrap();
    assert!(!answer.text().is_empty());
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert!(answer.usage().output_tokens > 0);
    // `alt=sse` switches llmock to SSE (a JSON array otherwise, as the real API does).
    let (events, error) = stream(&models, "chat", "hello").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(completed(&events).text(), answer.text());

    // A 429 with retry-after, then an answer: retried.
    scenario(json!([{"type": "fail", "status": 429, "retry_after": 1, "times": 1}])).await;
    assert!(single(&models, "chat", "after a 429").await.is_ok());
    // The same 429, without retries: RateLimited with the server's wait.
    scenario(json!([{"type": "fail", "status": 429, "retry_after": 1, "times": 1}])).await;
    let err = single(&no_retries(&models), "chat", "429")
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(1)),
        "{err}"
    );

    // 500, 503 and 504 once each: retried to an answer.
    scenario(json!([
        {"type": "fail", "status": 500, "times": 1},
        {"type": "fail", "status": 503, "times": 1},
        {"type": "fail", "status": 504, "times": 1}
    ]))
    .await;
    assert!(single(&models, "chat", "after three 5xx").await.is_ok());

    // 400 and 403: rejected, not retried.
    for status in [400, 403] {
        scenario(json!([{"type": "fail", "status": status, "times": 1}])).await;
        let err = single(&models, "chat", "bad").await.unwrap_err();
        assert!(
            matches!(&err, Error::ProviderRequest(e) if e.status == status),
            "{err}"
        );
    }

    // MAX_TOKENS: re-run at the ceiling, still cut: OutputTruncated.
    scenario(json!([{"type": "reply", "text": "cut", "finish_reason": "length", "times": 2}]))
        .await;
    let err = single(&models, "chat", "truncate").await.unwrap_err();
    assert!(matches!(err, Error::OutputTruncated { .. }), "{err}");

    // A stream dropped after its first chunks: interrupted, not retried.
    scenario(
        json!([{"type": "stream_fault", "kind": "disconnect", "after_chunks": 2, "times": 1}]),
    )
    .await;
    let (events, error) = stream(&models, "chat", "drop").await;
    assert!(!events.is_empty());
    assert!(
        matches!(error, Some(Error::StreamInterrupted { .. })),
        "{error:?}"
    );
}

#[tokio::test]
async fn aimock_gemini_and_vertex_routes_fixtures_and_embeddings() {
    let Some(base) = peer("TOLLGATE_AIMOCK_URL") else {
        return;
    };
    let models = models(&base);

    for model in ["chat", "vertex-chat"] {
        let answer = single(&models, model, "hello").await.unwrap();
        assert_eq!(answer.text(), "Answer from the conformance mock.");
        assert_eq!(
            (answer.usage().input_tokens, answer.usage().output_tokens),
            (9, 5)
        );
        let (events, error) = stream(&models, model, "hello").await;
        assert!(error.is_none(), "{model}: {error:?}");
        assert_eq!(
            completed(&events).text(),
            "Answer from the conformance mock."
        );
    }

    // Truncation, always: OutputTruncated after the re-run.
    let err = single(&models, "chat", "conformance: cut short")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::OutputTruncated { .. }), "{err}");

    // aimock ends a tool call with `finishReason: FUNCTION_CALL`, which real Gemini never
    // sends (it sends STOP): an unknown finish reason is a rejection, never retried.
    let err = single(&models, "vertex-chat", "conformance: use the tool")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.message.contains("FUNCTION_CALL")),
        "{err}"
    );

    // A one-shot 503 (aimock's status is the fixture's type): retried.
    control(
        format!("{base}/__aimock/error"),
        json!({"status": 503, "body": {"message": "busy", "type": "UNAVAILABLE"}}),
    )
    .await;
    assert!(single(&models, "chat", "after a 503").await.is_ok());

    // `:embedContent`, one text per request: [3, 4, 0, 0] comes back unit length.
    let vectors = models
        .embeddings("embed")
        .await
        .unwrap()
        .embed_batch(&["a".to_owned(), "b".to_owned()], EmbeddingPurpose::Query)
        .await
        .unwrap();
    assert_eq!(vectors.len(), 2);
    for v in vectors {
        assert_eq!(v.as_slice(), &[0.6, 0.8, 0.0, 0.0]);
    }
}
