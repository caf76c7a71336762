//! `bedrock-converse` against a local mock Bedrock endpoint (wiremock on 127.0.0.1,
//! `options.endpoint_url`) with static test credentials: Converse and ConverseStream
//! encoding and decoding, stop reasons, cache usage, exceptions before and during a
//! stream, and a model without a region.

mod common;

use common::*;
use serde_json::{Value, json};
use tollgate::catalog::CatalogError;
use tollgate::{
    Block, CacheMark, Error, ImageSource, Json, LlmRequest, Message, ProviderError, ResponseShape,
    Role, SamplingParams, StopReason, StreamEvent, ToolDefinition,
};
use tollgate_bedrock::BedrockConverseProvider;
use wiremock::matchers::{header_regex, method, path};
use wiremock::{Mock, ResponseTemplate};

const MODEL: &str = "nova";

/// Whether an error is the expected one.
type Check = fn(&Error) -> bool;

async fn setup() -> Setup {
    setup_with(BedrockConverseProvider, |uri| {
        vec![entry(MODEL, "bedrock-converse", "amazon.nova-test", uri)]
    })
    .await
}

fn answer(content: Value, stop: &str) -> Value {
    json!({"output": {"message": {"role": "assistant", "content": content}},
           "stopReason": stop,
           "usage": {"inputTokens": 10, "outputTokens": 4, "totalTokens": 19,
                     "cacheReadInputTokens": 3, "cacheWriteInputTokens": 2},
           "metrics": {"latencyMs": 5}})
}

fn ok(content: Value, stop: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(answer(content, stop))
}

#[tokio::test]
async fn converse_encodes_system_messages_images_tools_cache_points_and_inference_config() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/model/amazon.nova-test/converse"))
        .and(header_regex(
            "authorization",
            "^AWS4-HMAC-SHA256 Credential=AKIDTESTACCESSKEY01/[0-9]{8}/us-east-1/bedrock/aws4_request",
        ))
        .and(header_regex("amz-sdk-request", "max=1"))
        .respond_with(ok(json!([{"text": "{\"ok\":true}"}]), "end_turn"))
        .expect(1)
        .mount(&s.server)
        .await;
    let message = |role, content| Message { role, content };
    let request = LlmRequest::new(
        MODEL,
        vec![
            message(
                Role::System,
                vec![Block::Text {
                    text: "Be brief.".into(),
                    cache: Some(CacheMark::OneHour),
                }],
            ),
            message(
                Role::User,
                vec![
                    Block::Text {
                        text: "Look:".into(),
                        cache: None,
                    },
                    Block::Image {
                        source: ImageSource::Base64 {
                            media_type: "image/png".into(),
                            data: "iVBORw0K".into(),
                        },
                        cache: Some(CacheMark::FiveMinutes),
                    },
                ],
            ),
            message(
                Role::Assistant,
                vec![Block::ToolUse {
                    id: "t1".into(),
                    name: "lookup".into(),
                    input: Json::new(json!({"q": "x", "n": 2})),
                    cache: None,
                }],
            ),
            message(
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id: "t1".into(),
                    content: vec![Block::Text {
                        text: "found".into(),
                        cache: None,
                    }],
                    is_error: true,
                    cache: None,
                }],
            ),
        ],
        vec![ToolDefinition {
            defer_loading: false,
            cache: Some(CacheMark::FiveMinutes),
            name: "lookup".into(),
            description: "Looks things up".into(),
            input_schema: Json::new(
                json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            ),
            strict: None,
            native: None,
        }],
        SamplingParams::new()
            .with_temperature(0.5)
            .unwrap()
            .with_top_p(0.9)
            .unwrap()
            .with_stop("END")
            .with_response_shape(ResponseShape {
                name: "reply".into(),
                schema: Json::new(json!({"type": "object"})),
                strict: Some(true),
            }),
    )
    .unwrap();
    let reply = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&request)
        .await
        .unwrap();
    assert_eq!(reply.text(), "{\"ok\":true}");
    assert_eq!(reply.stop_reason(), StopReason::EndTurn);
    let sent: Value = s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(
        sent["system"],
        json!([{"text": "Be brief."}, {"cachePoint": {"type": "default", "ttl": "1h"}}])
    );
    let messages = &sent["messages"];
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"][0], json!({"text": "Look:"}));
    assert_eq!(
        messages[0]["content"][1],
        json!({"image": {"format": "png", "source": {"bytes": "iVBORw0K"}}})
    );
    assert_eq!(
        messages[0]["content"][2],
        json!({"cachePoint": {"type": "default", "ttl": "5m"}})
    );
    assert_eq!(
        messages[1]["content"][0],
        json!({"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "x", "n": 2}}})
    );
    assert_eq!(
        messages[2]["content"][0],
        json!({"toolResult": {"toolUseId": "t1", "content": [{"text": "found"}], "status": "error"}})
    );
    assert_eq!(
        sent["toolConfig"]["tools"][0]["toolSpec"],
        json!({"name": "lookup", "description": "Looks things up",
               "inputSchema": {"json": {"type": "object", "properties": {"q": {"type": "string"}}}}})
    );
    // The tool's cache mark is a cache point after it.
    assert_eq!(
        sent["toolConfig"]["tools"][1],
        json!({"cachePoint": {"type": "default", "ttl": "5m"}})
    );
    let inference = &sent["inferenceConfig"];
    assert_eq!(inference["maxTokens"], 500);
    assert_eq!(inference["temperature"], 0.5);
    assert!((inference["topP"].as_f64().unwrap() - 0.9).abs() < 1e-6);
    assert_eq!(inference["stopSequences"], json!(["END"]));
    let format = &sent["outputConfig"]["textFormat"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(
        format["structure"]["jsonSchema"]["schema"],
        json!("{\"type\":\"object\"}"),
        "the schema is sent as a string"
    );
}

#[tokio::test]
async fn converse_decodes_tool_use_and_cache_usage() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ok(
            json!([{"text": "Let me look."},
                   {"toolUse": {"toolUseId": "t9", "name": "lookup", "input": {"q": "y"}}}]),
            "tool_use",
        ))
        .mount(&s.server)
        .await;
    let reply = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap();
    assert_eq!(reply.stop_reason(), StopReason::ToolUse);
    assert_eq!(
        reply.blocks()[1],
        Block::ToolUse {
            id: "t9".into(),
            name: "lookup".into(),
            input: Json::new(json!({"q": "y"})),
            cache: None
        }
    );
    let usage = reply.usage();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.output_tokens
        ),
        (10, 3, 2, 4),
        "inputTokens excludes cache reads and writes"
    );
}

