//! xAI's differences from OpenAI's wire format, from fixtures of xAI's documented shapes
//! (the codec with the `xai` dialect, no I/O), and the conformance tier against llmock's
//! `/xai/v1` (skipped with a message unless `TOLLGATE_LLMOCK_URL` is set, failing then
//! only if `TOLLGATE_PEERS_REQUIRED` is).

use serde_json::{Value, json};
use tollgate::catalog::ModelEntry;
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::{ChunkDecoder, LlmRequest, Provider};
use tollgate::{
    Block, Catalog, DocumentSource, Error, LlmResponse, Message, Models, ProviderError, Reasoning,
    ReasoningEffort, Role, SamplingParams, StreamEvent,
};
use tollgate_openai::OutputLimitField;
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};
use tollgate_testkit::peers::url as peer;
use tollgate_xai::{PROVIDER, read_xai_error};

fn decode(body: &Value) -> LlmResponse {
    decode_response_in(body.to_string().as_bytes(), &PROVIDER.preset().dialect).unwrap()
}

fn answer(message: Value, usage: Value) -> Value {
    json!({"id": "a1", "object": "chat.completion", "created": 1, "model": "grok-3-mini",
           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
           "usage": usage, "system_fingerprint": "fp_1"})
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "a1", "object": "chat.completion.chunk", "created": 1, "model": "grok-3-mini",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// Feeds `chunks` (and `[DONE]`) to a decoder in xAI's dialect; the events.
fn decode_stream(chunks: &[Value]) -> Vec<StreamEvent> {
    let mut decoder = Chunks::default()
        .requiring_done(true)
        .in_dialect(PROVIDER.preset().dialect);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.chunk(&chunk.to_string()).unwrap());
    }
    events.extend(decoder.chunk("[DONE]").unwrap());
    events
}

fn completed(events: &[StreamEvent]) -> &LlmResponse {
    match events.last() {
        Some(StreamEvent::Completed(answer)) => answer,
        other => panic!("the stream did not complete: {other:?}"),
    }
}

/// xAI's usage as it documents it (a grok-4.1-fast-reasoning answer): 663 prompt tokens,
/// 654 of them cached; 50 completion tokens and 124 reasoning tokens counted apart
/// (`total_tokens` 837 = 663 + 50 + 124).
fn reasoning_usage() -> Value {
    json!({"completion_tokens": 50,
           "completion_tokens_details": {"accepted_prediction_tokens": 0, "audio_tokens": 0,
                                         "reasoning_tokens": 124, "rejected_prediction_tokens": 0},
           "cost_in_usd_ticks": 0, "num_sources_used": 0, "prompt_tokens": 663,
           "prompt_tokens_details": {"audio_tokens": 0, "cached_tokens": 654,
                                     "image_tokens": 0, "text_tokens": 663},
           "total_tokens": 837})
}

/// The documented answer of [`reasoning_usage`].
fn documented_answer() -> LlmResponse {
    let message = json!({"role": "assistant", "content": "I am Grok."});
    decode(&answer(message, reasoning_usage()))
}

#[test]
fn reasoning_tokens_counted_apart_are_added_to_the_output() {
    let usage = documented_answer().usage();
    assert_eq!(usage.output_tokens, 174, "50 completion + 124 reasoning");
}

#[test]
fn cached_prompt_tokens_are_cache_reads() {
    let usage = documented_answer().usage();
    assert_eq!(usage.input_tokens, 9, "663 prompt tokens, 654 cached");
    assert_eq!(usage.cache_read_tokens, 654);
}

/// Where `total_tokens` shows `completion_tokens` already holds the reasoning tokens,
/// they are not added twice.
#[test]
fn reasoning_tokens_already_in_the_completion_are_not_added_twice() {
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 174, "total_tokens": 184,
                       "completion_tokens_details": {"reasoning_tokens": 124}});
    let answer = decode(&answer(
        json!({"role": "assistant", "content": "ok"}),
        usage,
    ));
    assert_eq!(answer.usage().output_tokens, 174);
}

#[test]
fn a_streams_reasoning_tokens_are_added_to_its_output() {
    let mut last = chunk(json!({}), Some("stop"));
    last["usage"] = reasoning_usage();
    let events = decode_stream(&[chunk(json!({"content": "I am Grok."}), None), last]);
    assert_eq!(completed(&events).usage().output_tokens, 174);
}

/// grok-3-mini's answer (xAI's reasoning guide): `reasoning_content` is a thinking block
/// before the text, whole and streamed.
#[test]
fn grok_3_mini_reasoning_content_is_a_thinking_block_whole_and_streamed() {
    let message = json!({"role": "assistant", "content": "The result of 101 multiplied by 3 is 303.",
                         "reasoning_content": "101 * 3 = 303. 100 * 3 is 300, and 1 * 3 is 3."});
    let whole = decode(&answer(
        message,
        json!({"prompt_tokens": 20, "completion_tokens": 14}),
    ));
    let streamed = decode_stream(&[
        chunk(
            json!({"role": "assistant", "reasoning_content": "101 * 3 = 303."}),
            None,
        ),
        chunk(
            json!({"reasoning_content": " 100 * 3 is 300, and 1 * 3 is 3."}),
            None,
        ),
        chunk(
            json!({"content": "The result of 101 multiplied by 3 is 303."}),
            Some("stop"),
        ),
    ]);
    for answer in [&whole, completed(&streamed)] {
        assert!(
            matches!(&answer.blocks()[0], Block::Thinking { text, .. }
                if text == "101 * 3 = 303. 100 * 3 is 300, and 1 * 3 is 3."),
            "{:?}",
            answer.blocks()
        );
        assert_eq!(answer.text(), "The result of 101 multiplied by 3 is 303.");
    }
}

