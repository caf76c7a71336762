//! The secret key and session token never show in an error built from a Bedrock
//! answer, in any form the server quotes them in (raw, JSON-escaped, `\u`-escaped,
//! URL-encoded): on whole answers of both keys, their streams, and embeddings, against a
//! local mock endpoint on 127.0.0.1.

mod common;

use common::*;
use serde_json::json;
use tollgate::catalog::{EmbeddingCapabilities, ModelKind};
use tollgate::{EmbeddingPurpose, Error};
use tollgate_bedrock::{AnthropicBedrockProvider, BedrockConverseProvider};
use tollgate_testkit::provider::{Form, find_secret};
use wiremock::matchers::method;
use wiremock::{Mock, ResponseTemplate};

const CLAUDE: &str = "claude";
const NOVA: &str = "nova";
const TITAN: &str = "titan";

async fn setup_claude() -> Setup {
    setup_with(AnthropicBedrockProvider, |uri| {
        vec![entry(
            CLAUDE,
            "anthropic-bedrock",
            "anthropic.claude-test",
            uri,
        )]
    })
    .await
}

async fn setup_converse() -> Setup {
    setup_with(BedrockConverseProvider, |uri| {
        let titan = entry(
            TITAN,
            "bedrock-converse",
            "amazon.titan-embed-text-v2:0",
            uri,
        )
        .with_kind(ModelKind::Embeddings)
        .with_embedding(EmbeddingCapabilities {
            native_width: Some(1024),
            dimensions_param: true,
            truncation_safe: true,
        });
        vec![
            entry(NOVA, "bedrock-converse", "amazon.nova-test", uri),
            titan,
        ]
    })
    .await
}

/// The secret key and the session token, as the server quotes them in `form`.
fn quoted(form: Form) -> String {
    format!("{} {}", form.write(SECRET_KEY), form.write(SESSION_TOKEN))
}

/// Panics if `error` shows either secret in any form.
fn assert_no_secret(error: &Error) {
    let text = format!("{error} {error:?}");
    for secret in [SECRET_KEY, SESSION_TOKEN] {
        assert!(
            find_secret(&text, secret).is_none(),
            "a secret leaked: {text}"
        );
    }
}

async fn answering(s: &Setup, answer: ResponseTemplate) {
    s.server.reset().await;
    Mock::given(method("POST"))
        .respond_with(answer)
        .mount(&s.server)
        .await;
}

/// A body in raw bytes, as the server wrote it (escapes and all).
fn raw(status: u16, body: String) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.into_bytes(), "application/json")
}

#[tokio::test]
async fn an_exception_quoting_the_secrets_in_any_form_is_redacted() {
    let s = setup_converse().await;
    for form in Form::ALL {
        let body = format!("{{\"message\": \"bad {}\"}}", quoted(form));
        let exception = raw(400, body).insert_header(
            "x-amzn-errortype",
            "ValidationException:http://internal.amazon.com/coral/",
        );
        answering(&s, exception).await;
        let chat = s.models.chat(NOVA).await.unwrap();
        let error = chat.single_response(&ask(NOVA)).await.unwrap_err();
        assert!(matches!(error, Error::ProviderRequest(_)), "{error:?}");
        assert_no_secret(&error);
    }
}

#[tokio::test]
async fn an_anthropic_answer_that_does_not_decode_keeps_no_form_of_the_secrets() {
    let s = setup_claude().await;
    for form in Form::ALL {
        answering(&s, raw(200, format!("{{not json {}", quoted(form)))).await;
        let chat = no_retries(&s.models).chat(CLAUDE).await.unwrap();
        let error = chat.single_response(&ask(CLAUDE)).await.unwrap_err();
        assert_no_secret(&error);
    }
}

#[tokio::test]
async fn an_anthropic_answer_decoded_into_an_error_keeps_no_form_of_the_secrets() {
    // A 200 whose body the Anthropic codec reads as an error: the decoded message is
    // the raw secret even when the bytes held it escaped.
    let s = setup_claude().await;
    for form in Form::ALL {
        let body = format!(
            "{{\"type\": \"error\", \"error\": {{\"type\": \"invalid_request_error\", \
             \"message\": \"bad {}\"}}}}",
            quoted(form)
        );
        answering(&s, raw(200, body)).await;
        let chat = no_retries(&s.models).chat(CLAUDE).await.unwrap();
        let error = chat.single_response(&ask(CLAUDE)).await.unwrap_err();
        assert_no_secret(&error);
    }
}

/// One stream chunk holding `event` as the server wrote it (base64 in `{"bytes": …}`).
fn raw_chunk(event: &str) -> Vec<u8> {
    let bytes = aws_smithy_types::base64::encode(event);
    event_frame("chunk", &json!({ "bytes": bytes }))
}

#[tokio::test]
async fn an_anthropic_stream_error_event_quoting_the_secrets_keeps_no_form_of_them() {
    let s = setup_claude().await;
    for form in Form::ALL {
        let error_event = format!(
            "{{\"type\": \"error\", \"error\": {{\"type\": \"invalid_request_error\", \
             \"message\": \"bad {}\"}}}}",
            quoted(form)
        );
        answering(&s, event_stream(&[raw_chunk(&error_event)])).await;
        let (_, error) = stream_all(&no_retries(&s.models), CLAUDE).await;
        assert_no_secret(&error.expect("the error event fails the stream"));
    }
}

#[tokio::test]
async fn a_converse_stream_exception_quoting_the_secrets_keeps_no_form_of_them() {
    let s = setup_converse().await;
    for form in Form::ALL {
        let frame = exception_frame("validationException", &format!("bad {}", quoted(form)));
        answering(&s, event_stream(&[frame])).await;
        let (_, error) = stream_all(&no_retries(&s.models), NOVA).await;
        assert_no_secret(&error.expect("the exception fails the stream"));
    }
}

#[tokio::test]
async fn an_embeddings_answer_that_does_not_decode_keeps_no_form_of_the_secrets() {
    let s = setup_converse().await;
    for form in Form::ALL {
        answering(&s, raw(200, format!("{{not json {}", quoted(form)))).await;
        let error = no_retries(&s.models)
            .embeddings(TITAN)
            .await
            .unwrap()
            .embed_batch(&["a".to_owned()], EmbeddingPurpose::Document)
            .await
            .unwrap_err();
        assert_no_secret(&error);
    }
}