#[tokio::test]
async fn stop_reasons_max_tokens_guardrail_intervened_and_content_filtered_are_mapped() {
    for (wire, neutral) in [("stop_sequence", StopReason::StopSequence)] {
        let s = setup().await;
        Mock::given(method("POST"))
            .respond_with(ok(json!([{"text": "…"}]), wire))
            .mount(&s.server)
            .await;
        let reply = no_retries(&s.models)
            .chat(MODEL)
            .await
            .unwrap()
            .single_response(&ask(MODEL))
            .await;
        assert_eq!(reply.unwrap().stop_reason(), neutral, "{wire}");
    }
    // A guardrail or the model's filter is a refusal, with the stop as its category and
    // the usage Bedrock billed.
    for wire in ["guardrail_intervened", "content_filtered"] {
        let s = setup().await;
        Mock::given(method("POST"))
            .respond_with(ok(json!([{"text": "…"}]), wire))
            .mount(&s.server)
            .await;
        let error = no_retries(&s.models)
            .chat(MODEL)
            .await
            .unwrap()
            .single_response(&ask(MODEL))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::ProviderRefusal { category, usage, .. } if category == wire && usage.output_tokens > 0),
            "{wire}: {error:?}"
        );
    }
    // `max_tokens` is MaxTokens: the pipeline re-runs a cut-off answer at the catalog's
    // ceiling, then reports it truncated.
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ok(json!([{"text": "…"}]), "max_tokens"))
        .mount(&s.server)
        .await;
    let error = no_retries(&s.models)
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::OutputTruncated {
                max_output_tokens: 2000,
                ..
            }
        ),
        "{error:?}"
    );
    let sent = s.server.received_requests().await.unwrap();
    let limits: Vec<Value> = sent
        .iter()
        .map(|r| r.body_json::<Value>().unwrap()["inferenceConfig"]["maxTokens"].clone())
        .collect();
    assert_eq!(limits, [json!(500), json!(2000)]);
}

#[tokio::test]
async fn converse_context_window_stop_is_overflow_not_truncation() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ok(json!([{"text": "…"}]), "model_context_window_exceeded"))
        .mount(&s.server)
        .await;
    let error = no_retries(&s.models)
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::ContextWindowExceeded { model_id, .. } if model_id == MODEL),
        "{error:?}"
    );
    // Not re-run at the ceiling as a truncation would be.
    assert_eq!(s.server.received_requests().await.unwrap().len(), 1);
}

