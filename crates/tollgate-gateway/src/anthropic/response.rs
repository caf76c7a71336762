//! Answers in Anthropic's messages format: a whole `message`, or the SSE sequence
//! `message_start`, per block `content_block_start`/`_delta`/`_stop`, `message_delta`
//! (stop reason and usage), `message_stop`.

use std::collections::HashMap;

use axum::body::Bytes;
use serde_json::{Value, json};
use tollgate::{Block, LlmResponse, StopReason, StreamEvent, Usage};

use crate::error::Dialect;
use crate::sse::{Encoder, frame};

/// Anthropic's `stop_reason` for a stop reason.
fn stop_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::Refusal | StopReason::ContentFilter => "refusal",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
    }
}

/// Anthropic's `usage` object (`input_tokens` excludes cached input).
fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens + u.cache_write_1h_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
    })
}

fn content_block(b: &Block) -> Option<Value> {
    match b {
        Block::Text { text, .. } => Some(json!({"type": "text", "text": text})),
        Block::ToolUse {
            id, name, input, ..
        } => Some(json!({"type": "tool_use", "id": id, "name": name, "input": input.value()})),
        Block::Thinking {
            text, signature, ..
        } => Some(json!({"type": "thinking", "thinking": text, "signature": signature})),
        Block::RedactedThinking { data, .. } => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        // Server tools' blocks, as the provider wrote them.
        Block::Native { provider, value } if provider == "anthropic" => Some(value.value().clone()),
        _ => None,
    }
}

/// A whole `message` for `response`, under the model name the client asked for.
pub(crate) fn message(id: &str, model: &str, response: &LlmResponse) -> Value {
    let content: Vec<Value> = response.blocks().iter().filter_map(content_block).collect();
    let mut message = json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response.stop_reason()),
        "stop_sequence": null,
        "usage": usage(&response.usage()),
    });
    if let Some(category) = response.refusal_category() {
        message["stop_details"] = stop_details(category, &response.refusal_explanation());
    }
    message
}

/// Anthropic's `stop_details` of a refused answer: its category and explanation.
fn stop_details(category: &str, explanation: &str) -> Value {
    json!({"type": "refusal", "category": category, "explanation": explanation})
}

/// Encodes a stream's events as Anthropic's SSE sequence. Blocks are numbered from 0 in
/// the order they first appear, and each is closed before the next opens.
pub(crate) struct EventEncoder {
    id: String,
    model: String,
    started: bool,
    usage: Usage,
    numbers: HashMap<usize, usize>,
    /// The output number of the open block.
    open: Option<usize>,
}

impl EventEncoder {
    pub(crate) fn new(id: String, model: String) -> Self {
        EventEncoder {
            id,
            model,
            started: false,
            usage: Usage::default(),
            numbers: HashMap::new(),
            open: None,
        }
    }

    fn send(name: &str, mut data: Value, out: &mut Vec<Bytes>) {
        data["type"] = Value::from(name);
        out.push(frame(Some(name), &data.to_string()));
    }

    fn start(&mut self, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let mut opening = usage(&self.usage);
        opening["output_tokens"] = Value::from(0);
        let message = json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": opening,
        });
        Self::send("message_start", json!({"message": message}), out);
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if let Some(n) = self.open.take() {
            Self::send("content_block_stop", json!({"index": n}), out);
        }
    }

    /// The output number of provider block `index`, opening it (with `start`, its
    /// opening content) if it is not the open one.
    fn block(&mut self, index: usize, start: Value, out: &mut Vec<Bytes>) -> usize {
        self.start(out);
        let next = self.numbers.len();
        let n = *self.numbers.entry(index).or_insert(next);
        if self.open != Some(n) {
            self.close(out);
            self.open = Some(n);
            Self::send(
                "content_block_start",
                json!({"index": n, "content_block": start}),
                out,
            );
        }
        n
    }
}

impl Encoder for EventEncoder {
    const DIALECT: Dialect = Dialect::Anthropic;

    fn event(&mut self, event: StreamEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        match event {
            StreamEvent::Usage(u) => self.usage = u,
            StreamEvent::TextDelta { index, text } => {
                let n = self.block(index, json!({"type": "text", "text": ""}), &mut out);
                let delta = json!({"index": n, "delta": {"type": "text_delta", "text": text}});
                Self::send("content_block_delta", delta, &mut out);
            }
            StreamEvent::ThinkingDelta { index, text } => {
                let start = json!({"type": "thinking", "thinking": ""});
                let n = self.block(index, start, &mut out);
                let delta =
                    json!({"index": n, "delta": {"type": "thinking_delta", "thinking": text}});
                Self::send("content_block_delta", delta, &mut out);
            }
            StreamEvent::SignatureDelta { index, signature } => {
                let start = json!({"type": "thinking", "thinking": ""});
                let n = self.block(index, start, &mut out);
                let delta = json!({"index": n, "delta": {"type": "signature_delta", "signature": signature}});
                Self::send("content_block_delta", delta, &mut out);
            }
            StreamEvent::WholeBlock { index, block } => {
                if let Some(whole) = content_block(&block) {
                    self.block(index, whole, &mut out);
                }
            }
            StreamEvent::ToolUseDelta {
                index,
                id,
                name,
                input_json,
            } => {
                let start = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
                let n = self.block(index, start, &mut out);
                if !input_json.is_empty() {
                    let delta = json!({"index": n, "delta": {"type": "input_json_delta", "partial_json": input_json}});
                    Self::send("content_block_delta", delta, &mut out);
                }
            }
            StreamEvent::Completed(response) => {
                self.start(&mut out);
                if self.numbers.is_empty() {
                    // An answer that arrived whole (a refusal's explanation): its blocks.
                    for (index, block) in response.blocks().iter().enumerate() {
                        if let Block::Text { text, .. } = block {
                            let n =
                                self.block(index, json!({"type": "text", "text": ""}), &mut out);
                            let delta =
                                json!({"index": n, "delta": {"type": "text_delta", "text": text}});
                            Self::send("content_block_delta", delta, &mut out);
                        }
                    }
                }
                self.close(&mut out);
                let mut delta = json!({
                    "delta": {"stop_reason": stop_reason(response.stop_reason()), "stop_sequence": null},
                    "usage": usage(&response.usage()),
                });
                if let Some(category) = response.refusal_category() {
                    delta["delta"]["stop_details"] =
                        stop_details(category, &response.refusal_explanation());
                }
                Self::send("message_delta", delta, &mut out);
                Self::send("message_stop", json!({}), &mut out);
            }
            // The stop reason arrives whole with `Completed`.
            _ => {}
        }
        out
    }

    fn error(&mut self, body: Value) -> Vec<Bytes> {
        let mut out = Vec::new();
        Self::send("error", body, &mut out);
        out
    }
}
