//! The one judge of a finished answer, for whole and streamed calls alike: what its stop
//! reason and its shape mean to the caller ([`judge`]), the refusal error an answer that
//! stopped with a refusal or a content filter stands for, the answer a refusal error
//! stands for when the caller takes refusals as answers ([`refusal_as_answer`]), and the
//! names records and spans give stop reasons.

use super::shape;
use crate::conversation::Block;
use crate::error::{Error, Result};
use crate::request::SamplingParams;
use crate::response::{LlmResponse, ResponseBody, StopReason};

/// What to do with a finished answer.
#[derive(Debug, PartialEq)]
pub(super) enum Judgement {
    /// Hand it to the caller.
    Accept,
    /// It is a refusal: [`refusal`] is the caller's error.
    Refused,
    /// The context window is full: no larger output limit can help.
    WindowFull,
    /// Cut off at the output limit, and the caller wants a whole answer (a whole call
    /// sends it once more at the model's ceiling, or fails).
    CutOff,
    /// It misses the request's response shape: these are the schema's errors.
    MissesShape(Vec<String>),
}

/// Judges `response` to a request of `params`. `can_resend`: a whole call, which may
/// send again; a stream cannot (its reader has the text), so a cut-off stream is judged
/// by its shape alone.
pub(super) fn judge(
    response: &LlmResponse,
    params: &SamplingParams,
    can_resend: bool,
) -> Result<Judgement> {
    match response.stop_reason() {
        StopReason::ContextWindowExceeded => return Ok(Judgement::WindowFull),
        StopReason::Refusal | StopReason::ContentFilter if params.keeps_refusals() => {
            return Ok(Judgement::Accept);
        }
        StopReason::Refusal | StopReason::ContentFilter => return Ok(Judgement::Refused),
        // The caller chose the limit and takes what fits.
        StopReason::MaxTokens if params.keeps_truncated() => return Ok(Judgement::Accept),
        StopReason::MaxTokens if can_resend => return Ok(Judgement::CutOff),
        _ => {}
    }
    let Some(shape) = params.response_shape() else {
        return Ok(Judgement::Accept);
    };
    if params.keeps_shape_misses() {
        return Ok(Judgement::Accept);
    }
    Ok(match shape::check(shape, &response.text())? {
        Ok(()) => Judgement::Accept,
        Err(errors) => Judgement::MissesShape(errors),
    })
}

/// The refusal an answer that stopped with a refusal or a content filter stands for,
/// with its usage and the stream events delivered before it.
pub(super) fn refusal(response: &LlmResponse, delivered_events: u64) -> Error {
    Error::ProviderRefusal {
        category: stop_name(response.stop_reason()).into(),
        explanation: response.text(),
        usage: response.usage(),
        delivered_events,
    }
}

/// The refusal categories that name a filter rather than the model's own refusal:
/// OpenAI's and Gemini's (`SAFETY`, lowercased), Bedrock's guardrails.
const FILTERS: &[&str] = &[
    "content_filter",
    "content_filtered",
    "guardrail_intervened",
    "safety",
    "recitation",
    "blocklist",
    "prohibited_content",
    "spii",
    "image_safety",
];

/// For a caller that takes refusals as answers ([`SamplingParams::keeps_refusals`]), the
/// answer a refusal `error` stands for: the explanation as its text, its usage, stop
/// reason [`StopReason::ContentFilter`] for a filter and [`StopReason::Refusal`] else.
/// Any other error, or a caller that does not, gets `error` back.
pub(super) fn refusal_as_answer(
    error: Error,
    params: &SamplingParams,
    model: &str,
) -> Result<LlmResponse> {
    match error {
        Error::ProviderRefusal {
            category,
            explanation,
            usage,
            ..
        } if params.keeps_refusals() => {
            let stop_reason = if FILTERS.contains(&category.as_str()) {
                StopReason::ContentFilter
            } else {
                StopReason::Refusal
            };
            let content = if explanation.is_empty() {
                Vec::new()
            } else {
                vec![Block::text(explanation)]
            };
            LlmResponse::new(ResponseBody {
                model: model.to_owned(),
                content,
                stop_reason,
                usage,
            })
        }
        other => Err(other),
    }
}

