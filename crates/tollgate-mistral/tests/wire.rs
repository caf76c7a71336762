//! Mistral's wire format: the contract kit on the preset, and each difference from
//! OpenAI's Chat Completions tested from fixtures of Mistral's documented shapes
//! (sources in `docs/providers/mistral.md`).

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::http::read_signals;
use tollgate::provider::{Signals, StreamDecoder};
use tollgate::{
    Block, Catalog, DocumentSource, Error, Json, LlmRequest, Message, Models, ProviderError, Role,
    SamplingParams, StopReason, StreamEvent, ToolChoice, ToolDefinition, Verbosity,
};
use tollgate_mistral::{PROVIDER, RATE_LIMITS};
use tollgate_openai::OutputLimitField;
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};

/// Mistral's error body: top level, `{"object": "error", "message", "type", "param", "code"}`.
fn mistral_error_body(kind: &str, code: Value, message: &str) -> Value {
    json!({"object": "error", "message": message, "type": kind, "param": null, "code": code})
}

mod contract {
    tollgate_testkit::provider_contract_tests!(
        tollgate_openai::testkit::OpenAiWire {
            error_body: super::mistral_error_body,
            ..tollgate_openai::testkit::OpenAiWire::new(tollgate_mistral::PROVIDER)
        };
        skip {
            a_context_window_stop_is_typed_and_names_the_model:
                "the OpenAI script has no full-window stop; Mistral's `model_length` is tested in this file",
        }
        partly {
            a_reported_overflow_moves_to_a_larger_window_when_opted_in:
                "the full-window stop (scripted by no OpenAI-like wire); the overflow error is checked",
            an_embeddings_request_carries_the_purpose_and_the_width:
                "the purpose (Mistral's embeddings take none); the width is checked",
        }
    );
}

fn options() -> EncodeOptions {
    EncodeOptions {
        max_tokens: Some(100),
        dialect: PROVIDER.preset().dialect,
        ..EncodeOptions::new("mistral-large-latest", OutputLimitField::MaxTokens)
    }
}

