//! The Responses API's answer: the `response` object (every key OpenAI sends, so strict
//! decoders miss none) and its output items, written here once for whole answers and
//! for each stream event. A thinking block becomes a `reasoning` item whose
//! `encrypted_content` carries the signed block ([`envelope`]); a tool call a
//! `function_call` (or `custom_tool_call`) whose `call_id` is the provider's own id, so a
//! replay pairs up; a refusal a `refusal` part.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use tollgate::{Block, LlmResponse, StopReason, Usage};

use super::envelope;
use super::request::ResponsesRequest;
use super::tools::{CUSTOM_INPUT, Namespaced};
use crate::ids;

/// What the answer echoes of the request, and the names of its custom tools.
#[derive(Debug, Clone)]
pub(crate) struct Echo {
    pub(crate) id: String,
    pub(crate) created_at: u64,
    fields: Value,
    custom_tools: BTreeSet<String>,
    namespaces: BTreeMap<String, Namespaced>,
}

impl Echo {
    /// The echo of `req`, under a fresh `resp_` id.
    pub(crate) fn new(
        req: &ResponsesRequest,
        custom_tools: BTreeSet<String>,
        namespaces: BTreeMap<String, Namespaced>,
    ) -> Self {
        let or_null = |v: &Option<Value>| v.clone().unwrap_or(Value::Null);
        let text = match &req.text {
            Some(t) if t.is_object() => {
                let mut t = t.clone();
                if t.get("format").is_none_or(Value::is_null) {
                    t["format"] = json!({"type": "text"});
                }
                if t.get("verbosity").is_none_or(Value::is_null) {
                    t["verbosity"] = json!("medium");
                }
                t
            }
            _ => json!({"format": {"type": "text"}, "verbosity": "medium"}),
        };
        let reasoning = match &req.reasoning {
            Some(r) if r.is_object() => json!({
                "effort": r.get("effort").cloned().unwrap_or(Value::Null),
                "summary": r.get("summary").cloned().unwrap_or(Value::Null),
            }),
            _ => json!({"effort": null, "summary": null}),
        };
        let fields = json!({
            "instructions": req.instructions,
            "metadata": req.metadata.clone().filter(Value::is_object).unwrap_or_else(|| json!({})),
            "model": req.model,
            "parallel_tool_calls": req.parallel_tool_calls.unwrap_or(true),
            "temperature": req.temperature.unwrap_or(1.0),
            "top_p": req.top_p.unwrap_or(1.0),
            "tool_choice": req.tool_choice.clone().filter(|c| !c.is_null()).unwrap_or_else(|| json!("auto")),
            "tools": or_null(&req.tools).as_array().cloned().unwrap_or_default(),
            "max_output_tokens": req.max_output_tokens,
            "text": text,
            "reasoning": reasoning,
            "truncation": req.truncation.as_deref().unwrap_or("disabled"),
        });
        Echo {
            id: ids::next("resp"),
            created_at: crate::sse::unix_now(),
            fields,
            custom_tools,
            namespaces,
        }
    }

    /// Whether tool `name` is one of the client's custom tools.
    pub(crate) fn is_custom(&self, name: &str) -> bool {
        self.custom_tools.contains(name)
    }