/// The name records and spans give a stop reason.
pub(super) fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::Refusal => "refusal",
        StopReason::ContentFilter => "content_filter",
        StopReason::ContextWindowExceeded => "context_window_exceeded",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;
    use crate::request::ResponseShape;
    use crate::usage::Usage;

    fn answer(text: &str, stop: StopReason) -> LlmResponse {
        LlmResponse::new(ResponseBody {
            model: "m".into(),
            content: vec![Block::text(text)],
            stop_reason: stop,
            usage: Usage::default(),
        })
        .unwrap()
    }

    fn shaped() -> SamplingParams {
        let schema = Json::new(serde_json::json!({"type": "object", "required": ["a"]}));
        SamplingParams::new().with_response_shape(ResponseShape::new("s", schema))
    }

    #[test]
    fn one_judge_for_whole_and_streamed_answers() {
        let plain = SamplingParams::new();
        let cut = answer("par", StopReason::MaxTokens);
        assert_eq!(judge(&cut, &plain, true).unwrap(), Judgement::CutOff);
        assert_eq!(judge(&cut, &plain, false).unwrap(), Judgement::Accept);
        let kept = plain.clone().with_truncated_answers();
        assert_eq!(judge(&cut, &kept, true).unwrap(), Judgement::Accept);
        let refused = answer("no", StopReason::Refusal);
        assert_eq!(judge(&refused, &plain, true).unwrap(), Judgement::Refused);
        let full = answer("", StopReason::ContextWindowExceeded);
        assert_eq!(judge(&full, &plain, false).unwrap(), Judgement::WindowFull);
        let miss = answer("{}", StopReason::EndTurn);
        assert!(matches!(
            judge(&miss, &shaped(), true).unwrap(),
            Judgement::MissesShape(errors) if !errors.is_empty()
        ));
        let fits = answer("{\"a\": 1}", StopReason::EndTurn);
        assert_eq!(judge(&fits, &shaped(), false).unwrap(), Judgement::Accept);
    }

    #[test]
    fn refusals_and_shape_misses_are_accepted_when_the_caller_keeps_them() {
        let keeps = SamplingParams::new().with_refusals_as_answers();
        let refused = answer("no", StopReason::ContentFilter);
        assert_eq!(judge(&refused, &keeps, true).unwrap(), Judgement::Accept);
        let miss = answer("{}", StopReason::EndTurn);
        let loose = shaped().with_shape_misses();
        assert_eq!(judge(&miss, &loose, true).unwrap(), Judgement::Accept);
    }

    #[test]
    fn a_refusal_error_becomes_an_answer_only_for_a_caller_that_keeps_refusals() {
        let error = || Error::refusal("cyber", "I can't help with that.", Usage::default());
        let keeps = SamplingParams::new().with_refusals_as_answers();
        let r = refusal_as_answer(error(), &keeps, "m").unwrap();
        assert_eq!(r.stop_reason(), StopReason::Refusal);
        assert_eq!(r.text(), "I can't help with that.");
        let filtered = Error::refusal("content_filter", "", Usage::default());
        let r = refusal_as_answer(filtered, &keeps, "m").unwrap();
        assert_eq!(r.stop_reason(), StopReason::ContentFilter);
        assert!(r.blocks().is_empty());
        let plain = SamplingParams::new();
        assert!(matches!(
            refusal_as_answer(error(), &plain, "m"),
            Err(Error::ProviderRefusal { .. })
        ));
        assert!(matches!(
            refusal_as_answer(Error::Cancelled, &keeps, "m"),
            Err(Error::Cancelled)
        ));
    }
}
