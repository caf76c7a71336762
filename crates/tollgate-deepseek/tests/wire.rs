//! DeepSeek's wire format: the contract kit on the preset, and each difference from
//! OpenAI's Chat Completions tested from fixtures of DeepSeek's documented shapes
//! (sources in `docs/providers/deepseek.md`). DeepSeek has no llmock endpoint.

use serde_json::{Value, json};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::StreamDecoder;
use tollgate::{
    Block, Catalog, DocumentSource, Error, ImageSource, Json, LlmRequest, Message, Models,
    ProviderError, ResponseShape, Role, SamplingParams, StopReason, StreamEvent, ToolDefinition,
    Verbosity,
};
use tollgate_deepseek::{PROVIDER, REASONER};
use tollgate_openai::OutputLimitField;
use tollgate_openai::codec::{Chunks, EncodeOptions, decode_response_in, encode_request};

mod contract {
    tollgate_testkit::provider_contract_tests!(
        tollgate_openai::testkit::OpenAiWire::new(tollgate_deepseek::PROVIDER);
        skip {
            a_context_window_stop_is_typed_and_names_the_model:
                "DeepSeek has no full-window stop reason",
            rate_limit_headers_set_the_limiter_buckets:
                "DeepSeek sends no rate-limit headers",
            a_failed_embeddings_request_is_resent_alone: "DeepSeek has no embeddings API",
            an_embeddings_request_carries_the_purpose_and_the_width:
                "DeepSeek has no embeddings API",
            embeddings_are_sent_in_batches_of_max_batch_one_reservation_each:
                "DeepSeek has no embeddings API",
            the_secret_never_shows_in_embeddings_errors: "DeepSeek has no embeddings API",
        }
        partly {
            a_reported_overflow_moves_to_a_larger_window_when_opted_in:
                "the full-window stop (DeepSeek has none); the overflow error is checked",
        }
    );
}

fn options(model: &str) -> EncodeOptions {
    EncodeOptions {
        max_tokens: Some(100),
        dialect: PROVIDER.preset().dialect,
        ..EncodeOptions::new(model, OutputLimitField::MaxTokens)
    }
}

fn encode(model: &str, messages: Vec<Message>, params: SamplingParams) -> tollgate::Result<Value> {
    let tools = vec![ToolDefinition::new(
        "lookup",
        "Looks a word up",
        Json::new(json!({"type": "object", "properties": {"word": {"type": "string"}}})),
    )];
    let request = LlmRequest::new("m", messages, tools, params)?;
    encode_request(&request, &options(model))
}

fn answer(message: Value, finish: &str, usage: Value) -> Vec<u8> {
    json!({"id": "5f6a", "object": "chat.completion", "created": 1, "model": "deepseek-chat",
           "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
           "usage": usage, "system_fingerprint": "fp_1"})
    .to_string()
    .into_bytes()
}

/// DeepSeek's usage: `prompt_tokens` = hits + misses, and OpenAI's `cached_tokens` beside.
fn usage(hits: u64, misses: u64) -> Value {
    json!({"prompt_tokens": hits + misses, "completion_tokens": 5,
           "total_tokens": hits + misses + 5, "prompt_tokens_details": {"cached_tokens": 0},
           "prompt_cache_hit_tokens": hits, "prompt_cache_miss_tokens": misses})
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
    json!({"id": "5f6a", "object": "chat.completion.chunk", "created": 1, "model": "deepseek-reasoner",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}]})
    .to_string()
}

#[test]
fn cache_hit_tokens_are_cache_reads() {
    let a = decode(&answer(
        json!({"role": "assistant", "content": "hi"}),
        "stop",
        usage(60, 40),
    ))
    .unwrap();
    let u = a.usage();
    assert_eq!(
        (u.cache_read_tokens, u.input_tokens, u.output_tokens),
        (60, 40, 5)
    );

    let mut d = decoder();
    d.event(&chunk(json!({"content": "hi"}), Value::Null))
        .unwrap();
    let last = json!({"id": "5f6a", "object": "chat.completion.chunk", "created": 1,
                      "model": "deepseek-chat", "choices": [], "usage": usage(30, 10)});
    let events = d.event(&last.to_string()).unwrap();
    assert!(
        matches!(&events[..], [StreamEvent::Usage(u)] if u.cache_read_tokens == 30 && u.input_tokens == 10),
        "{events:?}"
    );
}