fn encode_effort(effort: ReasoningEffort) -> tollgate::Result<Value> {
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::effort(effort))
        .unwrap();
    let request = LlmRequest::new("m", vec![Message::user("hi")], vec![], params).unwrap();
    encode(&request)
}

fn encode(request: &LlmRequest) -> tollgate::Result<Value> {
    encode_request(
        request,
        &EncodeOptions {
            dialect: PROVIDER.preset().dialect,
            ..EncodeOptions::new("grok-3-mini", OutputLimitField::MaxCompletionTokens)
        },
    )
}

#[test]
fn reasoning_efforts_other_than_low_and_high_are_refused() {
    use ReasoningEffort::{Max, Medium, Minimal, None, XHigh};
    for effort in [None, Minimal, Medium, XHigh, Max] {
        let err = encode_effort(effort).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { .. }),
            "{effort:?}: {err:?}"
        );
        assert!(err.to_string().contains(effort.as_str()), "{err}");
        assert!(err.to_string().contains("grok-3-mini"), "{err}");
    }
}

#[test]
fn low_and_high_are_sent_as_reasoning_effort() {
    for effort in [ReasoningEffort::Low, ReasoningEffort::High] {
        let body = encode_effort(effort).unwrap();
        assert_eq!(body["reasoning_effort"], json!(effort.as_str()));
    }
}

#[test]
fn a_pdf_document_is_refused_naming_where_it_is() {
    let pdf = Message {
        role: Role::User,
        content: vec![Block::Document {
            source: DocumentSource::Base64 {
                media_type: "application/pdf".into(),
                data: "JVBERi0xLjQK".into(),
            },
            name: None,
            cache: None,
        }],
    };
    let request = LlmRequest::new("m", vec![pdf], vec![], SamplingParams::new()).unwrap();
    let err = encode(&request).unwrap_err();
    assert!(matches!(&err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("messages[0].content[0]"), "{err}");
}

/// xAI's own error body (as its API answers an unknown model): the code and the message
/// are kept, and the status decides.
#[test]
fn xai_code_and_error_bodies_are_read() {
    let body = json!({"code": "Some requested entity was not found",
        "error": "The model grok-beta does not exist or your team t-1 does not have access to it."});
    let wire = read_xai_error(404, body.to_string().as_bytes());
    assert_eq!(wire.code, "Some requested entity was not found");
    assert!(wire.message.starts_with("The model grok-beta"), "{wire:?}");
    let err = wire.verdict();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 404
            && e.message.contains("Some requested entity was not found")
            && e.message.contains("grok-beta")),
        "{err:?}"
    );
    let limited = json!({"code": "Some resource has been exhausted", "error": "Too many requests"});
    let err = read_xai_error(429, limited.to_string().as_bytes()).verdict();
    assert!(
        matches!(err, Error::Provider(ProviderError::RateLimited { .. })),
        "{err:?}"
    );
}

/// The `{"error": {…}}` shape (llmock's; OpenAI's) is read too.
#[test]
fn openai_shaped_error_bodies_are_read_too() {
    let body = json!({"error": {"message": "Bad request.", "type": "invalid_request_error",
                                "param": null, "code": "bad_request"}});
    let wire = read_xai_error(400, body.to_string().as_bytes());
    assert_eq!(
        (wire.kind.as_str(), wire.code.as_str()),
        ("invalid_request_error", "bad_request")
    );
}

#[test]
fn the_default_address_is_api_x_ai() {
    let model = ModelEntry::new("m", "xai", "grok-3-mini").with_credential("k");
    assert_eq!(
        PROVIDER.base_url(&model).as_deref(),
        Some("https://api.x.ai")
    );
}

/// A catalog with a decision model and an embeddings model of `xai`.
fn judge_and_embed() -> Models {
    let catalog = Catalog::from_toml_str(
        r#"
        [embeddings]
        width = 8

        [models.judge]
        provider = "xai"
        kind = "decision"
        name = "grok-3-mini"
        credential = "xai-main"
        rpm = 60

        [models.embed]
        provider = "xai"
        kind = "embeddings"
        name = "v1"
        credential = "xai-main"
        rpm = 60
        native_width = 8
        "#,
    )
    .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("xai-main", "xai-test"))
        .build()
        .unwrap()
}

/// The decision client asks for `top_logprobs: 20`, above the 0–8 xAI takes: refused
/// when the client is made, naming the option.
#[tokio::test]
async fn decisions_are_refused() {
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

// The conformance tier: llmock's xAI endpoints.

/// A model name no other test sends, so that scripted faults match only this test's
/// requests (llmock is shared by tests running in parallel).
const PEER_MODEL: &str = "tollgate-xai-conformance";

fn peer_models(base: &str) -> Models {
    let entry =
        ModelEntry::new("chat", "xai", PEER_MODEL).with_option("base_url", format!("{base}/xai"));
    tollgate_testkit::peers::llmock_models(PROVIDER, entry)
}

#[tokio::test]
async fn llmock_xai_chat_streams_tool_calls_and_scripted_faults() {
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

    // A 400: rejected with llmock's type and code, not retried.
    tollgate_testkit::peers::llmock_scenario(
        &base,
        json!([{"type": "fail", "status": 400, "times": 1, "match": only_ours}]),
    )
    .await;
    let err = chat.single_response(&ask("bad")).await.unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400
            && e.message.contains("invalid_request_error/bad_request")),
        "{err}"
    );
}
