//! `bedrock-converse` decoding: sequences of ConverseStream events (block starts and
//! deltas at any index, text, tool input, reasoning, stop reasons known and unknown,
//! usage with any counts) built from the fuzz input and run through the stream decoder;
//! and Converse answers through the response decoder. The SDK turns the event-stream
//! frames into these typed events (its unmarshallers are private); the frame layer itself
//! is fuzzed by `bedrock_eventstream`.

use arbitrary::{Result, Unstructured};
use aws_sdk_bedrockruntime::types::{
    ContentBlock, ContentBlockDelta, ContentBlockDeltaEvent, ContentBlockStart,
    ContentBlockStartEvent, ContentBlockStopEvent, ConversationRole, ConverseStreamMetadataEvent,
    ConverseStreamOutput, Message, MessageStopEvent, ReasoningContentBlock,
    ReasoningContentBlockDelta, ReasoningTextBlock, StopReason, TokenUsage, ToolUseBlock,
    ToolUseBlockDelta, ToolUseBlockStart,
};
use aws_smithy_types::Document;
use tollgate_bedrock::fuzzing::{ConverseStream, decode_converse};

const STOPS: [&str; 8] = [
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "guardrail_intervened",
    "content_filtered",
    "model_context_window_exceeded",
    "something_new",
];

fn index(u: &mut Unstructured<'_>) -> Result<i32> {
    Ok(if u.ratio(1, 16)? {
        u.arbitrary()?
    } else {
        u.int_in_range(-1..=4)?
    })
}

fn text(u: &mut Unstructured<'_>) -> Result<String> {
    u.arbitrary()
}

fn stop(u: &mut Unstructured<'_>) -> Result<StopReason> {
    Ok(StopReason::from(*u.choose(&STOPS)?))
}

fn usage(u: &mut Unstructured<'_>) -> Result<TokenUsage> {
    Ok(TokenUsage::builder()
        .input_tokens(u.arbitrary()?)
        .output_tokens(u.arbitrary()?)
        .total_tokens(u.arbitrary()?)
        .set_cache_read_input_tokens(u.arbitrary()?)
        .set_cache_write_input_tokens(u.arbitrary()?)
        .build()
        .expect("all required fields set"))
}

fn event(u: &mut Unstructured<'_>) -> Result<ConverseStreamOutput> {
    Ok(match u.int_in_range(0..=7)? {
        0 => ConverseStreamOutput::ContentBlockStart(
            ContentBlockStartEvent::builder()
                .content_block_index(index(u)?)
                .start(ContentBlockStart::ToolUse(
                    ToolUseBlockStart::builder()
                        .tool_use_id(text(u)?)
                        .name(text(u)?)
                        .build()
                        .expect("fields set"),
                ))
                .build()
                .expect("fields set"),
        ),
        1..=3 => {
            let delta = match u.int_in_range(0..=3)? {
                0 => ContentBlockDelta::Text(text(u)?),
                1 => ContentBlockDelta::ToolUse(
                    ToolUseBlockDelta::builder()
                        .input(text(u)?)
                        .build()
                        .expect("fields set"),
                ),
                2 => {
                    ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Text(text(u)?))
                }
                _ => ContentBlockDelta::ReasoningContent(ReasoningContentBlockDelta::Signature(
                    text(u)?,
                )),
            };
            ConverseStreamOutput::ContentBlockDelta(
                ContentBlockDeltaEvent::builder()
                    .content_block_index(index(u)?)
                    .delta(delta)
                    .build()
                    .expect("fields set"),
            )
        }
        4 => ConverseStreamOutput::ContentBlockStop(
            ContentBlockStopEvent::builder()
                .content_block_index(index(u)?)
                .build()
                .expect("fields set"),
        ),
        5 => ConverseStreamOutput::MessageStop(
            MessageStopEvent::builder()
                .stop_reason(stop(u)?)
                .build()
                .expect("fields set"),
        ),
        _ => ConverseStreamOutput::Metadata({
            let mut m = ConverseStreamMetadataEvent::builder();
            if u.ratio(7, 8)? {
                m = m.usage(usage(u)?);
            }
            m.build()
        }),
    })
}

fn document(u: &mut Unstructured<'_>, depth: u8) -> Result<Document> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Document::Null,
        1 => Document::Bool(u.arbitrary()?),
        2 => Document::String(text(u)?),
        3 => Document::Number(aws_smithy_types::Number::Float(u.arbitrary()?)),
        4 if depth < 3 => Document::Array(
            (0..u.int_in_range(0..=3)?)
                .map(|_| document(u, depth + 1))
                .collect::<Result<_>>()?,
        ),
        _ if depth < 3 => Document::Object(
            (0..u.int_in_range(0..=3)?)
                .map(|_| Ok((text(u)?, document(u, depth + 1)?)))
                .collect::<Result<_>>()?,
        ),
        _ => Document::Number(aws_smithy_types::Number::NegInt(u.arbitrary()?)),
    })
}

fn block(u: &mut Unstructured<'_>) -> Result<ContentBlock> {
    Ok(match u.int_in_range(0..=2)? {
        0 => ContentBlock::Text(text(u)?),
        1 => ContentBlock::ToolUse(
            ToolUseBlock::builder()
                .tool_use_id(text(u)?)
                .name(text(u)?)
                .input(document(u, 0)?)
                .build()
                .expect("fields set"),
        ),
        _ => ContentBlock::ReasoningContent(ReasoningContentBlock::ReasoningText(
            ReasoningTextBlock::builder()
                .text(text(u)?)
                .set_signature(u.arbitrary()?)
                .build()
                .expect("fields set"),
        )),
    })
}

fn scenario(u: &mut Unstructured<'_>) -> Result<()> {
    if u.arbitrary()? {
        let message = if u.ratio(15, 16)? {
            let content = (0..u.int_in_range(0..=4)?)
                .map(|_| block(u))
                .collect::<Result<Vec<_>>>()?;
            let message = Message::builder()
                .role(ConversationRole::Assistant)
                .set_content(Some(content))
                .build()
                .expect("fields set");
            Some(message)
        } else {
            None
        };
        let usage = if u.arbitrary()? {
            Some(usage(u)?)
        } else {
            None
        };
        let _ = decode_converse("model", message.as_ref(), &stop(u)?, usage.as_ref());
        return Ok(());
    }
    let mut decoder = ConverseStream::new("model");
    while !u.is_empty() {
        match decoder.event(&event(u)?) {
            Ok(_) if decoder.is_finished() => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let _ = scenario(&mut Unstructured::new(data));
}
