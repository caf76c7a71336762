//! The Responses stream encoder fed tollgate's events directly: the signer a provider key
//! seals thinking as, and a refusal that came whole after streamed reasoning.

use serde_json::{Value, json};
use tollgate::{Block, LlmResponse, ResponseBody, StopReason, StreamEvent, Usage};

use super::super::output::Echo;
use super::super::request::ResponsesRequest;
use super::{EventEncoder, signer_of};
use crate::sse::Encoder;

fn encoder(provider: &str) -> EventEncoder {
    let req: ResponsesRequest =
        serde_json::from_value(json!({"model": "m", "input": "q"})).unwrap();
    EventEncoder::new(
        Echo::new(&req, Default::default(), Default::default()),
        provider,
    )
}

fn data(frames: Vec<axum::body::Bytes>) -> Vec<Value> {
    frames
        .iter()
        .flat_map(|f| {
            let text = String::from_utf8_lossy(f).into_owned();
            text.lines()
                .filter_map(|l| l.strip_prefix("data: ").map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .map(|d| serde_json::from_str(&d).unwrap())
        .collect()
}

#[test]
fn thinking_is_sealed_as_the_signer_its_providers_codec_replays() {
    assert_eq!(signer_of("anthropic-direct"), "anthropic");
    assert_eq!(signer_of("anthropic-bedrock"), "bedrock");
    assert_eq!(signer_of("openai-compatible"), "openai");
    assert_eq!(signer_of("vertex"), "gemini");
    assert_eq!(signer_of("my-provider"), "my-provider");
    let mut e = encoder("anthropic-direct");
    let mut frames = e.event(StreamEvent::ThinkingDelta {
        index: 0,
        text: "hm".into(),
    });
    frames.extend(e.event(StreamEvent::SignatureDelta {
        index: 0,
        signature: "sig".into(),
    }));
    frames.extend(e.event(StreamEvent::TextDelta {
        index: 1,
        text: "a".into(),
    }));
    let done = data(frames)
        .into_iter()
        .find(|v| v["type"] == "response.output_item.done")
        .unwrap();
    let sealed = done["item"]["encrypted_content"].as_str().unwrap();
    let block = super::super::envelope::open(sealed).unwrap();
    assert!(matches!(block, Block::Thinking { origin: Some(o), .. } if o == "anthropic"));
}

#[test]
fn a_refusal_that_came_whole_after_streamed_reasoning_is_a_refusal_message() {
    let mut e = encoder("openai");
    let mut frames = e.event(StreamEvent::ThinkingDelta {
        index: 0,
        text: "hm".into(),
    });
    let refused = LlmResponse::new(ResponseBody {
        model: "m".into(),
        content: vec![Block::text("I can't help with that.")],
        stop_reason: StopReason::Refusal,
        usage: Usage::default(),
        refusal: None,
    })
    .unwrap();
    frames.extend(e.event(StreamEvent::Completed(refused)));
    let events = data(frames);
    let completed = events.last().unwrap();
    assert_eq!(completed["type"], "response.completed");
    let output = completed["response"]["output"].as_array().unwrap();
    assert_eq!(output.len(), 2, "{output:?}");
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(
        output[1]["content"][0],
        json!({"type": "refusal", "refusal": "I can't help with that."})
    );
}
