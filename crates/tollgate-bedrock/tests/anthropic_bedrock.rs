//! `anthropic-bedrock` against a local mock Bedrock endpoint (wiremock on 127.0.0.1,
//! `options.endpoint_url`) with static test credentials from the credential store:
//! InvokeModel both ways, exceptions before and during a stream, region and secrets.

mod common;

use common::*;
use serde_json::{Value, json};
use tollgate::catalog::CatalogError;
use tollgate::{Error, ProviderError, StopReason, StreamEvent};
use tollgate_bedrock::AnthropicBedrockProvider;
use wiremock::matchers::{header_regex, method, path};
use wiremock::{Mock, ResponseTemplate};

const MODEL: &str = "claude";

/// Whether an error is the expected one.
type Check = fn(&Error) -> bool;

async fn setup() -> Setup {
    setup_with(AnthropicBedrockProvider, |uri| {
        vec![entry(
            MODEL,
            "anthropic-bedrock",
            "anthropic.claude-test",
            uri,
        )]
    })
    .await
}

fn message(text: &str, stop: &str) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 12, "output_tokens": 4, "cache_creation_input_tokens": 5,
                     "cache_read_input_tokens": 7}})
}

/// A stream chunk: one Anthropic stream event, base64 in `{"bytes": …}`.
fn chunk(event: &Value) -> Vec<u8> {
    let bytes = aws_smithy_types::base64::encode(event.to_string());
    event_frame("chunk", &json!({ "bytes": bytes }))
}

fn start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-test", "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 1}}})
}

fn text_delta(text: &str) -> Value {
    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
}

fn good_stream() -> Vec<Vec<u8>> {
    vec![
        chunk(&start()),
        chunk(
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        chunk(&text_delta("Hel")),
        chunk(&text_delta("lo")),
        chunk(&json!({"type": "content_block_stop", "index": 0})),
        chunk(
            &json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
               "usage": {"output_tokens": 2}}),
        ),
        chunk(&json!({"type": "message_stop",
            "amazon-bedrock-invocationMetrics": {"inputTokenCount": 12, "outputTokenCount": 2,
                "invocationLatency": 10, "firstByteLatency": 5}})),
    ]
}

#[tokio::test]
async fn invoke_model_sends_the_bedrock_anthropic_body_signed_and_decodes_the_answer() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path("/model/anthropic.claude-test/invoke"))
        .and(header_regex(
            "authorization",
            "^AWS4-HMAC-SHA256 Credential=AKIDTESTACCESSKEY01/[0-9]{8}/us-east-1/bedrock/aws4_request",
        ))
        .and(header_regex("x-amz-security-token", "^SeSsIoN-ToKeN-do-not-leak$"))
        .and(header_regex("amz-sdk-request", "max=1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message("Hi!", "end_turn")))
        .expect(1)
        .mount(&s.server)
        .await;
    let answer = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap();
    assert_eq!(answer.text(), "Hi!");
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    let usage = answer.usage();
    assert_eq!(usage.input_tokens, 12);
    assert_eq!(usage.cache_read_tokens, 7);
    assert_eq!(usage.cache_write_tokens, 5);
    let sent: Value = s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["anthropic_version"], "bedrock-2023-05-31");
    assert!(
        sent.get("model").is_none(),
        "Bedrock names the model in the URL"
    );
    assert!(sent.get("stream").is_none());
    assert_eq!(sent["max_tokens"], 500);
    assert_eq!(sent["messages"][0]["role"], "user");
}

#[tokio::test]
async fn the_record_is_read_from_the_store_on_every_call() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message("Hi!", "end_turn")))
        .mount(&s.server)
        .await;
    let chat = s.models.chat(MODEL).await.unwrap();
    chat.single_response(&ask(MODEL)).await.unwrap();
    s.store.insert(
        CRED_ID,
        json!({"access_key_id": "AKIDROTATED", "secret_access_key": "rotated-secret"}).to_string(),
    );
    chat.single_response(&ask(MODEL)).await.unwrap();
    let requests = s.server.received_requests().await.unwrap();
    let auth = |i: usize| {
        requests[i]
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        auth(0).contains("Credential=AKIDTESTACCESSKEY01/"),
        "{}",
        auth(0)
    );
    assert!(auth(1).contains("Credential=AKIDROTATED/"), "{}", auth(1));
    assert!(requests[1].headers.get("x-amz-security-token").is_none());
}

