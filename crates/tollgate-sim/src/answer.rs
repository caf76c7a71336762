//! What the `sim` provider says, and how the request's settings shape it.
//!
//! An answer is, in order: a signed thinking block when the request's reasoning turns
//! thinking on ([`thinking_tokens`]), then a tool call ([`tool_call`]) or text. The text
//! is the minimal instance of a response shape's schema ([`example_of`]), a JSON object
//! `{"answer": ...}` with `json_object`, or generated words. The sim counts one word as
//! one token: thinking and text together are the call's output, so a thinking budget
//! bounds the thinking's words. Generated words follow from the prompt; with a `seed`,
//! they are drawn from a generator seeded by it and the prompt, so one seed repeats an
//! answer and another changes it. The sim makes at most one tool call per answer, so
//! `parallel_tool_calls` false always holds.
//!
//! [`stream_events`] delivers an answer as a provider streams it: per block in order,
//! thinking word by word then its signature, a tool call's arguments in two fragments,
//! text word by word.

use tollgate::provider::{
    Block, Json, LlmRequest, LlmResponse, Reasoning, ReasoningEffort, ReasoningSummary, Result,
    Role, StopReason, StreamEvent, Thinking, ToolChoice, Usage,
};

use crate::SimRng;

/// The provider key, which also signs the sim's thinking.
pub const KEY: &str = "sim";

const WORDS: &[&str] = &[
    "tokens", "refill", "steadily", "so", "every", "caller", "waits", "its", "turn", "and", "no",
    "request", "is", "sent", "before", "its", "share", "of", "the", "limit", "has", "been",
    "reserved", "first",
];

const THOUGHTS: &[&str] = &[
    "the", "question", "asks", "about", "limits", "so", "weigh", "each", "bucket", "then",
    "answer", "briefly", "keeping", "within", "budget",
];

/// The output tokens (words) the sim spends thinking under `reasoning`, `None` when it
/// does not think: thinking is on with `Adaptive` or a `Budget`, or with an effort other
/// than `none`, and off with `Off` or effort `none` (either wins). The words grow with
/// the effort (8 at medium or unset) and never exceed a budget.
pub(crate) fn thinking_tokens(reasoning: &Reasoning) -> Option<u64> {
    if reasoning.thinking == Some(Thinking::Off) || reasoning.effort == Some(ReasoningEffort::None)
    {
        return None;
    }
    let by_effort = match reasoning.effort {
        Some(ReasoningEffort::Minimal) => 2,
        Some(ReasoningEffort::Low) => 4,
        Some(ReasoningEffort::High) => 16,
        Some(ReasoningEffort::XHigh) => 24,
        Some(ReasoningEffort::Max) => 32,
        Some(ReasoningEffort::Medium | ReasoningEffort::None) | None => 8,
    };
    match reasoning.thinking {
        Some(Thinking::Budget { tokens }) => Some(by_effort.min(tokens)),
        Some(Thinking::Adaptive) => Some(by_effort),
        Some(Thinking::Off) => None,
        None => reasoning.effort.map(|_| by_effort),
    }
}

/// The answer's blocks and stop reason, for `produced` output tokens of which up to
/// `thinking` (from [`thinking_tokens`]) are spent thinking, under the output limit
/// `max_output`.
pub(crate) fn content(
    request: &LlmRequest,
    produced: u64,
    max_output: u64,
    thinking: Option<u64>,
) -> (Vec<Block>, StopReason) {
    let params = request.sampling_params();
    let mut blocks = Vec::new();
    let thought = thinking.map_or(0, |t| t.min(produced));
    if thinking.is_some() {
        let text = words(THOUGHTS, request, thought, 1);
        let signature = format!("{KEY}-{:016x}", fnv(&text));
        let shown = params.reasoning().summary != Some(ReasoningSummary::Omitted);
        blocks.push(Block::Thinking {
            text: if shown { text } else { String::new() },
            signature: Some(signature),
            origin: Some(KEY.to_owned()),
            cache: None,
        });
    }
    if let Some(call) = tool_call(request) {
        blocks.push(call);
        return (blocks, StopReason::ToolUse);
    }
    let text = match params.response_shape() {
        Some(shape) => example_of(shape.schema.value()).to_string(),
        None => {
            let text = sentence(words(WORDS, request, produced - thought, 0));
            if params.json_object() {
                serde_json::json!({ "answer": text }).to_string()
            } else {
                text
            }
        }
    };
    blocks.push(Block::text(text));
    let stop_reason = if produced >= max_output {
        StopReason::MaxTokens
    } else {
        StopReason::EndTurn
    };
    (blocks, stop_reason)
}