fn good_stream() -> Vec<Vec<u8>> {
    vec![
        event_frame("messageStart", &json!({"role": "assistant"})),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
        ),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"text": "lo"}}),
        ),
        event_frame("contentBlockStop", &json!({"contentBlockIndex": 0})),
        event_frame(
            "contentBlockStart",
            &json!({"contentBlockIndex": 1,
            "start": {"toolUse": {"toolUseId": "t1", "name": "lookup"}}}),
        ),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"q\":"}}}),
        ),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"z\"}"}}}),
        ),
        event_frame("contentBlockStop", &json!({"contentBlockIndex": 1})),
        event_frame("messageStop", &json!({"stopReason": "tool_use"})),
        event_frame(
            "metadata",
            &json!({"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 20,
            "cacheReadInputTokens": 3, "cacheWriteInputTokens": 2}, "metrics": {"latencyMs": 42}}),
        ),
    ]
}

#[tokio::test]
async fn converse_stream_is_decoded_with_tool_use_and_cache_usage() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/model/amazon.nova-test/converse-stream"))
        .respond_with(event_stream(&good_stream()))
        .expect(1)
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, MODEL).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        events[0],
        StreamEvent::TextDelta {
            index: 0,
            text: "Hel".into()
        }
    );
    assert!(events.contains(&StreamEvent::ToolUseDelta {
        index: 1,
        id: Some("t1".into()),
        name: Some("lookup".into()),
        input_json: String::new()
    }));
    match events.last() {
        Some(StreamEvent::Completed(reply)) => {
            assert_eq!(reply.text(), "Hello");
            assert_eq!(reply.stop_reason(), StopReason::ToolUse);
            assert_eq!(
                reply.blocks()[1],
                Block::ToolUse {
                    id: "t1".into(),
                    name: "lookup".into(),
                    input: Json::new(json!({"q": "z"})),
                    cache: None
                }
            );
            let u = reply.usage();
            assert_eq!(
                (
                    u.input_tokens,
                    u.cache_read_tokens,
                    u.cache_write_tokens,
                    u.output_tokens
                ),
                (10, 3, 2, 5)
            );
        }
        other => panic!("expected Completed, got {other:?}"),
    }
}

async fn error_for(template: ResponseTemplate) -> Error {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&s.server)
        .await;
    no_retries(&s.models)
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap_err()
}

#[tokio::test]
async fn converse_exceptions_map_to_their_error_types() {
    let cases: [(u16, &str, Check); 9] = [
        (429, "ThrottlingException", |e| {
            matches!(e, Error::Provider(ProviderError::RateLimited { .. }))
        }),
        (503, "ServiceUnavailableException", |e| {
            matches!(e, Error::Provider(ProviderError::Overloaded { .. }))
        }),
        (429, "ModelNotReadyException", |e| {
            matches!(e, Error::Provider(ProviderError::Overloaded { .. }))
        }),
        (500, "InternalServerException", |e| {
            matches!(
                e,
                Error::Provider(ProviderError::Server { status: 500, .. })
            )
        }),
        (408, "ModelTimeoutException", |e| {
            matches!(e, Error::Provider(ProviderError::Timeout { .. }))
        }),
        (
            400,
            "ValidationException",
            |e| matches!(e, Error::ProviderRequest(r) if r.status == 400 && r.message.contains("nope")),
        ),
        (
            403,
            "AccessDeniedException",
            |e| matches!(e, Error::ProviderRequest(r) if r.status == 403),
        ),
        (
            404,
            "ResourceNotFoundException",
            |e| matches!(e, Error::ProviderRequest(r) if r.status == 404),
        ),
        (
            400,
            "ServiceQuotaExceededException",
            |e| matches!(e, Error::QuotaExhausted { provider, .. } if provider == "bedrock-converse"),
        ),
    ];
    for (status, kind, check) in cases {
        let error = error_for(exception_response(status, kind, "nope")).await;
        assert!(check(&error), "{kind}: {error:?}");
    }
}

