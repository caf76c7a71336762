//! Response bodies: [`decode_response`], usage, finish reasons and prompt blocks.

use serde::Deserialize;
use serde_json::Value;
use tollgate::provider::{BlockAssembler, keep_raw, parse_json, undecodable};
use tollgate::provider::{
    Error, Json, LlmResponse, ProviderRequestError, Refusal, ResponseBody, Result, StopReason,
    StreamEvent, Usage,
};

use super::request::SYNTHETIC_ID_PREFIX;

/// The wire `usageMetadata`. Every field optional (and absent on some chunks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireUsage {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    tool_use_prompt_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
}

impl WireUsage {
    /// In tollgate's convention (PROTOCOLS.md §6.A.4): `promptTokenCount` includes the
    /// cached tokens, so input = prompt − cached + tool-use prompt, cache reads = cached;
    /// thoughts are not inside `candidatesTokenCount`, so output = candidates + thoughts.
    /// Gemini reports no cache writes (an explicit cache is made by a separate call).
    pub fn neutral(&self) -> Usage {
        let prompt = self.prompt_token_count.unwrap_or(0);
        let cached = self.cached_content_token_count.unwrap_or(0).min(prompt);
        Usage {
            input_tokens: prompt - cached + self.tool_use_prompt_token_count.unwrap_or(0),
            cache_read_tokens: cached,
            output_tokens: self.candidates_token_count.unwrap_or(0)
                + self.thoughts_token_count.unwrap_or(0),
            ..Usage::default()
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireResponse {
    #[serde(default)]
    pub(super) candidates: Vec<WireCandidate>,
    #[serde(default)]
    pub(super) prompt_feedback: Option<WirePromptFeedback>,
    #[serde(default)]
    pub(super) usage_metadata: Option<WireUsage>,
    #[serde(default)]
    pub(super) model_version: Option<String>,
    /// A mid-stream error chunk carries only this.
    #[serde(default)]
    pub(super) error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WirePromptFeedback {
    #[serde(default)]
    pub(super) block_reason: Option<String>,
    #[serde(default)]
    pub(super) block_reason_message: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireCandidate {
    #[serde(default)]
    pub(super) content: Option<WireContent>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
    #[serde(default)]
    pub(super) finish_message: Option<String>,
    #[serde(default)]
    pub(super) index: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireContent {
    #[serde(default)]
    pub(super) parts: Vec<WirePart>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WirePart {
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) thought: Option<bool>,
    #[serde(default)]
    pub(super) thought_signature: Option<String>,
    #[serde(default)]
    pub(super) function_call: Option<WireFunctionCall>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireFunctionCall {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) args: Option<Value>,
}

/// The finish reasons that mean a content filter stopped the answer; each makes it a
/// refused answer ([`StopReason::ContentFilter`]) with the reason, lower-cased, as its
/// category.
pub const REFUSAL_REASONS: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// The finish reasons that mean the model's output was not a valid answer (a call it
/// could not form, a call to a tool it was not given, too many calls): the answer fails
/// as [`Error::ShapeInvalid`].
pub const INVALID_OUTPUT_REASONS: &[&str] = &[
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
];

/// What a finish reason means: a stop reason, or the error the answer fails with.
/// `tool_calls` says whether the answer holds `functionCall` parts (Gemini ends a tool
/// call with `STOP`; there is no tool-call finish reason).
///
/// | `finishReason` | outcome |
/// |---|---|
/// | `STOP` with a function call | [`StopReason::ToolUse`] |
/// | `STOP` (natural end or stop sequence; Gemini does not tell them apart) | [`StopReason::EndTurn`] |
/// | `MAX_TOKENS` | [`StopReason::MaxTokens`] (the pipeline re-runs it at the ceiling) |
/// | [`REFUSAL_REASONS`] | [`StopReason::ContentFilter`] with a [`Refusal`] `{category: reason in lower case, explanation: finishMessage}` |
/// | [`INVALID_OUTPUT_REASONS`] | [`Error::ShapeInvalid`] |
/// | `LANGUAGE`, `OTHER`, `NO_IMAGE`, `IMAGE_OTHER`, unspecified, unknown | [`tollgate::ProviderRequestError`] (status 200; not retried) |
pub fn finish_reason(
    reason: &str,
    tool_calls: bool,
    message: Option<&str>,
) -> Result<(StopReason, Option<Refusal>)> {
    let message = message.unwrap_or_default();
    match reason {
        "STOP" if tool_calls => Ok((StopReason::ToolUse, None)),
        "STOP" => Ok((StopReason::EndTurn, None)),
        "MAX_TOKENS" => Ok((StopReason::MaxTokens, None)),
        r if REFUSAL_REASONS.contains(&r) => Ok((
            StopReason::ContentFilter,
            Some(Refusal::new(r.to_ascii_lowercase()).with_explanation(message)),
        )),
        r if INVALID_OUTPUT_REASONS.contains(&r) => Err(Error::ShapeInvalid {
            errors: vec![if message.is_empty() {
                format!("the model's output was not a valid answer (finishReason {r})")
            } else {
                format!("the model's output was not a valid answer (finishReason {r}): {message}")
            }],
        }),
        r => Err(ProviderRequestError::new(
            200,
            format!("Gemini ended the answer with finishReason {r}: {message}"),
        )
        .into()),
    }
}

/// The refusal of a blocked prompt (`promptFeedback.blockReason`, no candidates): an
/// answer with no content stopped by the filter.
pub(super) fn prompt_blocked(
    feedback: &WirePromptFeedback,
    model: &str,
    usage: Usage,
) -> Option<Result<LlmResponse>> {
    let reason = feedback.block_reason.as_deref()?;
    if reason == "BLOCK_REASON_UNSPECIFIED" {
        return None;
    }
    let explanation = format!(
        "the prompt was blocked (promptFeedback.blockReason {reason}){}",
        feedback
            .block_reason_message
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    );
    Some(LlmResponse::new(ResponseBody {
        model: model.to_owned(),
        content: Vec::new(),
        stop_reason: StopReason::ContentFilter,
        usage,
        refusal: Some(Refusal::new(reason.to_ascii_lowercase()).with_explanation(explanation)),
    }))
}

/// Turns the parts of one answer into blocks, in order, through the kit's
/// [`BlockAssembler`] (keyed by place). A thought part becomes a thinking block (with its
/// signature); a signature on any other part becomes an empty-text thinking block just
/// before that part's block, so that [`super::encode_request`] can put it back where it
/// came from. Text continues the last block while it is text (a stream's text arrives
/// over many chunks), a thought the last thought until it is signed. A function call,
/// whole in one part, is one block; one without an `id` gets one made up
/// ([`SYNTHETIC_ID_PREFIX`]).
#[derive(Debug, Default)]
pub(super) struct PartsToBlocks {
    pub(super) blocks: BlockAssembler,
    pub(super) tool_calls: bool,
    started: usize,
    next_call: usize,
    /// The last block, while a part may continue it.
    open: Open,
}

#[derive(Debug, Default, Clone, Copy)]
enum Open {
    #[default]
    None,
    Text(usize),
    Thought(usize),
}

impl PartsToBlocks {
    /// A new block's key (its place); nothing continues the block before it.
    fn start(&mut self) -> usize {
        self.open = Open::None;
        self.started += 1;
        self.started - 1
    }

    /// Adds one part; returns the event it makes for a stream, if any.
    pub(super) fn push(&mut self, part: WirePart) -> Result<Option<StreamEvent>> {
        let thought = part.thought.unwrap_or(false);
        let mut signature = part.thought_signature;
        if !thought && let Some(signature) = signature.take() {
            let key = self.start();
            self.blocks.signature(key, &signature)?;
        }
        if let Some(call) = part.function_call {
            self.tool_calls = true;
            let id = call
                .id
                .filter(|i| !i.is_empty())
                .unwrap_or_else(|| format!("{SYNTHETIC_ID_PREFIX}{}", self.next_call));
            self.next_call += 1;
            let args = match call.args {
                Some(Value::Object(map)) => Value::Object(map),
                _ => Value::Object(Default::default()),
            };
            let key = self.start();
            let input = Json::new(args).canonical();
            return self.blocks.tool_use(key, &id, &call.name, &input).map(Some);
        }
        let Some(text) = part.text else {
            return Ok(None);
        };
        if thought {
            let key = match self.open {
                Open::Thought(key) => key,
                _ => self.start(),
            };
            let event = self.blocks.thinking(key, &text)?;
            self.open = match signature {
                Some(signature) => {
                    self.blocks.signature(key, &signature)?;
                    Open::None
                }
                None if !text.is_empty() => Open::Thought(key),
                None => Open::None,
            };
            return Ok(event);
        }
        if text.is_empty() {
            return Ok(None);
        }
        let key = match self.open {
            Open::Text(key) => key,
            _ => self.start(),
        };
        self.open = Open::Text(key);
        self.blocks.text(key, &text)
    }
}

/// Decodes a (non-streamed) `GenerateContentResponse`: the first candidate. A blocked
/// prompt or a filtered answer is a refused answer; see [`finish_reason`].
pub fn decode_response(body: &[u8]) -> Result<LlmResponse> {
    decode_whole(body).map_err(|e| keep_raw(e, body))
}

fn decode_whole(body: &[u8]) -> Result<LlmResponse> {
    let response: WireResponse = parse_json(body)?;
    let usage = response.usage_metadata.unwrap_or_default().neutral();
    let Some(candidate) = response.candidates.into_iter().next() else {
        let blocked = response.prompt_feedback.as_ref();
        let model = response.model_version.as_deref().unwrap_or_default();
        if let Some(answer) = blocked.and_then(|f| prompt_blocked(f, model, usage)) {
            return answer;
        }
        return Err(undecodable(
            "no candidates and no promptFeedback.blockReason",
        ));
    };
    let mut parts = PartsToBlocks::default();
    for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
        parts.push(part)?;
    }
    let reason = candidate.finish_reason.as_deref().unwrap_or("STOP");
    let (stop_reason, refusal) = finish_reason(
        reason,
        parts.tool_calls,
        candidate.finish_message.as_deref(),
    )?;
    LlmResponse::new(ResponseBody {
        model: response.model_version.unwrap_or_default(),
        content: parts.blocks.finish()?,
        stop_reason,
        usage,
        refusal,
    })
}
