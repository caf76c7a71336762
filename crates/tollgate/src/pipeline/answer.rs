//! The one judge of a finished answer, for whole and streamed calls alike: what its stop
//! reason and its shape mean to the caller ([`judge`]), and the refusal error an answer
//! that stopped with a refusal or a content filter stands for ([`refusal`]). A refusal
//! reaches the pipeline only as a stop reason: every codec decodes it into the answer
//! (with its [`crate::Refusal`]), never into an error, so this is the one place it is
//! judged.

use super::shape;
use crate::error::{Error, Result};
use crate::request::SamplingParams;
use crate::response::{LlmResponse, StopReason};

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

/// The refusal an answer that stopped with a refusal or a content filter stands for:
/// the provider's category and explanation ([`LlmResponse::refusal`]), its usage, and the
/// stream events delivered before it.
pub(super) fn refusal(response: &LlmResponse, delivered_events: u64) -> Error {
    Error::ProviderRefusal {
        category: response
            .refusal_category()
            .unwrap_or(response.stop_reason().as_str())
            .to_owned(),
        explanation: response.refusal_explanation(),
        usage: response.usage(),
        delivered_events,
    }
}

/// How a finished answer that cannot be sent again ends for its caller, as a whole live
/// call's would: `Ok`, or its refusal, its cut-off at `max_output_tokens`
/// ([`Error::OutputTruncated`] for catalog model `model_id`), its missed response shape,
/// its full context window. For answers read outside the pipeline: a provider batch's
/// (`tollgate run --via batch`), judged by the same judge as every call.
pub fn judge_answer(
    response: &LlmResponse,
    params: &SamplingParams,
    model_id: &str,
    max_output_tokens: u64,
) -> Result<()> {
    match judge(response, params, true)? {
        Judgement::Accept => Ok(()),
        Judgement::Refused => Err(refusal(response, 0)),
        Judgement::WindowFull => Err(Error::provider_context_overflow()),
        Judgement::CutOff => Err(Error::OutputTruncated {
            model_id: model_id.to_owned(),
            max_output_tokens,
        }),
        Judgement::MissesShape(errors) => Err(Error::ShapeInvalid { errors }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Block;
    use crate::json::Json;
    use crate::request::ResponseShape;
    use crate::response::{Refusal, ResponseBody};
    use crate::usage::Usage;

    fn answer(text: &str, stop: StopReason) -> LlmResponse {
        LlmResponse::new(ResponseBody {
            model: "m".into(),
            content: vec![Block::text(text)],
            stop_reason: stop,
            usage: Usage::default(),
            refusal: None,
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
    fn judge_answer_ends_a_batch_answer_as_a_whole_live_call_would() {
        let plain = SamplingParams::new();
        let ok = answer("hi", StopReason::EndTurn);
        assert!(judge_answer(&ok, &plain, "m", 10).is_ok());
        let cut = answer("par", StopReason::MaxTokens);
        assert!(matches!(
            judge_answer(&cut, &plain, "m", 10),
            Err(Error::OutputTruncated {
                max_output_tokens: 10,
                ..
            })
        ));
        assert!(judge_answer(&cut, &plain.clone().with_truncated_answers(), "m", 10).is_ok());
        let refused = answer("no", StopReason::ContentFilter);
        assert!(matches!(
            judge_answer(&refused, &plain, "m", 10),
            Err(Error::ProviderRefusal { .. })
        ));
        let miss = answer("{}", StopReason::EndTurn);
        assert!(matches!(
            judge_answer(&miss, &shaped(), "m", 10),
            Err(Error::ShapeInvalid { .. })
        ));
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
    fn a_refused_answer_is_the_refusal_error_with_the_providers_category() {
        let body = |refusal| ResponseBody {
            model: "m".into(),
            content: vec![Block::text("I can't help with that.")],
            stop_reason: StopReason::Refusal,
            usage: Usage {
                output_tokens: 7,
                ..Usage::default()
            },
            refusal,
        };
        let plain = LlmResponse::new(body(None)).unwrap();
        assert!(matches!(
            refusal(&plain, 3),
            Error::ProviderRefusal { category, explanation, usage, delivered_events: 3 }
                if category == "refusal" && explanation == "I can't help with that."
                    && usage.output_tokens == 7
        ));
        let told = Refusal::new("cyber").with_explanation("Policy.");
        let detailed = LlmResponse::new(body(Some(told))).unwrap();
        assert!(matches!(
            refusal(&detailed, 0),
            Error::ProviderRefusal { category, explanation, .. }
                if category == "cyber" && explanation == "Policy."
        ));
    }
}
