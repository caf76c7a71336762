//! Streamed Responses answers: `response.created` and `response.in_progress`, then per
//! output item `output_item.added`, its parts and deltas, its `.done` events and
//! `output_item.done`, and last `response.completed` (or `response.incomplete`, or
//! `response.failed` after an `error` event). Every event carries its `type` and a
//! `sequence_number` from 0; `item_id` is always the item's `id`; items are closed in
//! order, each before the next opens, as OpenAI streams them.

use std::collections::HashSet;

use axum::body::Bytes;
use serde_json::{Value, json};
use tollgate::{Block, LlmResponse, StreamEvent};

use super::output::{Echo, Status, content_part, message_item, reasoning_item, usage};
use super::tools::CUSTOM_INPUT;
use crate::error::Dialect;
use crate::ids;
use crate::sse::{Encoder, frame};

/// The item being streamed.
#[derive(Debug)]
struct Open {
    /// The provider's block index it came from.
    block: usize,
    id: String,
    kind: OpenKind,
}

#[derive(Debug)]
enum OpenKind {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// Encodes a stream's events as Responses events.
pub(crate) struct EventEncoder {
    echo: Echo,
    /// The provider key a streamed thinking block is sealed as signed by.
    provider: String,
    seq: u64,
    started: bool,
    /// Finished items, in output order.
    items: Vec<Value>,
    open: Option<Open>,
    /// Provider blocks already finished (a late delta for one is dropped, not reopened).
    closed: HashSet<usize>,
    /// Whether any answer text has been streamed (a refusal that came whole has not).
    streamed_text: bool,
}

/// The provider a catalog provider key's codec signs thinking as (a [`Block::Thinking`]
/// `origin`): the first-party keys' signers, else the key itself (a third-party codec).
pub(crate) fn signer_of(provider_key: &str) -> &str {
    match provider_key {
        "anthropic-direct" => "anthropic",
        "anthropic-bedrock" | "bedrock-converse" => "bedrock",
        "openai" | "openai-compatible" => "openai",
        "gemini" | "vertex" => "gemini",
        other => other,
    }
}

impl EventEncoder {
    /// The encoder of a stream from a model of catalog provider key `provider`.
    pub(crate) fn new(echo: Echo, provider: &str) -> Self {
        EventEncoder {
            echo,
            provider: signer_of(provider).to_owned(),
            streamed_text: false,
            seq: 0,
            started: false,
            items: Vec::new(),
            open: None,
            closed: HashSet::new(),
        }
    }

    fn send(&mut self, name: &str, mut data: Value, out: &mut Vec<Bytes>) {
        data["type"] = Value::from(name);
        data["sequence_number"] = Value::from(self.seq);
        self.seq += 1;
        out.push(frame(Some(name), &data.to_string()));
    }

    fn start(&mut self, out: &mut Vec<Bytes>) {
        if self.started {
            return;
        }
        self.started = true;
        let object = self.echo.object(Status::InProgress, Vec::new(), None);
        self.send("response.created", json!({"response": object}), out);
        let object = self.echo.object(Status::InProgress, Vec::new(), None);
        self.send("response.in_progress", json!({"response": object}), out);
    }

    /// Where the open item sits in the output.
    fn index(&self) -> usize {
        self.items.len()
    }

