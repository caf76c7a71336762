//! The decision transport over logprobs: one constrained prompt per question (one HTTP
//! request each, reserved each by the pipeline), answered with one token; the first token's top logprobs give a probability per option.

use tollgate::provider::http::Endpoint;
use tollgate::provider::labels::{LabeledQuestion, MAX_LABELED_OPTIONS, labeled_input_tokens};
use tollgate::provider::{DecisionReply, DecisionTransport, Signals};
use tollgate::provider::{DecisionRequest, ModelEntry, Result};

use crate::codec;
use crate::dialect::Dialect;
use crate::options::{OpenAiOptions, provisional_limit};

/// The most options a choice may have: each gets a one-letter label, `A` to `Z`.
pub const MAX_OPTIONS: usize = MAX_LABELED_OPTIONS;

/// The decision transport of one model of an OpenAI-like provider.
///
/// Each question is sent as one chat request (`logprobs: true`, `top_logprobs: 20`, an
/// output limit of 1 token, temperature 0) that asks for one option label: `yes` or
/// `no` for a [`Question::Noul`](tollgate::Question::Noul), a letter `A`, `B`, … for a [`Question::Choice`](tollgate::Question::Choice) (a
/// letter is one token for every tokenizer, where option texts may share a first
/// token). The first token's top logprobs are summed per label (case and surrounding
/// spaces ignored) and renormalized over the options; a label absent from the top 20
/// gets probability 0.
#[derive(Debug)]
pub struct OpenAiDecision {
    endpoint: Endpoint,
    model: ModelEntry,
    options: OpenAiOptions,
    path: String,
    dialect: Dialect,
}

impl OpenAiDecision {
    /// The transport of `model` through `endpoint`, posting its chat requests to
    /// `chat_path` and reading them in `dialect`.
    pub fn new(
        endpoint: Endpoint,
        model: &ModelEntry,
        options: OpenAiOptions,
        chat_path: impl Into<String>,
        dialect: Dialect,
    ) -> Self {
        OpenAiDecision {
            endpoint,
            model: model.clone(),
            options,
            path: chat_path.into(),
            dialect,
        }
    }
}

#[tollgate::provider::async_trait]
impl DecisionTransport for OpenAiDecision {
    /// Sends the request's question in one chat request. The pipeline passes one
    /// question per call ([`max_batch`](DecisionTransport::max_batch) is 1); a request
    /// with more is refused, so that no request leaves unreserved.
    async fn decide(&self, request: &DecisionRequest, signals: &Signals) -> Result<DecisionReply> {
        let question = LabeledQuestion::of(request, &self.model.id)?;
        let body = codec::encode_decision(
            &self.model.name,
            self.options.quirks.output_limit_field,
            request.state(),
            question.prompt(),
            question.pairs(),
        );
        let names = question.labels();
        let (by_label, usage) = self
            .endpoint
            .post_decoded(&self.path, &body, signals, |bytes| {
                codec::decode_decision_in(bytes, &names, &self.dialect)
            })
            .await?;
        question.reply(&by_label, usage)
    }

    /// One question per request.
    fn max_batch(&self) -> usize {
        1
    }

    /// As the chat transport's estimate: exact, or the bytes of a small question while
    /// the table loads.
    fn estimate_input_tokens(&self, request: &DecisionRequest) -> u64 {
        self.options
            .count(&self.model, provisional_limit(&self.model, 0), |e| {
                labeled_input_tokens(request, |t| e.estimate_text(t))
            })
    }
}
