//! Groq's differences from OpenAI's wire format, from fixtures of Groq's documented
//! shapes (the codec with the `groq` dialect, no I/O), and the conformance tier against
//! llmock's `/groq/openai/v1` (skipped with a message unless `TOLLGATE_LLMOCK_URL` is
//! set, failing then only if `TOLLGATE_PEERS_REQUIRED` is).

use serde_json::{Value, json};
use tollgate::catalog::ModelEntry;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::{ChunkDecoder, LlmRequest, Provider};
use tollgate::{
    Block, Catalog, DocumentSource, Error, Message, Models, ProviderError, Reasoning,
    ReasoningEffort, Role, SamplingParams, StreamEvent,
};
use tollgate_groq::{PROVIDER, read_groq_error};
use tollgate_openai::OutputLimitField;
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};
use tollgate_testkit::peers::url as peer;

fn request(params: SamplingParams) -> LlmRequest {
    LlmRequest::new("m", vec![Message::user("hi")], vec![], params).unwrap()
}

fn encode(request: &LlmRequest) -> tollgate::Result<Value> {
    encode_request(
        request,
        &EncodeOptions {
            dialect: PROVIDER.preset().dialect,
            ..EncodeOptions::new("qwen/qwen3-32b", OutputLimitField::MaxCompletionTokens)
        },
    )
}

/// Feeds `chunks` (and `[DONE]`) to a decoder in Groq's dialect; the events.
fn decode_stream(chunks: &[Value]) -> tollgate::Result<Vec<StreamEvent>> {
    let mut decoder = Chunks::default()
        .requiring_done(true)
        .in_dialect(PROVIDER.preset().dialect);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.chunk(&chunk.to_string())?);
    }
    events.extend(decoder.chunk("[DONE]")?);
    Ok(events)
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
           "model": "llama-3.1-8b-instant",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
           "x_groq": {"id": "req_01"}})
}

fn completed(events: &[StreamEvent]) -> &tollgate::LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(answer)) => answer,
        other => panic!("the stream did not complete: {other:?}"),
    }
}

/// Groq's last chunk, as its SDK documents it: the finish reason, and the stream's
/// usage in `x_groq.usage` (no top-level `usage`).
#[test]
fn stream_usage_in_x_groq_is_the_answers_usage() {
    let mut last = chunk(json!({}), Some("stop"));
    last["x_groq"] = json!({"id": "req_01", "usage": {
        "queue_time": 0.02, "prompt_tokens": 24, "prompt_time": 0.001,
        "completion_tokens": 7, "completion_time": 0.01, "total_tokens": 31, "total_time": 0.011,
        "prompt_tokens_details": {"cached_tokens": 4}}});
    let events = decode_stream(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hello"}), None),
        last,
    ])
    .unwrap();
    let usage = completed(&events).usage();
    assert_eq!(usage.input_tokens, 20, "24 prompt tokens, 4 of them cached");
    assert_eq!(usage.cache_read_tokens, 4);
    assert_eq!(usage.output_tokens, 7);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Usage(u) if u.output_tokens == 7)),
        "{events:?}"
    );
}

/// A top-level `usage` (the `include_usage` chunk) is kept over `x_groq.usage`.
#[test]
fn a_top_level_usage_is_kept_over_x_groq_usage() {
    let mut last = chunk(json!({}), Some("stop"));
    last["x_groq"]["usage"] = json!({"prompt_tokens": 1, "completion_tokens": 1});
    last["usage"] = json!({"prompt_tokens": 30, "completion_tokens": 9});
    let events = decode_stream(&[chunk(json!({"content": "Hi"}), None), last]).unwrap();
    assert_eq!(completed(&events).usage().output_tokens, 9);
}

/// `x_groq.error` says why a stream was stopped early: a server error, never a
/// complete answer.
#[test]
fn a_stream_stopped_by_x_groq_error_fails_as_a_server_error() {
    let mut stopped = chunk(json!({}), None);
    stopped["x_groq"]["error"] = json!("stream stopped: internal error");
    let err = decode_stream(&[chunk(json!({"content": "Hel"}), None), stopped]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Server { status: 500, .. })
        ),
        "{err:?}"
    );
}

/// A reasoning model's answer (`reasoning_format: parsed`, or gpt-oss's default):
/// `message.reasoning` is a thinking block before the text, whole and streamed.
#[test]
fn groq_reasoning_is_a_thinking_block_whole_and_streamed() {
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
        "model": "qwen/qwen3-32b",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
            "message": {"role": "assistant", "reasoning": "2 and 2 make 4.", "content": "4"}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32,
                  "completion_tokens_details": {"reasoning_tokens": 14}},
        "x_groq": {"id": "req_01"}});
    let answer =
        decode_response_in(body.to_string().as_bytes(), &PROVIDER.preset().dialect).unwrap();
    assert!(
        matches!(&answer.blocks()[0], Block::Thinking { text, .. } if text == "2 and 2 make 4."),
        "{:?}",
        answer.blocks()
    );
    assert_eq!(answer.text(), "4");
    assert_eq!(
        answer.usage().output_tokens,
        20,
        "reasoning tokens included"
    );

    let events = decode_stream(&[
        chunk(json!({"role": "assistant", "reasoning": "2 and 2"}), None),
        chunk(json!({"reasoning": " make 4."}), None),
        chunk(json!({"content": "4"}), Some("stop")),
    ])
    .unwrap();
    let answer = completed(&events);
    assert!(
        matches!(&answer.blocks()[0], Block::Thinking { text, .. } if text == "2 and 2 make 4."),
        "{:?}",
        answer.blocks()
    );
}

