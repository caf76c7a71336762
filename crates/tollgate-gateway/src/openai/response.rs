//! Answers in OpenAI's formats: a whole `chat.completion`, or `chat.completion.chunk`
//! frames ending in `data: [DONE]` (with a usage chunk first when the client asked for
//! `stream_options.include_usage`), and the Embeddings API's `list`. The whole answers
//! are public ([`openai_completion`], [`openai_embeddings`]): the `tollgate` command's
//! batch output writes its bodies with them, so the shape is written in one place.

use std::collections::HashMap;

use axum::body::Bytes;
use serde_json::{Value, json};
use tollgate::{Block, LlmResponse, StopReason, StreamEvent, Usage};

use crate::error::Dialect;
use crate::sse::{Encoder, frame};

/// OpenAI's `finish_reason` for a stop reason.
fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn | StopReason::StopSequence => "stop",
        StopReason::MaxTokens | StopReason::ContextWindowExceeded => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::Refusal | StopReason::ContentFilter => "content_filter",
    }
}

/// OpenAI's `usage` object (`prompt_tokens` counts cached input too).
pub(crate) fn usage(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.total_input_tokens(),
        "completion_tokens": u.output_tokens,
        "total_tokens": u.total_tokens(),
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    })
}

/// OpenAI's whole `chat.completion` object for `response`: `id`, `created` (Unix
/// seconds) and `model` as given (the gateway passes the name the client asked for),
/// one choice whose message has the text as `content`, a refusal as `refusal`, and
/// the tool calls as `tool_calls` (`content` null when there are only tool calls),
/// its `finish_reason` from the stop reason, and `usage` (`prompt_tokens` counts cached
/// input too).
///
/// Public so that every OpenAI-shaped answer tollgate writes (the gateway's
/// `/v1/chat/completions`, the `tollgate run` batch output) comes from this one writer.
pub fn openai_completion(id: &str, created: u64, model: &str, response: &LlmResponse) -> Value {
    let text: String = response.text();
    let tool_calls: Vec<Value> = response
        .blocks()
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse {
                id, name, input, ..
            } => Some(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": input.value().to_string()},
            })),
            _ => None,
        })
        .collect();
    let refused = matches!(response.stop_reason(), StopReason::Refusal);
    let mut message = json!({
        "role": "assistant",
        "content": if refused || (text.is_empty() && !tool_calls.is_empty()) { Value::Null } else { Value::from(text.clone()) },
        "refusal": if refused { Value::from(response.refusal_explanation()) } else { Value::Null },
    });
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::from(tool_calls);
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(response.stop_reason()),
            "logprobs": null,
        }],
        "usage": usage(&response.usage()),
    })
}

/// The Embeddings API's `list` object: `data` holds one `embedding` object per entry of
/// `embeddings`, indexed in order (each the vector as a JSON array of floats, or the
/// base64 string of its little-endian `f32`s), under `model`, with `usage` giving
/// `prompt_tokens` as both the prompt and the total.
///
/// Public so that the gateway's `/v1/embeddings` and the `tollgate run` batch output
/// write this shape in one place.
pub fn openai_embeddings(model: &str, embeddings: Vec<Value>, prompt_tokens: u64) -> Value {
    let data: Vec<Value> = embeddings
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| {
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    })
}

/// Encodes a stream's events as `chat.completion.chunk` frames.
pub(crate) struct ChunkEncoder {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    /// Tool calls are numbered from 0 in the order their blocks first appear.
    tool_index: HashMap<usize, usize>,
    opened: bool,
}

impl ChunkEncoder {
    pub(crate) fn new(id: String, created: u64, model: String, include_usage: bool) -> Self {
        ChunkEncoder {
            id,
            created,
            model,
            include_usage,
            tool_index: HashMap::new(),
            opened: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Bytes {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        });
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        frame(None, &chunk.to_string())
    }

    /// The first chunk says who speaks.
    fn open(&mut self, out: &mut Vec<Bytes>) {
        if !self.opened {
            self.opened = true;
            out.push(self.chunk(json!({"role": "assistant", "content": ""}), None));
        }
    }
}

impl Encoder for ChunkEncoder {
    const DIALECT: Dialect = Dialect::OpenAi;

    fn event(&mut self, event: StreamEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        match event {
            StreamEvent::TextDelta { text, .. } => {
                self.open(&mut out);
                out.push(self.chunk(json!({"content": text}), None));
            }
            StreamEvent::ToolUseDelta {
                index,
                id,
                name,
                input_json,
            } => {
                self.open(&mut out);
                let next = self.tool_index.len();
                let n = *self.tool_index.entry(index).or_insert(next);
                let mut call = json!({"index": n, "function": {"arguments": input_json}});
                if let Some(id) = id {
                    call["id"] = Value::from(id);
                    call["type"] = Value::from("function");
                }
                if let Some(name) = name {
                    call["function"]["name"] = Value::from(name);
                }
                out.push(self.chunk(json!({"tool_calls": [call]}), None));
            }
            StreamEvent::Completed(response) => {
                let streamed = self.opened;
                self.open(&mut out);
                // A refusal arrives whole (its text never streamed): sent as the
                // `refusal` delta OpenAI streams it as.
                let text = response.refusal_explanation();
                if !streamed && response.stop_reason() == StopReason::Refusal && !text.is_empty() {
                    out.push(self.chunk(json!({"refusal": text}), None));
                }
                let finish = finish_reason(response.stop_reason());
                out.push(self.chunk(json!({}), Some(finish)));
                if self.include_usage {
                    let last = json!({
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": usage(&response.usage()),
                    });
                    out.push(frame(None, &last.to_string()));
                }
                out.push(frame(None, "[DONE]"));
            }
            // Reasoning has no place in chat completions; usage and the stop reason
            // arrive whole with `Completed`.
            _ => {}
        }
        out
    }

    fn error(&mut self, body: Value) -> Vec<Bytes> {
        vec![frame(None, &body.to_string())]
    }
}