    /// The `response` object with `status`, `output` and (once known) `usage`.
    pub(crate) fn object(&self, status: Status, output: Vec<Value>, usage: Option<Value>) -> Value {
        let mut object = json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status.word(),
            "background": false,
            "error": status.error(),
            "incomplete_details": status.incomplete(),
            "output": output,
            "previous_response_id": null,
            "service_tier": "default",
            "store": false,
            "usage": usage,
            "user": null,
        });
        if let (Some(object), Some(fields)) = (object.as_object_mut(), self.fields.as_object()) {
            for (k, v) in fields {
                object.insert(k.clone(), v.clone());
            }
        }
        object
    }

    /// The whole answer's output items, in block order (fresh item ids).
    pub(crate) fn output(&self, response: &LlmResponse) -> Vec<Value> {
        let refused = response.stop_reason() == StopReason::Refusal;
        let mut out = Vec::new();
        for block in response.blocks() {
            match block {
                Block::Text { text, .. } => {
                    out.push(message_item(&ids::next("msg"), text, refused, "completed"));
                }
                Block::ToolUse {
                    id, name, input, ..
                } => {
                    let arguments = input.value().to_string();
                    out.push(self.call_item(&ids::next("fc"), id, name, &arguments, "completed"));
                }
                Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                    out.push(reasoning_item(&ids::next("rs"), block));
                }
                // OpenAI's own tool items, as OpenAI wrote them.
                Block::Native { provider, value } if provider == "openai" => {
                    out.push(value.value().clone());
                }
                // Other providers' server-tool blocks have no Responses item.
                _ => {}
            }
        }
        // A refusal whose explanation came apart from its text (Anthropic's
        // `stop_details`): the refusal message OpenAI answers with.
        let explained = response.refusal_explanation();
        if refused && response.text().is_empty() && !explained.is_empty() {
            out.push(message_item(
                &ids::next("msg"),
                &explained,
                true,
                "completed",
            ));
        }
        out
    }

    /// A `function_call` item, or a `custom_tool_call` for a custom tool (its freeform
    /// input unwrapped from the `input` argument it travelled in); a namespaced tool's
    /// call has its `namespace` and its own name there.
    pub(crate) fn call_item(
        &self,
        id: &str,
        call_id: &str,
        name: &str,
        arguments: &str,
        status: &str,
    ) -> Value {
        let namespaced = self.namespaces.get(name);
        let wire = name;
        let name = namespaced.map_or(name, |n| n.name.as_str());
        if self.is_custom(wire) {
            let input = serde_json::from_str::<Value>(arguments)
                .ok()
                .and_then(|v| {
                    v.get(CUSTOM_INPUT)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| arguments.to_owned());
            let mut item = json!({
                "id": id, "type": "custom_tool_call", "status": status,
                "call_id": call_id, "name": name, "input": input,
            });
            if let Some(n) = namespaced {
                item["namespace"] = json!(n.namespace);
            }
            return item;
        }
        let mut item = json!({
            "id": id, "type": "function_call", "status": status,
            "call_id": call_id, "name": name, "arguments": arguments,
        });
        if let Some(n) = namespaced {
            item["namespace"] = json!(n.namespace);
        }
        item
    }
}

/// A `message` item of one part: `output_text`, or `refusal` when the model refused.
pub(crate) fn message_item(id: &str, text: &str, refused: bool, status: &str) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "status": status,
        "content": [content_part(text, refused)],
    })
}

/// A message's one content part.
pub(crate) fn content_part(text: &str, refused: bool) -> Value {
    if refused {
        json!({"type": "refusal", "refusal": text})
    } else {
        json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    }
}

/// A `reasoning` item for a thinking block: its text as the summary, the block sealed.
pub(crate) fn reasoning_item(id: &str, block: &Block) -> Value {
    let summary = match block {
        Block::Thinking { text, .. } if !text.is_empty() => {
            vec![json!({"type": "summary_text", "text": text})]
        }
        _ => Vec::new(),
    };
    json!({
        "id": id, "type": "reasoning", "summary": summary,
        "encrypted_content": envelope::seal(block),
    })
}

/// How an answer ended, as the `response` object says it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Status {
    /// Started, not finished (the stream's first events).
    InProgress,
    /// Finished.
    Completed,
    /// Cut off: `max_output_tokens` or `content_filter`.
    Incomplete(&'static str),
    /// Failed after it started: the error's code and message.
    Failed { code: String, message: String },
}

impl Status {
    /// The status an answer that stopped for `stop` ends in.
    pub(crate) fn of(stop: StopReason) -> Status {
        match stop {
            StopReason::EndTurn
            | StopReason::StopSequence
            | StopReason::ToolUse
            | StopReason::Refusal => Status::Completed,
            // No Responses reason for a full context window: the output was cut short.
            StopReason::MaxTokens | StopReason::ContextWindowExceeded => {
                Status::Incomplete("max_output_tokens")
            }
            StopReason::ContentFilter => Status::Incomplete("content_filter"),
        }
    }

    /// The `status` word.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Incomplete(_) => "incomplete",
            Status::Failed { .. } => "failed",
        }
    }

    /// The stream's terminal event for this status.
    pub(crate) fn event(&self) -> &'static str {
        match self {
            Status::InProgress => "response.in_progress",
            Status::Completed => "response.completed",
            Status::Incomplete(_) => "response.incomplete",
            Status::Failed { .. } => "response.failed",
        }
    }

    fn error(&self) -> Value {
        match self {
            Status::Failed { code, message } => json!({"code": code, "message": message}),
            _ => Value::Null,
        }
    }

    fn incomplete(&self) -> Value {
        match self {
            Status::Incomplete(reason) => json!({"reason": reason}),
            _ => Value::Null,
        }
    }
}

/// The Responses `usage` object (`input_tokens` counts cached input too).
pub(crate) fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.total_input_tokens(),
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens + u.cache_write_1h_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.total_tokens(),
    })
}

/// The whole answer to a non-streamed request.
pub(crate) fn whole(echo: &Echo, response: &LlmResponse) -> Value {
    let output = echo.output(response);
    echo.object(
        Status::of(response.stop_reason()),
        output,
        Some(usage(&response.usage())),
    )
}