#[test]
fn reasoning_content_is_read_as_thinking_whole_and_streamed() {
    let a = decode(&answer(
        json!({"role": "assistant", "content": "9.8", "reasoning_content": "9.80 > 9.11"}),
        "stop",
        usage(0, 10),
    ))
    .unwrap();
    assert!(
        matches!(&a.blocks()[0], Block::Thinking { text, .. } if text == "9.80 > 9.11"),
        "{:?}",
        a.blocks()
    );
    assert_eq!(a.text(), "9.8");

    let mut d = decoder();
    let events = d
        .event(&chunk(
            json!({"role": "assistant", "content": null, "reasoning_content": "Hm"}),
            Value::Null,
        ))
        .unwrap();
    assert!(
        matches!(&events[..], [StreamEvent::ThinkingDelta { text, .. }] if text == "Hm"),
        "{events:?}"
    );
}

fn thought(text: &str) -> Block {
    Block::Thinking {
        text: text.into(),
        signature: None,
        origin: None,
        cache: None,
    }
}

#[test]
fn reasoning_is_sent_back_only_with_the_tool_calls_it_made() {
    let call = Block::ToolUse {
        id: "call_1".into(),
        name: "lookup".into(),
        input: Json::new(json!({"word": "tollgate"})),
        cache: None,
    };
    let result = Block::ToolResult {
        tool_use_id: "call_1".into(),
        content: vec![Block::text("a gate")],
        is_error: false,
        cache: None,
    };
    let messages = vec![
        Message::user("first question"),
        Message {
            role: Role::Assistant,
            content: vec![thought("plain reasoning"), Block::text("plain answer")],
        },
        Message::user("look it up"),
        Message {
            role: Role::Assistant,
            content: vec![thought("I should look it up"), call],
        },
        Message {
            role: Role::User,
            content: vec![result],
        },
    ];
    let b = encode("deepseek-chat", messages, SamplingParams::new()).unwrap();
    let assistants: Vec<&Value> = b["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert!(assistants[0].get("reasoning_content").is_none(), "{b}");
    assert_eq!(
        assistants[1]["reasoning_content"],
        json!("I should look it up")
    );
}

#[test]
fn temperature_and_top_p_are_refused_for_deepseek_reasoner_only() {
    let hi = || vec![Message::user("hi")];
    for params in [
        SamplingParams::new().with_temperature(0.2).unwrap(),
        SamplingParams::new().with_top_p(0.9).unwrap(),
    ] {
        let err = encode(REASONER, hi(), params.clone()).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { provider, .. } if provider == "deepseek"),
            "{err}"
        );
        assert!(encode("deepseek-chat", hi(), params).is_ok());
    }
    assert!(encode(REASONER, hi(), SamplingParams::new()).is_ok());
}

#[test]
fn settings_deepseek_has_no_field_for_are_refused_by_name() {
    let shape = ResponseShape::new("answer", Json::new(json!({"type": "object"})));
    for (params, named) in [
        (SamplingParams::new().with_seed(7), "seed"),
        (
            SamplingParams::new().with_parallel_tool_calls(false),
            "parallel_tool_calls",
        ),
        (SamplingParams::new().with_response_shape(shape), "shape"),
        (
            SamplingParams::new().with_verbosity(Verbosity::Low),
            "verbosity",
        ),
    ] {
        let err = encode("deepseek-chat", vec![Message::user("hi")], params).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { provider, .. } if provider == "deepseek"),
            "{err}"
        );
        assert!(err.to_string().contains(named), "{named}: {err}");
    }
    let json_object = SamplingParams::new().with_json_object();
    let b = encode("deepseek-chat", vec![Message::user("hi")], json_object).unwrap();
    assert_eq!(b["response_format"], json!({"type": "json_object"}));
}