    /// Makes provider block `block` the open item, opening it as `kind` (and closing the
    /// one before) unless it already is; `false` for a block already finished.
    fn open(&mut self, block: usize, kind: OpenKind, out: &mut Vec<Bytes>) -> bool {
        self.start(out);
        if self.open.as_ref().is_some_and(|o| o.block == block) {
            return true;
        }
        if self.closed.contains(&block) {
            return false;
        }
        self.close(out);
        let output_index = self.index();
        let (id, item) = match &kind {
            OpenKind::Text(_) => {
                let id = ids::next("msg");
                let item = json!({"id": id, "type": "message", "role": "assistant",
                    "status": "in_progress", "content": []});
                (id, item)
            }
            OpenKind::Thinking { .. } => {
                let id = ids::next("rs");
                (
                    id.clone(),
                    json!({"id": id, "type": "reasoning", "summary": []}),
                )
            }
            OpenKind::Call { call_id, name, .. } => {
                let id = ids::next("fc");
                let mut item = self.echo.call_item(&id, call_id, name, "", "in_progress");
                if item["type"] == "custom_tool_call" {
                    item["input"] = json!("");
                }
                (id, item)
            }
        };
        self.send(
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        if matches!(kind, OpenKind::Text(_)) {
            let part = content_part("", false);
            self.send(
                "response.content_part.added",
                json!({"item_id": id, "output_index": output_index, "content_index": 0, "part": part}),
                out,
            );
        }
        self.open = Some(Open { block, id, kind });
        true
    }

    /// Finishes the open item: its `.done` events and `output_item.done`.
    fn close(&mut self, out: &mut Vec<Bytes>) {
        let Some(Open { block, id, kind }) = self.open.take() else {
            return;
        };
        self.closed.insert(block);
        let output_index = self.index();
        let at = json!({"item_id": id, "output_index": output_index});
        let with = |extra: Value| {
            let mut v = at.clone();
            if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
                v.extend(extra.clone());
            }
            v
        };
        let item = match kind {
            OpenKind::Text(text) => {
                self.send(
                    "response.output_text.done",
                    with(json!({"content_index": 0, "text": text, "logprobs": []})),
                    out,
                );
                let part = content_part(&text, false);
                self.send(
                    "response.content_part.done",
                    with(json!({"content_index": 0, "part": part})),
                    out,
                );
                message_item(&id, &text, false, "completed")
            }
            OpenKind::Thinking { text, signature } => {
                if !text.is_empty() {
                    self.send(
                        "response.reasoning_summary_text.done",
                        with(json!({"summary_index": 0, "text": text})),
                        out,
                    );
                    let part = json!({"type": "summary_text", "text": text});
                    self.send(
                        "response.reasoning_summary_part.done",
                        with(json!({"summary_index": 0, "part": part})),
                        out,
                    );
                }
                let block = Block::Thinking {
                    text,
                    signature,
                    origin: Some(self.provider.clone()),
                    cache: None,
                };
                reasoning_item(&id, &block)
            }
            OpenKind::Call {
                call_id,
                name,
                arguments,
            } => {
                let arguments = if arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    arguments
                };
                let item = self
                    .echo
                    .call_item(&id, &call_id, &name, &arguments, "completed");
                if item["type"] == "custom_tool_call" {
                    // The freeform input travelled as one JSON argument: sent once, whole.
                    let input = item[CUSTOM_INPUT].clone();
                    self.send(
                        "response.custom_tool_call_input.delta",
                        with(json!({"delta": input})),
                        out,
                    );
                    self.send(
                        "response.custom_tool_call_input.done",
                        with(json!({"input": input})),
                        out,
                    );
                } else {
                    self.send(
                        "response.function_call_arguments.done",
                        with(json!({"arguments": arguments, "name": name})),
                        out,
                    );
                }
                item
            }
        };
        self.send(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        self.items.push(item);
    }

    /// An item that arrives whole (redacted thinking): added and done at once.
    fn whole_item(&mut self, block: usize, item: Value, out: &mut Vec<Bytes>) {
        self.start(out);
        self.close(out);
        self.closed.insert(block);
        let output_index = self.index();
        self.send(
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        self.send(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        self.items.push(item);
    }

    fn text(&mut self, index: usize, text: String, out: &mut Vec<Bytes>) {
        if !self.open(index, OpenKind::Text(String::new()), out) {
            return;
        }
        let output_index = self.index();
        self.streamed_text = true;
        let Some(open) = &mut self.open else { return };
        let id = open.id.clone();
        if let OpenKind::Text(all) = &mut open.kind {
            all.push_str(&text);
        }
        self.send(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": output_index, "content_index": 0,
                "delta": text, "logprobs": []}),
            out,
        );
    }

    /// The answer's items when the stream carried none of its blocks as deltas (an
    /// answer that arrived whole), streamed as OpenAI would stream them.
    fn replay(&mut self, response: &LlmResponse, out: &mut Vec<Bytes>) {
        let refused = response.stop_reason() == tollgate::StopReason::Refusal;
        for (index, block) in response.blocks().iter().enumerate() {
            match block {
                // A refusal: one message of a `refusal` part, as OpenAI answers it.
                Block::Text { text, .. } if refused => {
                    let item = message_item(&ids::next("msg"), text, true, "completed");
                    self.streamed_text = true;
                    self.whole_item(index, item, out);
                }
                Block::Text { text, .. } => self.text(index, text.clone(), out),
                Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                    let item = reasoning_item(&ids::next("rs"), block);
                    self.whole_item(index, item, out);
                }
                Block::ToolUse {
                    id, name, input, ..
                } => {
                    self.call(
                        index,
                        Some(id.clone()),
                        Some(name.clone()),
                        input.value().to_string(),
                        out,
                    );
                }
                // OpenAI's own tool items, as OpenAI wrote them.
                Block::Native { provider, value } if provider == "openai" => {
                    self.whole_item(index, value.value().clone(), out);
                }
                _ => {}
            }
        }
    }

