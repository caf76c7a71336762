//! Streamed Responses answers: [`ResponsesEvents`] reads the typed events
//! (`response.output_item.added`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.reasoning_summary_text.delta`,
//! `response.output_item.done`, `response.completed` / `incomplete` / `failed`, `error`)
//! into tollgate's [`StreamEvent`]s, and the terminal event's `response` object into
//! the whole answer. It ends at the terminal event; a body that ends before one was cut.

use serde_json::Value;
use tollgate::provider::{BlockAssembler, ChunkDecoder, parse_json};
use tollgate::provider::{ProviderError, Result, StreamEvent};

use super::errors::read_stream_error;
use super::responses::{finish_response, item_blocks, reasoning_signature};

/// Where a streamed block comes from: an output item and, in a message, its part.
type Slot = (u64, u64);

/// The decoder OpenAI's Responses streams run through: the kit's shell around
/// [`ResponsesEvents`].
pub type ResponsesStreamDecoder = tollgate::provider::StreamDecoder<ResponsesEvents>;

/// Turns Responses stream events into [`StreamEvent`]s. Blocks are numbered in order of
/// first appearance; a reasoning item's signature (its id and `encrypted_content`)
/// arrives with its `output_item.done`. A refusal part becomes
/// [`Error::ProviderRefusal`](tollgate::Error::ProviderRefusal) at the end, as in a
/// whole answer; `response.failed` and `error` events are read as error bodies.
#[derive(Debug, Default)]
pub struct ResponsesEvents {
    blocks: BlockAssembler<Slot>,
    /// The calls whose arguments came as deltas (the others' come whole with `.done`).
    argued: std::collections::HashSet<u64>,
    refusal: String,
    finished: bool,
}

fn index(event: &Value, key: &str) -> u64 {
    event[key].as_u64().unwrap_or(0)
}

impl ResponsesEvents {
    fn item_added(&mut self, event: &Value) -> Result<Vec<StreamEvent>> {
        let item = &event["item"];
        let slot = (index(event, "output_index"), 0);
        Ok(match item["type"].as_str() {
            Some("function_call") => {
                let call_id = item["call_id"].as_str().unwrap_or_default();
                let name = item["name"].as_str().unwrap_or_default();
                let arguments = item["arguments"].as_str().unwrap_or_default();
                vec![self.blocks.tool_use(slot, call_id, name, arguments)?]
            }
            Some("reasoning") => self.blocks.thinking(slot, "")?.into_iter().collect(),
            // A message's parts open with their first delta; built-in tools' items are
            // not asked for.
            _ => Vec::new(),
        })
    }

    fn item_done(&mut self, event: &Value) -> Result<Vec<StreamEvent>> {
        let item = &event["item"];
        let slot = (index(event, "output_index"), 0);
        let mut out = Vec::new();
        // A server that streams no argument deltas gives the arguments whole here.
        if item["type"] == "function_call"
            && !self.argued.contains(&slot.0)
            && self.blocks.contains(&slot)
        {
            let arguments = item["arguments"].as_str().unwrap_or_default();
            out.extend(self.blocks.tool_input(slot, arguments)?);
        }
        if item["type"] == "reasoning"
            && let Some(encrypted) = item["encrypted_content"].as_str()
        {
            let id = item["id"].as_str().unwrap_or("rs");
            out.extend(
                self.blocks
                    .signature(slot, &reasoning_signature(id, encrypted))?,
            );
        }
        // An item of OpenAI's own tools arrives whole with its `.done`.
        if !matches!(
            item["type"].as_str(),
            None | Some("message" | "function_call" | "reasoning")
        ) {
            let block = tollgate::provider::Block::Native {
                provider: "openai".into(),
                value: tollgate::provider::Json::new(item.clone()),
            };
            out.push(self.blocks.whole(slot, block)?);
        }
        if item["type"] == "message" {
            for part in item["content"].as_array().into_iter().flatten() {
                if part["type"] == "refusal" && self.refusal.is_empty() {
                    self.refusal
                        .push_str(part["refusal"].as_str().unwrap_or_default());
                }
            }
        }
        Ok(out)
    }