#[test]
fn images_and_pdfs_are_refused_naming_the_block() {
    let image = Block::Image {
        source: ImageSource::Url {
            url: "https://example.com/cat.png".into(),
        },
        cache: None,
    };
    let pdf = Block::Document {
        source: DocumentSource::Base64 {
            media_type: "application/pdf".into(),
            data: "JVBERi0=".into(),
        },
        name: None,
        cache: None,
    };
    for block in [image, pdf] {
        let message = Message {
            role: Role::User,
            content: vec![Block::text("look"), block],
        };
        let err = encode("deepseek-chat", vec![message], SamplingParams::new()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidRequest { field, .. } if field == "messages[0].content[1]"),
            "{err}"
        );
    }
}

#[test]
fn insufficient_system_resource_in_a_stream_is_a_retryable_server_error() {
    let mut d = decoder();
    d.event(&chunk(json!({"content": "par"}), Value::Null))
        .unwrap();
    let err = d
        .event(&chunk(json!({}), json!("insufficient_system_resource")))
        .unwrap_err();
    assert!(
        matches!(err, Error::Provider(ProviderError::Server { .. })),
        "{err}"
    );
    assert!(err.is_retryable(), "{err}");
}

#[test]
fn insufficient_system_resource_in_a_whole_answer_is_a_retryable_malformed_answer() {
    let err = decode(&answer(
        json!({"role": "assistant", "content": "par"}),
        "insufficient_system_resource",
        usage(0, 10),
    ))
    .unwrap_err();
    assert!(
        matches!(&err, Error::Provider(ProviderError::Malformed { .. })),
        "{err}"
    );
    assert!(
        err.to_string().contains("insufficient_system_resource"),
        "{err}"
    );
    assert!(err.is_retryable(), "{err}");
}

#[test]
fn insufficient_balance_is_quota_and_never_retried() {
    let read = PROVIDER.preset().dialect.error;
    let body = json!({"error": {"message": "Insufficient Balance", "type": "unknown_error",
                                "param": null, "code": "invalid_request_error"}});
    let err = read(402, body.to_string().as_bytes()).verdict();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err}");
    assert!(!err.is_retryable(), "{err}");
}

#[test]
fn a_503_is_overloaded_and_a_500_a_server_error() {
    let read = PROVIDER.preset().dialect.error;
    let body = |m: &str| json!({"error": {"message": m, "type": "server_error"}}).to_string();
    assert!(matches!(
        read(503, body("Server Overloaded").as_bytes()).verdict(),
        Error::Provider(ProviderError::Overloaded { status: 503, .. })
    ));
    assert!(matches!(
        read(500, body("Server Error").as_bytes()).verdict(),
        Error::Provider(ProviderError::Server { status: 500, .. })
    ));
}

#[test]
fn blank_keep_alive_lines_before_a_whole_answer_are_read_past() {
    let mut body = b"\n\n\n".to_vec();
    body.extend(answer(
        json!({"role": "assistant", "content": "late"}),
        "stop",
        usage(0, 10),
    ));
    let a = decode(&body).unwrap();
    assert_eq!(a.text(), "late");
    assert_eq!(a.stop_reason(), StopReason::EndTurn);
}

const CRATE_DOC: &str = include_str!("../src/lib.rs");
const PAGE: &str = include_str!("../../../docs/providers/deepseek.md");

/// The first ```toml block of `text`, a crate doc's `//! ` prefixes taken off.
fn catalog_in(text: &str) -> String {
    let text = text.replace("//! ", "").replace("//!", "");
    let block = text.split("```toml\n").nth(1).unwrap_or_default();
    block.split("```").next().unwrap_or_default().to_owned()
}

fn models(catalog: &str) -> Models {
    Models::builder()
        .catalog(Catalog::from_toml_str(catalog).unwrap())
        .credentials(MemoryCredentialStore::new().with("deepseek-main", "key"))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_catalog_examples_load_and_their_models_get_transports() {
    for models in [CRATE_DOC, PAGE].map(|text| models(&catalog_in(text))) {
        let (chat, reasoner) = (models.chat("deepseek").await, models.chat("reasoner").await);
        assert!(chat.is_ok() && reasoner.is_ok());
    }
}

#[tokio::test]
async fn embeddings_models_are_refused() {
    let catalog = "[embeddings]\nwidth = 8\n[models.embed]\nprovider = \"deepseek\"\n\
                   kind = \"embeddings\"\nname = \"deepseek-embed\"\ncredential = \"deepseek-main\"\n\
                   native_width = 8\n";
    let err = models(catalog).embeddings("embed").await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}