#[tokio::test]
async fn each_stream_exception_before_the_first_delta_is_retried() {
    for kind in [
        "throttlingException",
        "serviceUnavailableException",
        "internalServerException",
        "modelStreamErrorException",
    ] {
        let s = setup().await;
        once_then(
            &s.server,
            event_stream(&[
                event_frame("messageStart", &json!({"role": "assistant"})),
                exception_frame(kind, "try again"),
            ]),
            event_stream(&good_stream()),
        )
        .await;
        let (_, error) = stream_all(&s.models, MODEL).await;
        assert!(error.is_none(), "{kind}: {error:?}");
        assert_eq!(
            s.server.received_requests().await.unwrap().len(),
            2,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn each_stream_exception_after_the_first_delta_interrupts_the_stream() {
    let cases: [(&str, Check); 5] = [
        ("throttlingException", |e| {
            matches!(e, Error::Provider(ProviderError::RateLimited { .. }))
        }),
        ("serviceUnavailableException", |e| {
            matches!(e, Error::Provider(ProviderError::Overloaded { .. }))
        }),
        ("internalServerException", |e| {
            matches!(e, Error::Provider(ProviderError::Server { .. }))
        }),
        ("modelStreamErrorException", |e| {
            matches!(e, Error::Provider(ProviderError::Server { .. }))
        }),
        (
            "validationException",
            |e| matches!(e, Error::ProviderRequest(r) if r.status == 400),
        ),
    ];
    for (kind, check) in cases {
        let s = setup().await;
        Mock::given(method("POST"))
            .respond_with(event_stream(&[
                event_frame("messageStart", &json!({"role": "assistant"})),
                event_frame(
                    "contentBlockDelta",
                    &json!({"contentBlockIndex": 0, "delta": {"text": "Hel"}}),
                ),
                exception_frame(kind, "broke"),
            ]))
            .mount(&s.server)
            .await;
        let (events, error) = stream_all(&s.models, MODEL).await;
        assert_eq!(events.len(), 1, "{kind}");
        match error {
            Some(Error::StreamInterrupted {
                delivered_events,
                cause,
                ..
            }) => {
                assert_eq!(delivered_events, 1);
                assert!(check(&cause), "{kind}: {cause:?}");
            }
            other => panic!("{kind}: expected StreamInterrupted, got {other:?}"),
        }
        assert_eq!(
            s.server.received_requests().await.unwrap().len(),
            1,
            "{kind}"
        );
    }
}

#[tokio::test]
async fn a_model_without_a_region_fails_naming_the_model_and_the_field() {
    let s = setup_with(BedrockConverseProvider, |uri| {
        let mut e = entry("no-region", "bedrock-converse", "amazon.nova-test", uri);
        e.options.remove("region");
        vec![e]
    })
    .await;
    let error = match s.models.chat("no-region").await {
        Ok(chat) => chat.single_response(&ask("no-region")).await.unwrap_err(),
        Err(e) => e,
    };
    assert!(
        matches!(&error, Error::Catalog(CatalogError::InvalidField { model_id, field, .. })
            if model_id == "no-region" && field == "options.region"),
        "{error:?}"
    );
    assert!(s.server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn one_hour_cache_writes_are_split_out_by_cache_details() {
    let s = setup().await;
    let mut body = answer(json!([{"text": "ok"}]), "end_turn");
    body["usage"] = json!({"inputTokens": 10, "outputTokens": 4, "totalTokens": 64,
        "cacheReadInputTokens": 0, "cacheWriteInputTokens": 50,
        "cacheDetails": [{"ttl": "1h", "inputTokens": 30}, {"ttl": "5m", "inputTokens": 20}]});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(&s.server)
        .await;
    let u = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap()
        .usage();
    assert_eq!((u.cache_write_tokens, u.cache_write_1h_tokens), (20, 30));
}

#[tokio::test]
async fn an_error_message_echoing_the_secret_key_is_redacted() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(exception_response(
            400,
            "ValidationException",
            &format!("bad {SECRET_KEY} {SESSION_TOKEN}"),
        ))
        .mount(&s.server)
        .await;
    let error = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap_err();
    let text = format!("{error} {error:?}");
    assert!(text.contains("[redacted]"), "{text}");
    assert!(
        !text.contains(SECRET_KEY) && !text.contains(SESSION_TOKEN),
        "{text}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_typed_with_its_cause_not_a_bare_status() {
    let refusing = tollgate_testkit::provider::RefusingPort::bind();
    let url = refusing.uri();
    let s = setup_with(BedrockConverseProvider, |_| {
        vec![entry(MODEL, "bedrock-converse", "amazon.nova-test", &url)]
    })
    .await;
    let error = no_retries(&s.models)
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::Provider(tollgate::ProviderError::Connection {
                cause: tollgate::ConnectionCause::Refused,
                ..
            })
        ),
        "{error:?}"
    );
    assert!(!format!("{error:?}").contains(SECRET_KEY));
}

#[tokio::test]
async fn an_answer_that_does_not_decode_is_malformed_with_its_bytes() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string("{\"output\": [garbage"),
        )
        .mount(&s.server)
        .await;
    let error = no_retries(&s.models)
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Provider(tollgate::ProviderError::Malformed { raw, .. }) if raw == "{\"output\": [garbage"),
        "{error:?}"
    );
}