fn city() -> ToolDefinition {
    ToolDefinition::new(
        "City",
        "Names a city",
        Json::new(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
    )
}

fn body(params: SamplingParams, tools: Vec<ToolDefinition>) -> tollgate::Result<Value> {
    let request = LlmRequest::new("m", vec![Message::user("hi")], tools, params)?;
    encode_request(&request, &options())
}

/// A one-line request's body, encoded with `options`.
fn body_with(options: EncodeOptions) -> Value {
    let request = LlmRequest::new(
        "m",
        vec![Message::user("hi")],
        vec![],
        SamplingParams::new(),
    );
    encode_request(&request.unwrap(), &options).unwrap()
}

fn answer(message: Value, finish: &str) -> Vec<u8> {
    json!({"id": "cmpl-1", "object": "chat.completion", "created": 1,
           "model": "mistral-large-latest",
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
    .into_bytes()
}

/// A whole answer decoded in the preset's dialect.
fn decode(body: &[u8]) -> tollgate::Result<tollgate::LlmResponse> {
    decode_response_in(body, &PROVIDER.preset().dialect)
}

fn decoder() -> StreamDecoder<Chunks> {
    StreamDecoder::with(
        Chunks::default()
            .requiring_done(true)
            .in_dialect(PROVIDER.preset().dialect),
    )
}

fn chunk(delta: Value, finish: Value) -> String {
    json!({"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1,
           "model": "mistral-large-latest",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

#[test]
fn a_required_tool_choice_is_sent_as_any() {
    let b = body(
        SamplingParams::new().with_tool_choice(ToolChoice::Required),
        vec![city()],
    )
    .unwrap();
    assert_eq!(b["tool_choice"], json!("any"));
    let forced = body(
        SamplingParams::new().with_tool_choice(ToolChoice::Tool("City".into())),
        vec![city()],
    )
    .unwrap();
    assert_eq!(
        forced["tool_choice"],
        json!({"type": "function", "function": {"name": "City"}})
    );
}

#[test]
fn foreign_tool_call_ids_are_sent_as_nine_letters_or_digits_in_the_call_and_its_result() {
    let turn = |id: &str| {
        let call = Block::ToolUse {
            id: id.into(),
            name: "City".into(),
            input: Json::new(json!({"name": "Paris"})),
            cache: None,
        };
        let result = Block::ToolResult {
            tool_use_id: id.into(),
            content: vec![Block::text("sunny")],
            is_error: false,
            cache: None,
        };
        let assistant = Message {
            role: Role::Assistant,
            content: vec![call],
        };
        let user = Message {
            role: Role::User,
            content: vec![result],
        };
        vec![Message::user("weather?"), assistant, user]
    };
    for (id, sent) in [
        ("call_PTLP8xhu3uwZk4l3nlnrrJha", None),
        ("toolu_01", None),
        ("D681PevKs", Some("D681PevKs")),
    ] {
        let request = LlmRequest::new("m", turn(id), vec![city()], SamplingParams::new()).unwrap();
        let b = encode_request(&request, &options()).unwrap();
        let call_id = b["messages"][1]["tool_calls"][0]["id"].as_str().unwrap();
        assert_eq!(b["messages"][2]["tool_call_id"], json!(call_id), "{b}");
        assert!(
            call_id.len() == 9 && call_id.bytes().all(|c| c.is_ascii_alphanumeric()),
            "{id} sent as {call_id}"
        );
        if let Some(sent) = sent {
            assert_eq!(call_id, sent);
        }
    }
    assert_ne!(
        tollgate_mistral::tool_call_id("call_a"),
        tollgate_mistral::tool_call_id("call_b")
    );
}

#[test]
fn the_seed_is_sent_as_random_seed() {
    let b = body(SamplingParams::new().with_seed(42), vec![]).unwrap();
    assert_eq!(b["random_seed"], json!(42));
    assert!(b.get("seed").is_none(), "{b}");
}

#[test]
fn the_output_limit_is_max_tokens_and_streams_send_no_stream_options() {
    let quirks = PROVIDER.preset().quirks;
    let b = body_with(EncodeOptions {
        stream: true,
        stream_usage: quirks.stream_usage,
        output_limit_field: quirks.output_limit_field,
        ..options()
    });
    assert_eq!(b["max_tokens"], json!(100));
    assert_eq!(b["stream"], json!(true));
    assert!(b.get("stream_options").is_none(), "{b}");
}

#[test]
fn safe_prompt_is_sent_from_extra_body() {
    let mut extra = serde_json::Map::new();
    extra.insert("safe_prompt".into(), json!(true));
    let b = body_with(EncodeOptions {
        extra_body: extra,
        ..options()
    });
    assert_eq!(b["safe_prompt"], json!(true));
}

#[test]
fn verbosity_is_refused_naming_it() {
    let err = body(
        SamplingParams::new().with_verbosity(Verbosity::High),
        vec![],
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedSetting { provider, .. } if provider == "mistral"),
        "{err}"
    );
    assert!(err.to_string().contains("verbosity"), "{err}");
}

#[test]
fn a_document_given_by_its_bytes_is_refused_naming_the_block() {
    let message = Message {
        role: Role::User,
        content: vec![
            Block::text("read this"),
            Block::Document {
                source: DocumentSource::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBERi0=".into(),
                },
                name: None,
                cache: None,
            },
        ],
    };
    let request = LlmRequest::new("m", vec![message], vec![], SamplingParams::new()).unwrap();
    let err = encode_request(&request, &options()).unwrap_err();
    assert!(matches!(&err, Error::UnsupportedSetting { .. }), "{err:?}");
    assert!(err.to_string().contains("messages[0].content[1]"), "{err}");
}

#[test]
fn model_length_is_a_context_window_stop() {
    let a = decode(&answer(
        json!({"role": "assistant", "content": "cut"}),
        "model_length",
    ))
    .unwrap();
    assert_eq!(a.stop_reason(), StopReason::ContextWindowExceeded);
    let mut d = decoder();
    d.event(&chunk(json!({"content": "cut"}), Value::Null))
        .unwrap();
    assert_eq!(
        d.event(&chunk(json!({}), json!("model_length"))).unwrap(),
        vec![StreamEvent::Stop(StopReason::ContextWindowExceeded)]
    );
}

#[test]
fn an_error_finish_in_a_stream_is_a_server_error() {
    let mut d = decoder();
    d.event(&chunk(json!({"content": "par"}), Value::Null))
        .unwrap();
    let err = d
        .event(&chunk(json!({"content": "tial"}), json!("error")))
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Server { .. })),
        "{err}"
    );
}

#[test]
fn an_error_finish_in_a_whole_answer_is_a_retryable_malformed_answer_naming_it() {
    let err = decode(&answer(
        json!({"role": "assistant", "content": "par"}),
        "error",
    ))
    .unwrap_err();
    assert!(
        matches!(&err, Error::Provider(ProviderError::Malformed { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("error"), "{err}");
    assert!(err.is_retryable(), "{err}");
}

#[test]
fn a_top_level_error_object_in_a_stream_fails_it_by_its_type() {
    let mut d = decoder();
    d.event(&chunk(json!({"content": "hi"}), Value::Null))
        .unwrap();
    let err = d
        .event(&mistral_error_body("invalid_request_error", Value::Null, "Bad request").to_string())
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProviderRequest(e) if e.status == 400),
        "{err}"
    );
}

#[test]
fn a_top_level_error_body_is_read_by_status_type_and_code() {
    let read = PROVIDER.preset().dialect.error;
    // As Mistral answers a 429 (mistralai/client-ts and raycast/extensions#31107).
    let limited = read(
        429,
        mistral_error_body("rate_limited", json!("1300"), "Rate limit exceeded")
            .to_string()
            .as_bytes(),
    );
    assert_eq!(
        (limited.kind.as_str(), limited.code.as_str()),
        ("rate_limited", "1300")
    );
    assert!(matches!(
        limited.verdict(),
        Error::Provider(ProviderError::RateLimited { .. })
    ));
    // A 422 whose message is pydantic's list of problems, not text.
    let invalid = read(
        422,
        json!({"object": "error", "message": {"detail": [{"loc": ["body", "seed"]}]},
               "type": "invalid_request_message_error", "param": null, "code": null})
        .to_string()
        .as_bytes(),
    );
    assert_eq!(invalid.kind, "invalid_request_message_error");
    assert!(matches!(invalid.verdict(), Error::ProviderRequest(e) if e.status == 422));
}

#[test]
fn thinking_chunks_are_read_as_thinking_and_text_chunks_as_text() {
    let content = json!([
        {"type": "thinking", "thinking": [{"type": "text", "text": "Paris, surely."}]},
        {"type": "text", "text": "Paris."}
    ]);
    let a = decode(&answer(
        json!({"role": "assistant", "content": content}),
        "stop",
    ))
    .unwrap();
    assert!(
        matches!(&a.blocks()[0], Block::Thinking { text, .. } if text == "Paris, surely."),
        "{:?}",
        a.blocks()
    );
    assert_eq!(a.text(), "Paris.");

    let mut d = decoder();
    let thought = d
        .event(&chunk(
            json!({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Hm."}]}]}),
            Value::Null,
        ))
        .unwrap();
    assert!(
        matches!(&thought[..], [StreamEvent::ThinkingDelta { text, .. }] if text == "Hm."),
        "{thought:?}"
    );
    d.event(&chunk(
        json!({"content": [{"type": "text", "text": "Yes."}]}),
        json!("stop"),
    ))
    .unwrap();
    let done = d.event("[DONE]").unwrap();
    assert!(
        matches!(&done[..], [StreamEvent::Completed(a)] if a.text() == "Yes."),
        "{done:?}"
    );
}

#[test]
fn the_per_minute_rate_limit_headers_are_read_and_the_monthly_ones_are_not() {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("x-ratelimit-limit-req-minute", "720"),
        ("x-ratelimit-remaining-req-minute", "717"),
        ("x-ratelimit-limit-tokens-minute", "5000000"),
        ("x-ratelimit-remaining-tokens-minute", "4999911"),
        ("x-ratelimit-limit-tokens-month", "900000001"),
        ("x-ratelimit-remaining-tokens-month", "900000002"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    let signals = Signals::default();
    read_signals(&headers, RATE_LIMITS, &signals);
    // The values are the pipeline's to read; their debug form shows what was taken.
    let taken = format!("{signals:?}");
    for expected in [
        "(Requests, 720)",
        "(Requests, 717)",
        "(Tokens, 5000000)",
        "(Tokens, 4999911)",
    ] {
        assert!(taken.contains(expected), "{expected} in {taken}");
    }
    assert!(!taken.contains("90000000"), "{taken}");
}

const CRATE_DOC: &str = include_str!("../src/lib.rs");
const PAGE: &str = include_str!("../../../docs/providers/mistral.md");

/// The first ```toml block of `text`, a crate doc's `//! ` prefixes taken off.
fn catalog_in(text: &str) -> String {
    let text = text.replace("//! ", "").replace("//!", "");
    let block = text.split("```toml\n").nth(1).unwrap_or_default();
    block.split("```").next().unwrap_or_default().to_owned()
}

fn models_of(catalog: &str) -> Models {
    let credentials = MemoryCredentialStore::new().with("mistral-main", "key");
    let catalog = Catalog::from_toml_str(catalog).unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(credentials)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_catalog_examples_load_and_their_models_get_transports() {
    for text in [CRATE_DOC, PAGE] {
        let models = models_of(&catalog_in(text));
        assert!(models.chat("mistral").await.is_ok());
        assert!(models.embeddings("embed").await.is_ok());
    }
}

fn models() -> Models {
    let judge = "[models.judge]\nprovider = \"mistral\"\nkind = \"decision\"\n\
                 name = \"mistral-small-latest\"\ncredential = \"mistral-main\"\n";
    models_of(&(catalog_in(CRATE_DOC) + judge))
}

#[tokio::test]
async fn decisions_are_refused_since_mistral_returns_no_logprobs() {
    let err = models().decision("judge").await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}
