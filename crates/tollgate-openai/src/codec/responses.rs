//! The Responses API's bodies (`POST /v1/responses`): [`encode_responses_request`] and
//! [`decode_responses_response`]. Requests are stateless (`store: false`): the whole
//! conversation goes in `input` as items (system messages at their position, messages,
//! `function_call`, `function_call_output`, `reasoning`). A thinking block that OpenAI
//! signed goes back as its `reasoning` item: its signature is the item's id and its
//! `encrypted_content`, joined by one space ([`reasoning_signature`]); thinking signed
//! elsewhere is left out, as every codec leaves out another provider's signature.

use serde_json::{Map, Value, json};
use tollgate::provider::{
    Block, DocumentSource, Error, Json, LlmRequest, LlmResponse, Refusal, ResponseBody, Result,
    Role, StopReason, Usage,
};
use tollgate::provider::{
    Setting, ToolChoice, keep_raw, parse_json, refuse_unwritten, undecodable,
};

use super::request::{image_url, shape_name, tool_result_text};

/// The provider key thinking is signed under.
const ORIGIN: &str = "openai";

/// The request settings the Responses API writes; any other is refused, never dropped.
/// (It has no `seed`.)
const WRITES: &[Setting] = &[
    Setting::Tools,
    Setting::Shape,
    Setting::ToolChoice,
    Setting::ParallelToolCalls,
    Setting::ReasoningEffort,
    Setting::ReasoningSummary,
    Setting::JsonObject,
    Setting::LooseShape,
    Setting::ToolStrict,
    Setting::Verbosity,
];

/// What a Responses body needs besides the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponsesOptions {
    /// The provider's model name, sent as `model`.
    pub model: String,
    /// The output limit when the request has none; `None` sends no limit.
    pub max_tokens: Option<u64>,
    /// Sends `"stream": true`.
    pub stream: bool,
    /// The catalog's `tool_choice` (only sent when the request has tools and no choice
    /// of its own).
    pub tool_choice: ToolChoice,
}

/// The signature of a thinking block from a `reasoning` item: its id and its
/// `encrypted_content`, so both go back when it is replayed.
pub fn reasoning_signature(id: &str, encrypted: &str) -> String {
    format!("{id} {encrypted}")
}

/// The item id and `encrypted_content` of a signature made by [`reasoning_signature`].
fn split_signature(signature: &str) -> (Option<&str>, &str) {
    match signature.split_once(' ') {
        Some((id, encrypted)) => (Some(id), encrypted),
        None => (None, signature),
    }
}

fn tool_choice_json(choice: &ToolChoice) -> Option<Value> {
    match choice {
        ToolChoice::Auto => Some(json!("auto")),
        ToolChoice::Required => Some(json!("required")),
        ToolChoice::None => Some(json!("none")),
        ToolChoice::Tool(name) => Some(json!({"type": "function", "name": name})),
    }
}