    /// The terminal `response` object: the answer from what streamed, checked against
    /// the object's own items when no delta carried them.
    fn complete(&mut self, response: &Value) -> Result<Vec<StreamEvent>> {
        self.finished = true;
        // Signed as the whole answer's thinking is, so both replay the same way.
        let mut streamed = self.blocks.finish_signed_by("openai")?;
        if streamed.is_empty() {
            // An answer that came whole in the terminal event.
            for item in response["output"].as_array().into_iter().flatten() {
                item_blocks(item, &mut streamed, &mut self.refusal)?;
            }
        }
        let usage = super::responses::usage_of(&response["usage"]);
        let answer = finish_response(response, streamed, &self.refusal)?;
        Ok(vec![
            StreamEvent::Usage(usage),
            StreamEvent::Stop(answer.stop_reason()),
            StreamEvent::Completed(answer),
        ])
    }
}

/// The error type a `response.failed` code stands for (the Responses error codes are not
/// the chat error types): the request's own fault, quota, a rate limit, else the server.
fn failed_kind(code: &str) -> &'static str {
    match code {
        "rate_limit_exceeded" => "rate_limit_exceeded",
        "insufficient_quota" => "insufficient_quota",
        "invalid_prompt"
        | "bio_policy"
        | "context_length_exceeded"
        | "invalid_request_error"
        | "data_residency_mismatch" => "invalid_request_error",
        _ => "server_error",
    }
}

impl ChunkDecoder for ResponsesEvents {
    fn chunk(&mut self, data: &str) -> Result<Vec<StreamEvent>> {
        if data.trim_start().starts_with("[DONE]") {
            return if self.finished {
                Ok(Vec::new())
            } else {
                Err(
                    ProviderError::closed_early("the stream ended before response.completed")
                        .into(),
                )
            };
        }
        let event: Value = parse_json(data.as_bytes())?;
        let slot = (
            index(&event, "output_index"),
            index(&event, "content_index"),
        );
        let delta = event["delta"].as_str().unwrap_or_default();
        Ok(match event["type"].as_str().unwrap_or_default() {
            "response.output_item.added" => self.item_added(&event)?,
            "response.output_item.done" => self.item_done(&event)?,
            "response.output_text.delta" => self.blocks.text(slot, delta)?.into_iter().collect(),
            "response.refusal.delta" => {
                self.refusal.push_str(delta);
                Vec::new()
            }
            "response.function_call_arguments.delta" => {
                self.argued.insert(slot.0);
                let slot = (slot.0, 0);
                self.blocks.tool_input(slot, delta)?.into_iter().collect()
            }
            "response.reasoning_summary_part.added" if index(&event, "summary_index") > 0 => {
                let slot = (slot.0, 0);
                self.blocks.thinking(slot, "\n\n")?.into_iter().collect()
            }
            "response.reasoning_summary_text.delta" => {
                let slot = (slot.0, 0);
                self.blocks.thinking(slot, delta)?.into_iter().collect()
            }
            "response.completed" | "response.incomplete" => self.complete(&event["response"])?,
            "response.failed" => {
                self.finished = true;
                let error = &event["response"]["error"];
                let body = serde_json::json!({"error": {
                    "message": error["message"], "code": error["code"],
                    "type": failed_kind(error["code"].as_str().unwrap_or_default()),
                }});
                return Err(read_stream_error(&body.to_string()).verdict());
            }
            "error" => {
                self.finished = true;
                let error = event.get("error").cloned().unwrap_or_else(|| event.clone());
                let body = serde_json::json!({"error": error});
                return Err(read_stream_error(&body.to_string()).verdict());
            }
            // Created, in progress, part boundaries, `.done` events, annotations: the
            // text they repeat has already come as deltas.
            _ => Vec::new(),
        })
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn ended(&mut self) -> Result<Vec<StreamEvent>> {
        Err(ProviderError::closed_early("the stream ended before response.completed").into())
    }
}
