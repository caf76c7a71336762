//! OpenAI Responses requests (`POST /v1/responses`), decoded into tollgate's neutral
//! [`LlmRequest`]: `instructions` and `system`/`developer` items as system messages (at
//! their position), message, `function_call`, `function_call_output` and `reasoning`
//! items, function and custom tools, `tool_choice`, `parallel_tool_calls`, `text.format`,
//! `reasoning`, and the sampling fields. The gateway keeps no state: a request that names
//! a stored response, conversation, item or prompt is refused with the field it used, so
//! the client resends the whole input. Fields that only tune OpenAI's own service
//! (`store`, `include`, `service_tier`, `prompt_cache_key`, …) are accepted and ignored.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::{
    Block, Json, LlmRequest, Message, Reasoning, ReasoningEffort, ReasoningSummary, ResponseShape,
    Role, SamplingParams,
};

use super::envelope;
use super::fields::{bad, kind_of, not_kept, str_field};
use super::parts::content;
use super::tools::{CUSTOM_INPUT, Namespaced, Tools, tool_choice, tools};
use crate::error::GatewayError;
use crate::params::client_params;

/// `POST /v1/responses`'s body, as far as the gateway reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct ResponsesRequest {
    pub(crate) model: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    pub(crate) instructions: Option<String>,
    #[serde(default)]
    pub(crate) tools: Option<Value>,
    #[serde(default)]
    pub(crate) tool_choice: Option<Value>,
    #[serde(default)]
    pub(crate) parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub(crate) text: Option<Value>,
    #[serde(default)]
    pub(crate) reasoning: Option<Value>,
    #[serde(default)]
    pub(crate) max_output_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) temperature: Option<f64>,
    #[serde(default)]
    pub(crate) top_p: Option<f64>,
    #[serde(default)]
    top_logprobs: Option<u32>,
    #[serde(default)]
    pub(crate) stream: bool,
    #[serde(default)]
    pub(crate) metadata: Option<Value>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    conversation: Option<Value>,
    #[serde(default)]
    background: Option<bool>,
    #[serde(default)]
    prompt: Option<Value>,
    #[serde(default)]
    pub(crate) truncation: Option<String>,
}

/// The neutral request, and the names of the client's custom tools (sent to the model as
/// functions of one string argument, `input`, and answered as `custom_tool_call`s).
#[derive(Debug)]
pub(crate) struct Decoded {
    pub(crate) request: LlmRequest,
    pub(crate) custom_tools: BTreeSet<String>,
    /// Each namespaced tool by the name the model knows it by: the namespace it was
    /// declared in and its own name there. Its calls are answered with both.
    pub(crate) namespaces: BTreeMap<String, Namespaced>,
}

impl ResponsesRequest {
    /// The neutral request for catalog model `self.model`, or the field that cannot be
    /// served (named, with what to send instead).
    pub(crate) fn decode(&self) -> Result<Decoded, GatewayError> {
        self.refuse_state()?;
        if self.top_logprobs.is_some_and(|n| n > 0) {
            return Err(bad(
                "`top_logprobs` is not supported by the gateway; leave it out".into(),
            ));
        }
        let Tools {
            tools,
            custom: custom_tools,
            namespaces,
        } = tools(self.tools.as_ref())?;
        let mut messages = Vec::new();
        if let Some(text) = self.instructions.as_deref().filter(|t| !t.is_empty()) {
            messages.push(Message::new(Role::System, text));
        }
        match &self.input {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => messages.push(Message::new(Role::User, text.clone())),
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    input_item(item, i, &namespaces, &mut messages)?;
                }
            }
            Some(other) => {
                return Err(bad(format!(
                    "`input` must be a string or a list of items, not {}",
                    kind_of(other)
                )));
            }
        }
        let params = self.params()?;
        let request = LlmRequest::new(self.model.clone(), messages, tools, params)?;
        Ok(Decoded {
            request,
            custom_tools,
            namespaces,
        })
    }

    /// The fields that need server-side storage, which the gateway does not keep.
    fn refuse_state(&self) -> Result<(), GatewayError> {
        if let Some(id) = &self.previous_response_id {
            return Err(not_kept(
                "previous_response_id",
                "previous_response_not_found",
                format!(
                    "Previous response with id '{id}' not found: the gateway keeps no \
                     responses; send the whole conversation in `input` (store: false)"
                ),
            ));
        }
        if self.conversation.as_ref().is_some_and(|c| !c.is_null()) {
            return Err(not_kept(
                "conversation",
                "conversation_not_found",
                "the gateway keeps no conversations; send the whole conversation in `input`".into(),
            ));
        }
        if self.background == Some(true) {
            return Err(not_kept(
                "background",
                "invalid_request",
                "`background: true` needs stored responses, which the gateway does not keep; \
                 send the request without it (streamed, if it is long)"
                    .into(),
            ));
        }
        if self.prompt.as_ref().is_some_and(|p| !p.is_null()) {
            return Err(not_kept(
                "prompt",
                "invalid_request",
                "stored prompt templates are not kept by the gateway; send the prompt's text \
                 in `instructions` and `input`"
                    .into(),
            ));
        }
        Ok(())
    }

    fn params(&self) -> Result<SamplingParams, GatewayError> {
        let mut params = client_params(self.temperature, self.top_p, self.max_output_tokens)?;
        if let Some(choice) = self.tool_choice.as_ref().filter(|c| !c.is_null()) {
            params = params.with_tool_choice(tool_choice(choice)?);
        }
        if let Some(parallel) = self.parallel_tool_calls {
            params = params.with_parallel_tool_calls(parallel);
        }
        if let Some(text) = self.text.as_ref().filter(|t| !t.is_null()) {
            params = text_format(text, params)?;
        }
        if let Some(reasoning) = self.reasoning.as_ref().filter(|r| !r.is_null()) {
            let reasoning = reasoning_of(reasoning)?;
            if !reasoning.is_empty() {
                params = params.with_reasoning(reasoning)?;
            }
        }
        Ok(params)
    }
}

