//! The Bedrock event-stream path of `anthropic-bedrock`: bytes (in arbitrary chunks)
//! through the AWS event-stream frame decoder the SDK uses (prelude, headers, CRCs), each
//! `chunk` event's payload (`{"bytes": "<base64>"}`) decoded and handed to the Anthropic
//! `StreamDecoder`, the way the transport does with the SDK's `PayloadPart`s.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};
use bytes::BytesMut;
use tollgate_anthropic::codec::StreamDecoder;

use crate::common;

fn header<'m>(message: &'m Message, name: &str) -> Option<&'m str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            HeaderValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// Returns false when the stream ends (finished or failed).
fn handle(message: &Message, decoder: &mut StreamDecoder) -> bool {
    match header(message, ":message-type") {
        Some("event") if header(message, ":event-type") == Some("chunk") => {
            let Ok(part) = serde_json::from_slice::<serde_json::Value>(message.payload()) else {
                return false;
            };
            let Some(encoded) = part.get("bytes").and_then(|b| b.as_str()) else {
                return false;
            };
            let Ok(bytes) = aws_smithy_types::base64::decode(encoded) else {
                return false;
            };
            let data = String::from_utf8_lossy(&bytes);
            match decoder.event(&data) {
                Ok(_) => !decoder.is_finished(),
                Err(_) => false,
            }
        }
        Some("event") => true,
        _ => false,
    }
}

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let (sizes, body) = common::split_sizes(data, 2);
    let mut frames = MessageFrameDecoder::new();
    let mut decoder = StreamDecoder::new();
    let mut buffer = BytesMut::new();
    for chunk in common::chunks(body, sizes) {
        buffer.extend_from_slice(chunk);
        loop {
            match frames.decode_frame(&mut buffer) {
                Ok(DecodedFrame::Complete(message)) => {
                    if !handle(&message, &mut decoder) {
                        return;
                    }
                }
                Ok(DecodedFrame::Incomplete) => break,
                Err(_) => return,
            }
        }
    }
}
