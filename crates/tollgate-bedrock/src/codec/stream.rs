//! Stream decoding: ConverseStream's events ([`ConverseStreamDecoder`]).

use aws_sdk_bedrockruntime::types::{
    ContentBlockDelta, ContentBlockStart, ConverseStreamOutput, ReasoningContentBlockDelta,
};
use tollgate::provider::{BlockAssembler, EventDecoder};
use tollgate::provider::{LlmResponse, Refusal, ResponseBody, Result, StopReason, StreamEvent};

use super::response::{filter_category, redacted, stop_reason, usage};

/// Turns ConverseStream events into [`StreamEvent`]s and, at `metadata` (the last event,
/// with usage), the whole answer. Blocks are assembled by the kit's [`BlockAssembler`],
/// keyed by `contentBlockIndex`; redacted reasoning comes whole in one delta and is
/// handed on as a [`StreamEvent::WholeBlock`].
#[derive(Debug, Default)]
pub(crate) struct ConverseStreamDecoder {
    model: String,
    blocks: BlockAssembler<i32>,
    stop: Option<StopReason>,
    /// Set by a content-filter stop: the answer ends as a refusal at `metadata`.
    filter: Option<&'static str>,
    finished: bool,
}

impl ConverseStreamDecoder {
    pub(crate) fn new(model: &str) -> Self {
        ConverseStreamDecoder {
            model: model.to_owned(),
            ..Self::default()
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    pub(crate) fn event(&mut self, event: &ConverseStreamOutput) -> Result<Vec<StreamEvent>> {
        let mut out = Vec::new();
        match event {
            ConverseStreamOutput::ContentBlockStart(start) => {
                if let Some(ContentBlockStart::ToolUse(t)) = start.start() {
                    let index = start.content_block_index();
                    out.push(self.blocks.tool_use(index, t.tool_use_id(), t.name(), "")?);
                }
            }
            ConverseStreamOutput::ContentBlockDelta(delta) => {
                let index = delta.content_block_index();
                match delta.delta() {
                    Some(ContentBlockDelta::Text(text)) => {
                        out.extend(self.blocks.text(index, text)?);
                    }
                    Some(ContentBlockDelta::ToolUse(t)) => {
                        out.extend(self.blocks.tool_input(index, t.input())?);
                    }
                    Some(ContentBlockDelta::ReasoningContent(r)) => match r {
                        ReasoningContentBlockDelta::Text(t) => {
                            out.extend(self.blocks.thinking(index, t)?);
                        }
                        ReasoningContentBlockDelta::Signature(s) => {
                            out.extend(self.blocks.signature(index, s)?);
                        }
                        // Arrives whole, in one delta.
                        ReasoningContentBlockDelta::RedactedContent(bytes) => {
                            out.push(self.blocks.whole(index, redacted(bytes))?);
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
            ConverseStreamOutput::MessageStop(stop) => {
                let reason = stop_reason(stop.stop_reason())?;
                self.stop = Some(reason);
                self.filter = filter_category(stop.stop_reason());
                out.push(StreamEvent::Stop(reason));
            }
            ConverseStreamOutput::Metadata(meta) => {
                let usage = usage(meta.usage());
                let stop = self.stop.ok_or_else(|| {
                    tollgate::provider::undecodable("metadata before messageStop")
                })?;
                let content = self.blocks.finish_signed_by("bedrock")?;
                out.push(StreamEvent::Usage(usage));
                out.push(StreamEvent::Completed(LlmResponse::new(ResponseBody {
                    model: self.model.clone(),
                    content,
                    stop_reason: stop,
                    usage,
                    refusal: self.filter.map(Refusal::new),
                })?));
                self.finished = true;
            }
            _ => {}
        }
        Ok(out)
    }
}

impl EventDecoder<ConverseStreamOutput> for ConverseStreamDecoder {
    fn event(&mut self, event: ConverseStreamOutput) -> Result<Vec<StreamEvent>> {
        ConverseStreamDecoder::event(self, &event)
    }

    fn is_finished(&self) -> bool {
        ConverseStreamDecoder::is_finished(self)
    }
}