/// `text.format` (`text`, `json_object`, `json_schema`) and `text.verbosity` (written
/// by OpenAI upstreams, a hint left out by the others).
fn text_format(text: &Value, mut params: SamplingParams) -> Result<SamplingParams, GatewayError> {
    if let Some(v) = text.get("verbosity").filter(|v| !v.is_null()) {
        let said = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        params = params.with_verbosity(crate::params::verbosity(&said, "text.verbosity")?);
    }
    let Some(format) = text.get("format").filter(|f| !f.is_null()) else {
        return Ok(params);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(params),
        Some("json_object") => Ok(params.with_json_object()),
        Some("json_schema") => {
            let name = str_field(format, "name", "text.format")?;
            let schema = format
                .get("schema")
                .cloned()
                .ok_or_else(|| bad("`text.format.schema` is required for json_schema".into()))?;
            let strict = format.get("strict").and_then(Value::as_bool);
            Ok(params.with_response_shape(ResponseShape {
                name: name.to_owned(),
                schema: Json::new(schema),
                strict,
            }))
        }
        _ => Err(bad(format!(
            "`text.format.type` in {format} is not one of text, json_object, json_schema"
        ))),
    }
}

/// `reasoning`: `effort` and `summary` (or the older `generate_summary`); `context` and
/// `mode` tune OpenAI's own service and are left out.
fn reasoning_of(value: &Value) -> Result<Reasoning, GatewayError> {
    let mut reasoning = Reasoning::default();
    if let Some(effort) = value.get("effort").filter(|e| !e.is_null()) {
        let parsed = effort.as_str().and_then(ReasoningEffort::parse);
        reasoning.effort = Some(parsed.ok_or_else(|| {
            bad(format!(
                "`reasoning.effort` {effort} is not one of {}",
                ReasoningEffort::ACCEPTED
            ))
        })?);
    }
    let summary = value
        .get("summary")
        .filter(|s| !s.is_null())
        .or_else(|| value.get("generate_summary").filter(|s| !s.is_null()));
    if let Some(summary) = summary {
        reasoning.summary = Some(match summary.as_str() {
            Some("auto") => ReasoningSummary::Auto,
            Some("concise") => ReasoningSummary::Concise,
            Some("detailed") => ReasoningSummary::Detailed,
            _ => {
                return Err(bad(format!(
                    "`reasoning.summary` {summary} is not one of auto, concise, detailed"
                )));
            }
        });
    }
    Ok(reasoning)
}

/// Appends `block` to the last message when it has `role` and only blocks that `fits`
/// accepts, else opens a new message.
fn push(messages: &mut Vec<Message>, role: Role, block: Block, fits: fn(&Block) -> bool) {
    match messages.last_mut() {
        Some(last) if last.role == role && last.content.iter().all(fits) => {
            last.content.push(block);
        }
        _ => messages.push(Message {
            role,
            content: vec![block],
        }),
    }
}

fn is_tool_result(b: &Block) -> bool {
    matches!(b, Block::ToolResult { .. })
}

fn any_block(_: &Block) -> bool {
    true
}

