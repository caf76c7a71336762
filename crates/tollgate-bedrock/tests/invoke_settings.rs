//! The request settings as `anthropic-bedrock` (Claude over InvokeModel, the Anthropic
//! body) writes them, against a wiremock endpoint on 127.0.0.1: refusals name `bedrock`
//! and the model's Bedrock id, Claude's thinking goes back when Claude signed it (on
//! Bedrock or Anthropic's API) and never when another provider did, and thinking in an
//! answer is marked as signed by `bedrock`.

mod common;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::{Block, Error, LlmRequest, Message, Role, SamplingParams, StreamEvent};
use tollgate_bedrock::AnthropicBedrockProvider;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

const MODEL: &str = "claude";
const MODEL_ID: &str = "anthropic.claude-test";

async fn setup() -> Setup {
    setup_with(AnthropicBedrockProvider, |uri| {
        vec![entry(MODEL, "anthropic-bedrock", MODEL_ID, uri)]
    })
    .await
}

fn message(content: Value) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": content, "stop_reason": "end_turn", "stop_sequence": null,
           "usage": {"input_tokens": 3, "output_tokens": 2}})
}

fn thinking(origin: &str) -> Block {
    Block::Thinking {
        text: format!("thought by {origin}"),
        signature: Some(format!("sig-{origin}")),
        origin: Some(origin.into()),
        cache: None,
    }
}

#[tokio::test]
async fn a_setting_invoke_model_refuses_names_bedrock_and_the_bedrock_model_id() {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message(json!([]))))
        .mount(&s.server)
        .await;
    let chat = s.models.chat(MODEL).await.unwrap();
    for params in [
        SamplingParams::new().with_json_object(),
        SamplingParams::new().with_seed(3),
    ] {
        let request = LlmRequest::new(MODEL, vec![Message::user("hi")], vec![], params).unwrap();
        let err = chat.single_response(&request).await.unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { provider, model, .. }
                if provider == "bedrock" && model == MODEL_ID),
            "{err}"
        );
    }
    assert!(s.server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn claudes_thinking_signed_on_bedrock_or_anthropic_is_replayed_and_foreign_thinking_is_not() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path(format!("/model/{MODEL_ID}/invoke")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(message(json!([{"type": "text", "text": "ok"}]))),
        )
        .expect(1)
        .mount(&s.server)
        .await;
    let messages = vec![
        Message::user("hi"),
        Message {
            role: Role::Assistant,
            content: vec![
                thinking("bedrock"),
                thinking("anthropic"),
                thinking("openai"),
                Block::text("ok"),
            ],
        },
        Message::user("more"),
    ];
    let request = LlmRequest::new(MODEL, messages, vec![], SamplingParams::new()).unwrap();
    let chat = s.models.chat(MODEL).await.unwrap();
    chat.single_response(&request).await.unwrap();
    let sent: Value = s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(
        sent["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "thought by bedrock", "signature": "sig-bedrock"},
            {"type": "thinking", "thinking": "thought by anthropic", "signature": "sig-anthropic"},
            {"type": "text", "text": "ok"},
        ])
    );
}

/// A stream chunk: one Anthropic stream event, base64 in `{"bytes": …}`.
fn chunk(event: &Value) -> Vec<u8> {
    let bytes = aws_smithy_types::base64::encode(event.to_string());
    event_frame("chunk", &json!({ "bytes": bytes }))
}

#[tokio::test]
async fn thinking_in_an_invoke_model_answer_is_marked_as_signed_by_bedrock() {
    let s = setup().await;
    let whole = json!([{"type": "thinking", "thinking": "t", "signature": "sig"},
                       {"type": "redacted_thinking", "data": "opaque"}]);
    Mock::given(method("POST"))
        .and(path(format!("/model/{MODEL_ID}/invoke")))
        .respond_with(ResponseTemplate::new(200).set_body_json(message(whole)))
        .mount(&s.server)
        .await;
    let frames = [
        chunk(
            &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        ),
        chunk(&json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})),
        chunk(&json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "t"}})),
        chunk(&json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig"}})),
        chunk(&json!({"type": "content_block_stop", "index": 0})),
        chunk(&json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "redacted_thinking", "data": "opaque"}})),
        chunk(&json!({"type": "content_block_stop", "index": 1})),
        chunk(
            &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2}}),
        ),
        chunk(&json!({"type": "message_stop"})),
    ];
    Mock::given(method("POST"))
        .and(path(format!(
            "/model/{MODEL_ID}/invoke-with-response-stream"
        )))
        .respond_with(event_stream(&frames))
        .mount(&s.server)
        .await;
    let expected = [
        Block::Thinking {
            text: "t".into(),
            signature: Some("sig".into()),
            origin: Some("bedrock".into()),
            cache: None,
        },
        Block::RedactedThinking {
            data: "opaque".into(),
            origin: Some("bedrock".into()),
        },
    ];
    let chat = s.models.chat(MODEL).await.unwrap();
    let reply = chat.single_response(&ask(MODEL)).await.unwrap();
    assert_eq!(reply.blocks(), &expected[..]);
    let mut stream = chat.stream_response(&ask(MODEL)).await.unwrap();
    let mut last = None;
    while let Some(event) = stream.next().await {
        last = Some(event.unwrap());
    }
    let Some(StreamEvent::Completed(streamed)) = last else {
        panic!("no answer: {last:?}");
    };
    assert_eq!(streamed.blocks(), &expected[..]);
}