/// Encodes `request` as a Responses body. Fails with [`Error::UnsupportedSetting`] for
/// a setting the API does not take, and [`Error::InvalidRequest`] for content it cannot
/// carry, before anything is sent.
pub fn encode_responses_request(request: &LlmRequest, options: &ResponsesOptions) -> Result<Value> {
    refuse_unwritten(request, ORIGIN, &options.model, WRITES)?;
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    let mut input = Vec::new();
    let mut replays_reasoning = false;
    for (i, message) in request.messages().iter().enumerate() {
        let field = format!("messages[{i}].content");
        match message.role {
            Role::System => {
                let text = tollgate::provider::text_only(
                    &message.content,
                    &field,
                    "OpenAI's system message",
                )?;
                input.push(json!({"role": "system", "content": text}));
            }
            Role::User => user_items(&message.content, &field, &mut input)?,
            Role::Assistant => {
                replays_reasoning |= assistant_items(&message.content, &field, &mut input)?;
            }
        }
    }
    body.insert("input".into(), Value::Array(input));
    // Stateless: nothing kept at OpenAI, so nothing can be referred to later.
    body.insert("store".into(), json!(false));
    let sampling = request.sampling_params();
    if !request.tools_schema().is_empty() {
        let tools = request
            .tools_schema()
            .iter()
            .map(|t| {
                // OpenAI's own tools (web search, file search, …) as OpenAI defines them.
                match &t.native {
                    Some(native) if native.provider == ORIGIN => {
                        return Ok(native.definition.value().clone());
                    }
                    Some(native) => {
                        return Err(Error::unsupported_setting(
                            format!("`{}` tool `{}`", native.provider, t.name),
                            ORIGIN,
                            &options.model,
                        ));
                    }
                    None => {}
                }
                let mut tool = json!({"type": "function", "name": t.name,
                    "description": t.description, "parameters": t.input_schema.value()});
                if let Some(strict) = t.strict {
                    tool["strict"] = json!(strict);
                }
                if t.defer_loading {
                    tool["defer_loading"] = json!(true);
                }
                Ok(tool)
            })
            .collect::<Result<Vec<_>>>()?;
        body.insert("tools".into(), Value::Array(tools));
        let choice = match sampling.tool_choice() {
            Some(choice) => tool_choice_json(choice),
            None if options.tool_choice == ToolChoice::Auto => None,
            None => tool_choice_json(&options.tool_choice),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        if let Some(parallel) = sampling.parallel_tool_calls() {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    let reasoning = sampling.reasoning();
    let mut wire_reasoning = Map::new();
    if let Some(effort) = reasoning.effort {
        wire_reasoning.insert("effort".into(), json!(effort.as_str()));
    }
    if let Some(summary) = reasoning.summary {
        let word = match summary {
            tollgate::provider::ReasoningSummary::Auto => "auto",
            tollgate::provider::ReasoningSummary::Concise => "concise",
            tollgate::provider::ReasoningSummary::Detailed => "detailed",
            tollgate::provider::ReasoningSummary::Omitted => {
                return Err(Error::unsupported_setting(
                    "reasoning summary: omitted",
                    ORIGIN,
                    &options.model,
                ));
            }
        };
        wire_reasoning.insert("summary".into(), json!(word));
    }
    let reasons = !wire_reasoning.is_empty();
    if reasons {
        body.insert("reasoning".into(), Value::Object(wire_reasoning));
    }
    // With nothing stored, reasoning can only be replayed from its encrypted copy;
    // asked for when the request reasons (a model that does not reason refuses it).
    if reasons || replays_reasoning {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if let Some(limit) = sampling.max_output_tokens().or(options.max_tokens) {
        body.insert("max_output_tokens".into(), json!(limit));
    }
    if let Some(t) = sampling.temperature() {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p() {
        body.insert("top_p".into(), json!(p));
    }
    if !sampling.stop().is_empty() {
        return Err(Error::unsupported_setting(
            "stop sequences",
            format!("{ORIGIN} (Responses API)"),
            &options.model,
        ));
    }
    if let Some(shape) = sampling.response_shape() {
        let mut format = json!({"type": "json_schema", "name": shape_name(&shape.name),
            "schema": shape.schema.value()});
        if let Some(strict) = shape.strict {
            format["strict"] = json!(strict);
        }
        body.insert("text".into(), json!({"format": format}));
    } else if sampling.json_object() {
        body.insert("text".into(), json!({"format": {"type": "json_object"}}));
    }
    if let Some(verbosity) = sampling.verbosity() {
        let text = body.entry("text").or_insert_with(|| json!({}));
        text["verbosity"] = json!(verbosity.as_str());
    }
    if options.stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

/// A user turn: tool results become `function_call_output` items (in order), the rest
/// one user message of parts.
fn user_items(content: &[Block], field: &str, input: &mut Vec<Value>) -> Result<()> {
    let mut parts = Vec::new();
    for (j, block) in content.iter().enumerate() {
        let field = format!("{field}[{j}]");
        match block {
            Block::Text { text, .. } => parts.push(json!({"type": "input_text", "text": text})),
            Block::Image { source, .. } => parts.push(
                json!({"type": "input_image", "image_url": image_url(source), "detail": "auto"}),
            ),
            Block::Document { source, name, .. } => {
                let name = name.as_deref().unwrap_or("document.pdf");
                parts.push(match source {
                    DocumentSource::Base64 { media_type, data } => json!({"type": "input_file",
                        "filename": name, "file_data": format!("data:{media_type};base64,{data}")}),
                    DocumentSource::Url { url } => {
                        json!({"type": "input_file", "file_url": url})
                    }
                    DocumentSource::Text { text } => json!({"type": "input_text", "text": text}),
                });
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                let text =
                    tool_result_text(content, *is_error, &field, "OpenAI's function_call_output")?;
                input.push(
                    json!({"type": "function_call_output", "call_id": tool_use_id, "output": text}),
                );
            }
            Block::ToolUse { .. } | Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                return Err(Error::invalid_request(
                    field,
                    "a tool use or thinking block belongs in an assistant turn",
                ));
            }
            Block::Native { provider, .. } => {
                return Err(Error::invalid_request(
                    field,
                    format!("is a `{provider}` block, which OpenAI's Responses API cannot take"),
                ));
            }
        }
    }
    if !parts.is_empty() {
        input.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

/// An assistant turn as output items, in order; whether it replays OpenAI reasoning.
fn assistant_items(content: &[Block], field: &str, input: &mut Vec<Value>) -> Result<bool> {
    let mut replays = false;
    for (j, block) in content.iter().enumerate() {
        match block {
            Block::Text { text, .. } => input.push(json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]})),
            Block::ToolUse {
                id,
                name,
                input: args,
                ..
            } => input.push(json!({"type": "function_call", "call_id": id, "name": name,
                "arguments": args.canonical()})),
            Block::Thinking {
                text,
                signature: Some(signature),
                origin,
                ..
            } if origin.as_deref().is_none_or(|o| o == ORIGIN) => {
                let (id, encrypted) = split_signature(signature);
                let summary: Vec<Value> = if text.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({"type": "summary_text", "text": text})]
                };
                let mut item = json!({"type": "reasoning", "summary": summary,
                    "encrypted_content": encrypted});
                if let Some(id) = id {
                    item["id"] = json!(id);
                }
                input.push(item);
                replays = true;
            }
            // Unsigned, or signed by another provider: OpenAI cannot read it back.
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {}
            // OpenAI's own items (a web search call, …), back as OpenAI wrote them.
            Block::Native { provider, value } if provider == ORIGIN => {
                input.push(value.value().clone());
            }
            _ => {
                return Err(Error::invalid_request(
                    format!("{field}[{j}]"),
                    "must be text, a tool use or thinking in an assistant turn",
                ));
            }
        }
    }
    Ok(replays)
}

/// The Responses `usage` object in tollgate's terms (`input_tokens` counts cached
/// input too).
pub(super) fn usage_of(usage: &Value) -> Usage {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    Usage::from_cache_inclusive(
        n(&usage["input_tokens"]),
        n(&usage["input_tokens_details"]["cached_tokens"]),
        n(&usage["input_tokens_details"]["cache_write_tokens"]),
        n(&usage["output_tokens"]),
    )
}

/// One output item's blocks: a message's text (a refusal part is the answer's refusal),
/// a function call, a reasoning item's summary signed with its id and encrypted copy.
pub(super) fn item_blocks(
    item: &Value,
    blocks: &mut Vec<Block>,
    refusal: &mut String,
) -> Result<()> {
    match item["type"].as_str() {
        Some("message") => {
            for part in item["content"].as_array().into_iter().flatten() {
                match part["type"].as_str() {
                    Some("output_text") => {
                        let text = part["text"].as_str().unwrap_or_default();
                        if !text.is_empty() {
                            blocks.push(Block::text(text));
                        }
                    }
                    Some("refusal") => refusal.push_str(part["refusal"].as_str().unwrap_or("")),
                    _ => {}
                }
            }
        }
        Some("function_call") => {
            let call_id = item["call_id"].as_str().unwrap_or_default();
            let arguments = item["arguments"].as_str().unwrap_or_default();
            let input = if arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(arguments).map_err(|e| {
                    undecodable(format!(
                        "the arguments of call `{call_id}` are not JSON: {e}"
                    ))
                })?
            };
            blocks.push(Block::ToolUse {
                id: call_id.to_owned(),
                name: item["name"].as_str().unwrap_or_default().to_owned(),
                input: Json::new(input),
                cache: None,
            });
        }
        Some("reasoning") => {
            let text: Vec<&str> = item["summary"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .collect();
            let signature = item["encrypted_content"]
                .as_str()
                .map(|e| reasoning_signature(item["id"].as_str().unwrap_or("rs"), e));
            if signature.is_some() || !text.is_empty() {
                blocks.push(Block::Thinking {
                    text: text.join("\n\n"),
                    signature,
                    origin: Some(ORIGIN.into()),
                    cache: None,
                });
            }
        }
        // OpenAI's own tools' items (web search calls, …), kept as OpenAI wrote them.
        Some(_) => blocks.push(Block::Native {
            provider: ORIGIN.into(),
            value: Json::new(item.clone()),
        }),
        None => {}
    }
    Ok(())
}

/// The answer of a finished `response` object, with its stop reason: a `refusal` part
/// makes it a refused answer (its text the refusal, after any reasoning), and so does an
/// `incomplete` status for `content_filter`.
pub(super) fn finish_response(
    response: &Value,
    mut blocks: Vec<Block>,
    refusal: &str,
) -> Result<LlmResponse> {
    let usage = usage_of(&response["usage"]);
    let mut refused = None;
    let stop_reason = match response["status"].as_str() {
        _ if !refusal.is_empty() => {
            blocks.push(Block::text(refusal));
            refused = Some(Refusal::new("refusal"));
            StopReason::Refusal
        }
        Some("completed") => {
            if blocks.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }
        }
        Some("incomplete") => match response["incomplete_details"]["reason"].as_str() {
            Some("content_filter") => {
                refused = Some(Refusal::new("content_filter"));
                StopReason::ContentFilter
            }
            _ => StopReason::MaxTokens,
        },
        other => {
            return Err(undecodable(format!(
                "a response with status {other:?} is not finished"
            )));
        }
    };
    LlmResponse::new(ResponseBody {
        model: response["model"].as_str().unwrap_or_default().to_owned(),
        content: blocks,
        stop_reason,
        usage,
        refusal: refused,
    })
}

/// Decodes a whole Responses answer.
pub fn decode_responses_response(body: &[u8]) -> Result<LlmResponse> {
    decode(body).map_err(|e| keep_raw(e, body))
}

fn decode(body: &[u8]) -> Result<LlmResponse> {
    let response: Value = parse_json(body)?;
    if !response.is_object() || response.get("output").is_none() {
        return Err(undecodable("no `output` in the response"));
    }
    let mut blocks = Vec::new();
    let mut refusal = String::new();
    for item in response["output"].as_array().into_iter().flatten() {
        item_blocks(item, &mut blocks, &mut refusal)?;
    }
    finish_response(&response, blocks, &refusal)
}
