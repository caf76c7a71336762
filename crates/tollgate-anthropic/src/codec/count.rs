//! Token counting (`POST /v1/messages/count_tokens`): the request body is a Messages body
//! with only the fields the counter takes, the answer `{"input_tokens": N}`.

use serde::Deserialize;
use serde_json::Value;
use tollgate::provider::{LlmRequest, Result};
use tollgate::provider::{ToolChoice, parse_json};

use super::request::{EncodeOptions, Host, encode_request};

/// The path of Anthropic's token counter.
pub const COUNT_TOKENS_PATH: &str = "/v1/messages/count_tokens";

/// The top-level fields the counter takes (the Python SDK's `message_count_tokens_params.py`); it
/// refuses a Messages body's others (`max_tokens`, `stream`, `temperature`, …) as extra
/// inputs.
const COUNTED_FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
];

/// Encodes `request` as a count body for `model`, written as [`encode_request`] writes a
/// Messages body (the same refusals, cache marks and blocks), less the fields the counter
/// does not take. With no output limit in the request, a thinking budget is not held
/// below one: counting sends no `max_tokens`.
pub fn encode_count_request(
    request: &LlmRequest,
    model: &str,
    tool_choice: ToolChoice,
) -> Result<Value> {
    let mut body = encode_request(
        request,
        &EncodeOptions {
            model: Some(model.to_owned()),
            max_tokens: u64::MAX,
            stream: false,
            top_k: None,
            tool_choice,
            host: Host::Anthropic,
            mid_conversation_system: false,
        },
    )?;
    if let Value::Object(fields) = &mut body {
        fields.retain(|name, _| COUNTED_FIELDS.contains(&name.as_str()));
    }
    Ok(body)
}

#[derive(Debug, Deserialize)]
struct WireCount {
    input_tokens: u64,
}

/// Decodes the counter's answer, `{"input_tokens": N}`, into N.
pub fn decode_count(bytes: &[u8]) -> Result<u64> {
    parse_json::<WireCount>(bytes).map(|c| c.input_tokens)
}