#[tokio::test]
async fn a_stream_of_chunks_is_decoded_by_the_anthropic_codec() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path(
            "/model/anthropic.claude-test/invoke-with-response-stream",
        ))
        .respond_with(event_stream(&good_stream()))
        .expect(1)
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, MODEL).await;
    assert!(error.is_none(), "{error:?}");
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["Hel", "lo"]);
    match events.last() {
        Some(StreamEvent::Completed(answer)) => {
            assert_eq!(answer.text(), "Hello");
            assert_eq!(answer.stop_reason(), StopReason::MaxTokens);
        }
        other => panic!("expected Completed, got {other:?}"),
    }
    let sent: Value = s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["anthropic_version"], "bedrock-2023-05-31");
    assert!(sent.get("stream").is_none());
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
async fn invoke_model_exceptions_map_to_their_error_types() {
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
            |e| matches!(e, Error::ProviderRequest(r) if r.status == 400 && r.message.contains("bad input")),
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
            |e| matches!(e, Error::QuotaExhausted { provider, .. } if provider == "anthropic-bedrock"),
        ),
    ];
    for (status, kind, check) in cases {
        let error = error_for(exception_response(status, kind, "bad input")).await;
        assert!(check(&error), "{kind}: {error:?}");
    }
}

#[tokio::test]
async fn a_throttled_call_is_retried_by_the_pipeline_then_answered() {
    let s = setup().await;
    once_then(
        &s.server,
        exception_response(429, "ThrottlingException", "Too many requests"),
        ResponseTemplate::new(200).set_body_json(message("Hi!", "end_turn")),
    )
    .await;
    let answer = s
        .models
        .chat(MODEL)
        .await
        .unwrap()
        .single_response(&ask(MODEL))
        .await
        .unwrap();
    assert_eq!(answer.text(), "Hi!");
    assert_eq!(s.server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn each_stream_exception_before_the_first_delta_is_retried() {
    for kind in [
        "throttlingException",
        "serviceUnavailableException",
        "internalServerException",
        "modelStreamErrorException",
        "modelTimeoutException",
    ] {
        let s = setup().await;
        once_then(
            &s.server,
            event_stream(&[chunk(&start()), exception_frame(kind, "try again")]),
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
    let cases: [(&str, Check); 6] = [
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
        ("modelTimeoutException", |e| {
            matches!(e, Error::Provider(ProviderError::Timeout { .. }))
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
                chunk(&start()),
                chunk(&json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
                chunk(&text_delta("Hel")),
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
    let s = setup_with(AnthropicBedrockProvider, |uri| {
        let mut e = entry(
            "no-region",
            "anthropic-bedrock",
            "anthropic.claude-test",
            uri,
        );
        e.options.remove("region");
        vec![e]
    })
    .await;
    let error = match s.models.chat("no-region").await {
        Ok(chat) => chat.single_response(&ask("no-region")).await.unwrap_err(),
        Err(e) => e,
    };
    match &error {
        Error::Catalog(CatalogError::InvalidField {
            model_id, field, ..
        }) => {
            assert_eq!(model_id, "no-region");
            assert_eq!(field, "options.region");
        }
        other => panic!("expected an InvalidField, got {other:?}"),
    }
    let text = error.to_string();
    assert!(
        text.contains("no-region") && text.contains("region"),
        "{text}"
    );
    assert!(s.server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn secrets_never_appear_in_errors_or_debug() {
    let s = setup().await;
    // The server echoes the request's headers (the signature and the session token)
    // in an error message.
    Mock::given(method("POST"))
        .respond_with(exception_response(
            400,
            "ValidationException",
            &format!("echo {SECRET_KEY} {SESSION_TOKEN}"),
        ))
        .mount(&s.server)
        .await;
    let chat = s.models.chat(MODEL).await.unwrap();
    let error = chat.single_response(&ask(MODEL)).await.unwrap_err();
    for text in [
        format!("{error}"),
        format!("{error:?}"),
        format!("{chat:?}"),
        format!("{:?}", s.models),
    ] {
        assert!(!text.contains(SECRET_KEY), "{text}");
        assert!(!text.contains(SESSION_TOKEN), "{text}");
    }
    // A malformed record: the error names the credential, not its content.
    s.store.insert(
        CRED_ID,
        format!("{{\"access_key_id\": \"A\", \"secret_access_key\": {SECRET_KEY}}}"),
    );
    let error = chat.single_response(&ask(MODEL)).await.unwrap_err();
    let text = format!("{error} {error:?}");
    assert!(text.contains(CRED_ID), "{text}");
    assert!(!text.contains(SECRET_KEY), "{text}");
}

/// Regression: an error event inside a Claude-on-Bedrock stream is decoded by the
/// Anthropic codec, which named `anthropic-direct` in the error it built.
#[tokio::test]
async fn anthropic_bedrock_error_event_names_anthropic_bedrock() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(event_stream(&[
            chunk(&start()),
            chunk(&json!({"type": "error", "error": {"type": "billing_error",
                "message": "credit balance too low"}})),
        ]))
        .mount(&s.server)
        .await;
    let (events, error) = stream_all(&s.models, MODEL).await;
    assert!(events.is_empty(), "{events:?}");
    assert!(
        matches!(&error, Some(Error::QuotaExhausted { provider, .. }) if provider == "anthropic-bedrock"),
        "{error:?}"
    );
}