/// One item of `input`, added to `messages`.
fn input_item(
    item: &Value,
    i: usize,
    namespaces: &BTreeMap<String, Namespaced>,
    messages: &mut Vec<Message>,
) -> Result<(), GatewayError> {
    let path = format!("input[{i}]");
    let kind = match item.get("type").and_then(Value::as_str) {
        Some(kind) => kind,
        // A message may leave its type out.
        None if item.get("role").is_some() => "message",
        None => return Err(bad(format!("`{path}.type` is required"))),
    };
    match kind {
        "message" => {
            let role = match str_field(item, "role", &path)? {
                "system" | "developer" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(bad(format!(
                        "`{path}.role` `{other}` is not one of user, assistant, system, developer"
                    )));
                }
            };
            let content = content(item.get("content"), &path)?;
            if role == Role::Assistant {
                // An assistant turn is one message with its calls, as the providers take it.
                for block in content {
                    push(messages, Role::Assistant, block, any_block);
                }
            } else {
                messages.push(Message { role, content });
            }
        }
        "function_call" | "custom_tool_call" => {
            let call_id = str_field(item, "call_id", &path)?;
            let mut name = str_field(item, "name", &path)?;
            // A namespaced tool's call goes back under the name the model knows it by.
            if let Some(namespace) = item.get("namespace").and_then(Value::as_str) {
                let sent = namespaces
                    .iter()
                    .find(|(_, n)| n.namespace == namespace && n.name == name);
                if let Some((wire, _)) = sent {
                    name = wire;
                }
            }
            let input = if kind == "custom_tool_call" {
                json!({CUSTOM_INPUT: item.get("input").and_then(Value::as_str).unwrap_or("")})
            } else {
                let arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                if arguments.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(arguments).map_err(|e| {
                        bad(format!("`{path}.arguments` of `{name}` is not JSON: {e}"))
                    })?
                }
            };
            let block = Block::ToolUse {
                id: call_id.to_owned(),
                name: name.to_owned(),
                input: Json::new(input),
                cache: None,
            };
            push(messages, Role::Assistant, block, any_block);
        }
        "function_call_output" | "custom_tool_call_output" => {
            let call_id = str_field(item, "call_id", &path)?;
            let content = match item.get("output") {
                Some(Value::String(text)) if text.is_empty() => Vec::new(),
                Some(Value::String(text)) => vec![Block::text(text.clone())],
                Some(parts @ Value::Array(_)) => content(Some(parts), &format!("{path}.output"))?,
                _ => {
                    return Err(bad(format!(
                        "`{path}.output` is required: a string or a list of parts"
                    )));
                }
            };
            let block = Block::ToolResult {
                tool_use_id: call_id.to_owned(),
                content,
                is_error: false,
                cache: None,
            };
            push(messages, Role::User, block, is_tool_result);
        }
        "reasoning" => {
            if let Some(block) = reasoning_item(item, &path)? {
                push(messages, Role::Assistant, block, any_block);
            }
        }
        // The calls of OpenAI's own tools and their results, kept as OpenAI's items (only
        // an OpenAI Responses upstream takes them back).
        other
            if other.ends_with("_call")
                || other.ends_with("_call_output")
                || other.starts_with("mcp_")
                || other == "compaction" =>
        {
            let block = Block::Native {
                provider: "openai".into(),
                value: Json::new(item.clone()),
            };
            push(messages, Role::Assistant, block, any_block);
        }
        "item_reference" => {
            return Err(not_kept(
                &path,
                "invalid_request",
                format!(
                    "`{path}` is an item_reference, but the gateway keeps no items; send the \
                     item itself (set store: false; AI SDK: providerOptions.openai.store = false)"
                ),
            ));
        }
        other => {
            return Err(bad(format!(
                "`{path}.type` `{other}` is not served by the gateway (it serves message, \
                 function_call, function_call_output, custom_tool_call, \
                 custom_tool_call_output and reasoning items)"
            )));
        }
    }
    Ok(())
}

/// A reasoning item: the block the gateway wrapped in `encrypted_content` when it
/// answered, else its summary as thinking signed by OpenAI (which other providers drop).
fn reasoning_item(item: &Value, path: &str) -> Result<Option<Block>, GatewayError> {
    let encrypted = item.get("encrypted_content").and_then(Value::as_str);
    if let Some(block) = encrypted.and_then(envelope::open) {
        return Ok(Some(block));
    }
    let summary: String = item
        .get("summary")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default();
    if summary.is_empty() && encrypted.is_none() {
        return Ok(None);
    }
    if encrypted.is_some_and(envelope::is_sealed) {
        return Err(bad(format!(
            "`{path}.encrypted_content` looks like the gateway's but cannot be read; send the \
             reasoning item as the gateway answered it"
        )));
    }
    // OpenAI's signature as tollgate-openai's Responses codec keeps it: the item's id and
    // its encrypted copy, joined by a space (`codec::reasoning_signature`), so both go
    // back to OpenAI.
    let signature = match (item.get("id").and_then(Value::as_str), encrypted) {
        (Some(id), Some(encrypted)) => Some(format!("{id} {encrypted}")),
        (None, encrypted) => encrypted.map(str::to_owned),
        (Some(_), None) => None,
    };
    Ok(Some(Block::Thinking {
        text: summary,
        signature,
        origin: Some("openai".into()),
        cache: None,
    }))
}

impl crate::auth::ForModel for ResponsesRequest {
    type Error = crate::failure::OpenAiError;

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