/// The call a model makes when the request declares tools, its tool choice allows one
/// and the user spoke last (not a tool result): the tool the choice names, else the first
/// declared, its arguments the minimal instance of its schema ([`example_of`]), its id
/// numbered by the turn, so that a client's tool loop runs against the demo. With
/// `tool_choice` none, or a named tool the request does not declare, and after a tool
/// result (even when the choice forces a tool, so a forcing client's loop ends), the
/// model answers text.
fn tool_call(request: &LlmRequest) -> Option<Block> {
    let tools = request.tools_schema();
    let tool = match request.sampling_params().tool_choice() {
        Some(ToolChoice::None) => return None,
        Some(ToolChoice::Tool(name)) => tools.iter().find(|t| &t.name == name)?,
        Some(ToolChoice::Auto | ToolChoice::Required) | None => tools.first()?,
    };
    // A system message after the user's turn (Claude Code sends its environment so) is
    // an instruction, not a speaker: the last turn is the last user or assistant one.
    let last = request
        .turns()
        .iter()
        .rev()
        .find(|m| m.role != Role::System)?;
    let answered = last
        .content
        .iter()
        .any(|b| matches!(b, Block::ToolResult { .. }));
    if last.role != Role::User || answered {
        return None;
    }
    Some(Block::ToolUse {
        id: format!("call_sim_{}", request.turns().len()),
        name: tool.name.clone(),
        input: Json::new(example_of(tool.input_schema.value())),
        cache: None,
    })
}

/// FNV-1a of `text`: a stable hash for the prompt and the signatures.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `tokens` words of `list`, chosen from the prompt (the last turn's text): in turn from
/// a point the prompt picks, or, with the request's seed, each drawn from a generator
/// seeded by the seed, the prompt and `stream` (so thinking and text differ).
fn words(list: &[&str], request: &LlmRequest, tokens: u64, stream: u64) -> String {
    let prompt = request.turns().last().map(|m| m.text()).unwrap_or_default();
    let start = prompt.bytes().fold(0usize, |h, b| {
        h.wrapping_mul(31).wrapping_add(usize::from(b))
    });
    let mut rng = request.sampling_params().seed().map(|seed| {
        SimRng::new(seed as u64 ^ fnv(&prompt) ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    });
    let last = list.len() as u64 - 1;
    (0..tokens as usize)
        .map(|i| match rng.as_mut() {
            Some(rng) => list[rng.range(0, last) as usize],
            None => list[(start + i) % list.len()],
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `words` as a sentence: capitalised, with a full stop.
fn sentence(mut text: String) -> String {
    if let Some(first) = text.get(..1) {
        text = first.to_uppercase() + &text[1..];
    }
    text.push('.');
    text
}

/// `text` in word-sized pieces, each but the first opening with the space before it, so
/// the pieces concatenate to the text.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(first) = rest.chars().next() {
        let skip = first.len_utf8();
        let end = rest[skip..].find(' ').map_or(rest.len(), |i| i + skip);
        out.push(&rest[..end]);
        rest = &rest[end..];
    }
    out
}

/// `response` as stream events: the input usage, each block's deltas in order (see the
/// module doc), the final usage, the stop reason and the whole answer.
pub(crate) fn stream_events(response: LlmResponse) -> Vec<Result<StreamEvent>> {
    let started = Usage {
        output_tokens: 0,
        ..response.usage()
    };
    let mut events = vec![StreamEvent::Usage(started)];
    for (index, block) in response.blocks().iter().enumerate() {
        match block {
            Block::Thinking {
                text, signature, ..
            } => {
                events.extend(
                    pieces(text)
                        .into_iter()
                        .map(|t| StreamEvent::ThinkingDelta {
                            index,
                            text: t.to_owned(),
                        }),
                );
                if let Some(signature) = signature {
                    events.push(StreamEvent::SignatureDelta {
                        index,
                        signature: signature.clone(),
                    });
                }
            }
            Block::ToolUse {
                id, name, input, ..
            } => {
                // The arguments in two fragments, as providers stream them.
                let json = input.value().to_string();
                let half = json.len() / 2;
                events.push(StreamEvent::ToolUseDelta {
                    index,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    input_json: json[..half].to_owned(),
                });
                events.push(StreamEvent::ToolUseDelta {
                    index,
                    id: None,
                    name: None,
                    input_json: json[half..].to_owned(),
                });
            }
            Block::Text { text, .. } => {
                events.extend(pieces(text).into_iter().map(|t| StreamEvent::TextDelta {
                    index,
                    text: t.to_owned(),
                }));
            }
            _ => {}
        }
    }
    events.push(StreamEvent::Usage(response.usage()));
    events.push(StreamEvent::Stop(response.stop_reason()));
    events.push(StreamEvent::Completed(response));
    events.into_iter().map(Ok).collect()
}

/// A minimal instance of a JSON Schema: required properties only, each the simplest value
/// of its type, so structured-output requests get an answer that passes.
pub fn example_of(schema: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    if let Some(v) = schema.get("const") {
        return v.clone();
    }
    if let Some(v) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return v.clone();
    }
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "null",
    };
    match ty {
        "object" => {
            let mut out = serde_json::Map::new();
            let props = schema.get("properties").and_then(Value::as_object);
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let sub = props
                    .and_then(|p| p.get(name))
                    .cloned()
                    .unwrap_or(json!({}));
                out.insert(name.to_owned(), example_of(&sub));
            }
            Value::Object(out)
        }
        "array" => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").cloned().unwrap_or(json!({}));
            Value::Array((0..min).map(|_| example_of(&item)).collect())
        }
        "string" => json!("sim"),
        "integer" => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(0)),
        "number" => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(0.0)),
        "boolean" => json!(true),
        _ => Value::Null,
    }
}
