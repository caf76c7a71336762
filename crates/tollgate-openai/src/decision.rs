//! The decision transport over logprobs: one constrained prompt per question (one HTTP
//! request each, reserved each by the pipeline), answered with one token; the first token's top logprobs give a probability per option.

use std::collections::BTreeMap;

use tollgate::pipeline::{DecisionReply, DecisionTransport, Signals};
use tollgate::{Decision, DecisionRequest, Question};
use tollgate::{Error, Result};

use crate::codec;
use crate::transport::Endpoint;

const CHAT_PATH: &str = "/v1/chat/completions";

/// The most options a choice may have: each gets a one-letter label, `A` to `Z`.
pub const MAX_OPTIONS: usize = 26;

/// The decision transport of one `openai` or `openai-compatible` model.
///
/// Each question is sent as one chat request (`logprobs: true`, `top_logprobs: 20`, an
/// output limit of 1 token, temperature 0) that asks for one option label: `yes` or
/// `no` for a [`Question::Noul`], a letter `A`, `B`, … for a [`Question::Choice`] (a
/// letter is one token for every tokenizer, where option texts may share a first
/// token). The first token's top logprobs are summed per label (case and surrounding
/// spaces ignored) and renormalized over the options; a label absent from the top 20
/// gets probability 0.
#[derive(Debug)]
pub struct OpenAiDecision {
    endpoint: Endpoint,
}

impl OpenAiDecision {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        OpenAiDecision { endpoint }
    }
}

/// `(label, option)` pairs for a question.
fn labels(question: &Question) -> Result<Vec<(String, String)>> {
    match question {
        Question::Noul { .. } => Ok(vec![
            ("yes".to_owned(), "yes".to_owned()),
            ("no".to_owned(), "no".to_owned()),
        ]),
        Question::Choice { options, .. } => {
            if options.len() > MAX_OPTIONS {
                return Err(Error::InvalidRequest {
                    field: format!("questions.{}.options", question.name()),
                    reason: format!(
                        "has {} options; the logprobs decision client labels options A to Z, at most {MAX_OPTIONS}",
                        options.len()
                    ),
                });
            }
            Ok(options
                .iter()
                .zip('A'..='Z')
                .map(|(o, l)| (l.to_string(), o.clone()))
                .collect())
        }
    }
}

fn prompt(question: &Question) -> &str {
    match question {
        Question::Choice { prompt, .. } | Question::Noul { prompt, .. } => prompt,
    }
}

#[tollgate::async_trait]
impl DecisionTransport for OpenAiDecision {
    /// Sends the request's question in one chat request. The pipeline passes one
    /// question per call ([`max_batch`](DecisionTransport::max_batch) is 1); a request
    /// with more is refused, so that no request leaves unreserved.
    async fn decide(&self, request: &DecisionRequest, signals: &Signals) -> Result<DecisionReply> {
        let [question] = request.questions() else {
            return Err(Error::InvalidRequest {
                field: "questions".into(),
                reason: format!(
                    "holds {} questions; model `{}`'s decision transport sends one question per \
                     request (the pipeline splits a request into one per question)",
                    request.questions().len(),
                    self.endpoint.model.id
                ),
            });
        };
        let pairs = labels(question)?;
        let body = codec::encode_decision(
            &self.endpoint.model.name,
            self.endpoint.options.quirks.output_limit_field,
            request.state(),
            prompt(question),
            &pairs,
        );
        let names: Vec<String> = pairs.iter().map(|(l, _)| l.clone()).collect();
        let (by_label, usage) = self
            .endpoint
            .post_decoded(CHAT_PATH, &body, signals, |bytes| {
                codec::decode_decision(bytes, &names)
            })
            .await?;
        let by_option: BTreeMap<String, f64> = pairs
            .into_iter()
            .map(|(label, option)| (option, by_label.get(&label).copied().unwrap_or(0.0)))
            .collect();
        let weights = BTreeMap::from([(question.name().to_owned(), by_option)]);
        Ok(DecisionReply {
            decision: Decision::from_weights(request, weights)?,
            usage,
        })
    }

    /// One question per request.
    fn max_batch(&self) -> usize {
        1
    }

    fn estimate_input_tokens(&self, request: &DecisionRequest) -> u64 {
        // The fixed instructions and option list per question, about 40 tokens.
        let per_question: u64 = request
            .questions()
            .iter()
            .map(|q| {
                40 + self.endpoint.estimate_text(prompt(q))
                    + q.options()
                        .iter()
                        .map(|o| 2 + self.endpoint.estimate_text(o))
                        .sum::<u64>()
                    + self.endpoint.estimate_text(request.state())
            })
            .sum();
        per_question
    }
}