    fn thinking(&mut self, index: usize, text: String, out: &mut Vec<Bytes>) {
        let kind = OpenKind::Thinking {
            text: String::new(),
            signature: None,
        };
        if !self.open(index, kind, out) || text.is_empty() {
            return;
        }
        let output_index = self.index();
        let Some(open) = &mut self.open else { return };
        let id = open.id.clone();
        let OpenKind::Thinking { text: all, .. } = &mut open.kind else {
            return;
        };
        let first = all.is_empty();
        all.push_str(&text);
        if first {
            let part = json!({"type": "summary_text", "text": ""});
            self.send(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": output_index, "summary_index": 0, "part": part}),
                out,
            );
        }
        self.send(
            "response.reasoning_summary_text.delta",
            json!({"item_id": id, "output_index": output_index, "summary_index": 0, "delta": text}),
            out,
        );
    }

    fn call(
        &mut self,
        index: usize,
        id: Option<String>,
        name: Option<String>,
        input_json: String,
        out: &mut Vec<Bytes>,
    ) {
        let kind = OpenKind::Call {
            call_id: id.unwrap_or_else(|| ids::next("call")),
            name: name.unwrap_or_default(),
            arguments: String::new(),
        };
        if !self.open(index, kind, out) || input_json.is_empty() {
            return;
        }
        let output_index = self.index();
        let Some(open) = &mut self.open else { return };
        let item_id = open.id.clone();
        let OpenKind::Call {
            arguments, name, ..
        } = &mut open.kind
        else {
            return;
        };
        arguments.push_str(&input_json);
        // A custom tool's input is sent whole when it closes (it is unwrapped from JSON).
        if !self.echo.is_custom(name) {
            self.send(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": output_index, "delta": input_json}),
                out,
            );
        }
    }
}

impl Encoder for EventEncoder {
    const DIALECT: Dialect = Dialect::OpenAi;

    fn event(&mut self, event: StreamEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        match event {
            StreamEvent::TextDelta { index, text } => self.text(index, text, &mut out),
            StreamEvent::ThinkingDelta { index, text } => self.thinking(index, text, &mut out),
            StreamEvent::SignatureDelta { index, signature } => {
                self.thinking(index, String::new(), &mut out);
                if let Some(Open {
                    kind: OpenKind::Thinking { signature: sig, .. },
                    ..
                }) = &mut self.open
                {
                    sig.get_or_insert_with(String::new).push_str(&signature);
                }
            }
            StreamEvent::WholeBlock {
                index,
                block: Block::Native { provider, value },
            } if provider == "openai" => {
                self.whole_item(index, value.value().clone(), &mut out);
            }
            StreamEvent::WholeBlock {
                index,
                block: Block::RedactedThinking { data, origin },
            } => {
                let block = Block::RedactedThinking {
                    data,
                    origin: origin.or_else(|| Some(self.provider.clone())),
                };
                let item = reasoning_item(&ids::next("rs"), &block);
                self.whole_item(index, item, &mut out);
            }
            StreamEvent::ToolUseDelta {
                index,
                id,
                name,
                input_json,
            } => self.call(index, id, name, input_json, &mut out),
            StreamEvent::Completed(response) => {
                self.start(&mut out);
                if self.items.is_empty() && self.open.is_none() {
                    self.replay(&response, &mut out);
                }
                self.close(&mut out);
                // A refusal that came whole after other items (reasoning, say): its text,
                // never streamed, as the refusal message OpenAI answers with.
                let refused = matches!(
                    response.stop_reason(),
                    tollgate::StopReason::Refusal | tollgate::StopReason::ContentFilter
                );
                let text = response.refusal_explanation();
                if refused && !self.streamed_text && !text.is_empty() {
                    let item = message_item(&ids::next("msg"), &text, true, "completed");
                    self.streamed_text = true;
                    let block = response.blocks().len() + self.items.len();
                    self.whole_item(block, item, &mut out);
                }
                let status = Status::of(response.stop_reason());
                let event = status.event();
                let object =
                    self.echo
                        .object(status, self.items.clone(), Some(usage(&response.usage())));
                self.send(event, json!({"response": object}), &mut out);
            }
            // Usage and the stop reason arrive whole with `Completed`.
            _ => {}
        }
        out
    }

    fn error(&mut self, body: Value) -> Vec<Bytes> {
        let mut out = Vec::new();
        self.start(&mut out);
        let error = &body["error"];
        let message = error["message"]
            .as_str()
            .unwrap_or("the answer failed")
            .to_owned();
        // The codes clients act on: Codex retries `rate_limit_exceeded`.
        let code = match error["type"].as_str() {
            Some("rate_limit_error") => "rate_limit_exceeded".to_owned(),
            Some("server_error") => "server_error".to_owned(),
            _ => error["code"].as_str().unwrap_or("server_error").to_owned(),
        };
        self.send(
            "error",
            json!({"code": code, "message": message, "param": error["param"]}),
            &mut out,
        );
        let object = self
            .echo
            .object(Status::Failed { code, message }, self.items.clone(), None);
        self.send("response.failed", json!({"response": object}), &mut out);
        out
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
