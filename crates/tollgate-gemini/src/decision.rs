//! The decision transport over logprobs: one constrained request per question (one HTTP
//! request each, reserved each by the pipeline), answered with one option label; the
//! first step's top candidates give a probability per option.

use tollgate::provider::http::Endpoint;
use tollgate::provider::labels::{LabeledQuestion, MAX_LABELED_OPTIONS, labeled_input_tokens};
use tollgate::provider::{
    DecisionReply, DecisionTransport, DefaultEstimator, Signals, TokenEstimator,
};
use tollgate::provider::{DecisionRequest, Result};

use crate::codec;
use crate::options::GeminiModel;

/// The most options a choice may have: each gets a one-letter label, `A` to `Z`.
pub const MAX_OPTIONS: usize = MAX_LABELED_OPTIONS;

/// The decision transport of one `gemini` or `vertex` model whose catalog entry says it
/// returns logprobs (`options.logprobs = true`).
///
/// Each question is one `generateContent` request whose answer is constrained to the
/// labels (`text/x.enum`): `yes`/`no` for a [`Question::Noul`](tollgate::Question::Noul), `A`, `B`, … for a
/// [`Question::Choice`](tollgate::Question::Choice). The first step's top candidates are summed per label and
/// renormalized over the options; a label absent from them gets probability 0.
#[derive(Debug)]
pub struct GeminiDecision {
    endpoint: Endpoint,
    model: GeminiModel,
}

impl GeminiDecision {
    pub(crate) fn new(endpoint: Endpoint, model: GeminiModel) -> Self {
        GeminiDecision { endpoint, model }
    }
}

#[tollgate::provider::async_trait]
impl DecisionTransport for GeminiDecision {
    /// Sends the request's one question (the pipeline passes one per call:
    /// [`max_batch`](DecisionTransport::max_batch) is 1); a request with more is refused,
    /// so that no request leaves unreserved.
    async fn decide(&self, request: &DecisionRequest, signals: &Signals) -> Result<DecisionReply> {
        let question = LabeledQuestion::of(request, &self.model.entry.id)?;
        let body = codec::encode_decision(
            request.state(),
            question.prompt(),
            question.pairs(),
            self.model.options.thinking.to_json(),
        );
        let labels = question.labels();
        let path = self.model.path("generateContent");
        let (by_label, usage) = self
            .endpoint
            .post_decoded(&path, &body, signals, |bytes| {
                codec::decode_decision(bytes, &labels)
            })
            .await?;
        question.reply(&by_label, usage)
    }

    /// One question per request.
    fn max_batch(&self) -> usize {
        1
    }

    fn estimate_input_tokens(&self, request: &DecisionRequest) -> u64 {
        labeled_input_tokens(request, |t| DefaultEstimator.estimate_text(t))
    }
}