#[test]
fn efforts_groq_has_no_word_for_are_refused_before_sending() {
    for effort in [
        ReasoningEffort::Minimal,
        ReasoningEffort::XHigh,
        ReasoningEffort::Max,
    ] {
        let params = SamplingParams::new()
            .with_reasoning(Reasoning::effort(effort))
            .unwrap();
        let err = encode(&request(params)).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { .. }),
            "{effort:?}: {err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(effort.as_str()), "{text}");
        assert!(text.contains("qwen/qwen3-32b"), "names the model: {text}");
    }
}

#[test]
fn none_low_medium_and_high_are_sent_as_reasoning_effort() {
    for effort in [
        ReasoningEffort::None,
        ReasoningEffort::Low,
        ReasoningEffort::Medium,
        ReasoningEffort::High,
    ] {
        let params = SamplingParams::new()
            .with_reasoning(Reasoning::effort(effort))
            .unwrap();
        let body = encode(&request(params)).unwrap();
        assert_eq!(body["reasoning_effort"], json!(effort.as_str()));
    }
}

#[test]
fn a_pdf_document_is_refused_naming_where_it_is() {
    let pdf = Message {
        role: Role::User,
        content: vec![
            Block::text("Summarize:"),
            Block::Document {
                source: DocumentSource::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBERi0xLjQK".into(),
                },
                name: Some("report.pdf".into()),
                cache: None,
            },
        ],
    };
    let request = LlmRequest::new("m", vec![pdf], vec![], SamplingParams::new()).unwrap();
    let err = encode(&request).unwrap_err();
    assert!(matches!(&err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("messages[0].content[1]"), "{err}");
}

/// The flex tier's "no capacity now" answer, as Groq documents it (status 498, error
/// `capacity_exceeded`): overloaded, so the pipeline backs off and retries.
#[test]
fn status_498_capacity_exceeded_is_overloaded() {
    let body = json!({"error": {"message": "Flex tier capacity exceeded. This is a known issue.",
                                "type": "capacity_exceeded", "code": "capacity_exceeded"}});
    let err = read_groq_error(498, body.to_string().as_bytes()).verdict();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::Overloaded { status: 498, .. })
        ),
        "{err:?}"
    );
}

#[test]
fn the_default_address_is_groqs_openai_path() {
    let model = ModelEntry::new("m", "groq", "llama-3.1-8b-instant").with_credential("k");
    assert_eq!(
        PROVIDER.base_url(&model).as_deref(),
        Some("https://api.groq.com/openai")
    );
    assert_eq!(PROVIDER.preset().paths.chat, "/v1/chat/completions");
}

/// A catalog with a decision model and an embeddings model of `groq`.
fn judge_and_embed() -> Models {
    let catalog = Catalog::from_toml_str(
        r#"
        [embeddings]
        width = 8

        [models.judge]
        provider = "groq"
        kind = "decision"
        name = "llama-3.1-8b-instant"
        credential = "groq-main"
        rpm = 30

        [models.embed]
        provider = "groq"
        kind = "embeddings"
        name = "nomic-embed-text-v1_5"
        credential = "groq-main"
        rpm = 30
        native_width = 8
        "#,
    )
    .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("groq-main", "gsk_test"))
        .build()
        .unwrap()
}

/// Groq returns no logprobs ("not yet supported by any of our models"), which the
/// decision client reads: refused when the client is made, naming the option.
#[tokio::test]
async fn decisions_are_refused_since_groq_returns_no_logprobs() {
    let err = judge_and_embed().decision("judge").await.err().unwrap();
    assert!(matches!(&err, Error::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("logprobs"), "{err}");
}

#[tokio::test]
async fn embeddings_models_are_refused() {
    let err = judge_and_embed().embeddings("embed").await.err().unwrap();
    assert!(
        matches!(&err, Error::Unsupported { capability, .. } if capability == "embeddings"),
        "{err:?}"
    );
}

// The conformance tier: llmock's Groq endpoints.

/// A model name no other test sends, so that scripted faults match only this test's
/// requests (llmock is shared by tests running in parallel).
const PEER_MODEL: &str = "tollgate-groq-conformance";

fn peer_models(base: &str) -> Models {
    let entry = ModelEntry::new("chat", "groq", PEER_MODEL)
        .with_option("base_url", format!("{base}/groq/openai"));
    tollgate_testkit::peers::llmock_models(PROVIDER, entry)
}

#[tokio::test]
async fn llmock_groq_chat_streams_tool_calls_and_scripted_faults() {
    let Some(base) = peer("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let models = peer_models(&base);
    tollgate_testkit::peers::llmock_chat_tools_and_a_429(&models, &base, PEER_MODEL).await;
    let only_ours = json!({"model": PEER_MODEL});
    let chat = models.chat("chat").await.unwrap();
    let ask = |text: &str| {
        LlmRequest::new(
            "chat",
            vec![Message::user(text)],
            vec![],
            SamplingParams::new(),
        )
        .unwrap()
    };

    // A flex-tier 498: overloaded, retried to an answer.
    tollgate_testkit::peers::llmock_scenario(
        &base,
        json!([{"type": "fail", "status": 498, "times": 1, "match": only_ours}]),
    )
    .await;
    assert!(chat.single_response(&ask("after a 498")).await.is_ok());
}
