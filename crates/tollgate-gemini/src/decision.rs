//! The decision transport over logprobs: one constrained request per question (one HTTP
//! request each, reserved each by the pipeline), answered with one option label; the
//! first step's top candidates give a probability per option.

use std::collections::BTreeMap;

use tollgate::pipeline::TokenEstimator;
use tollgate::pipeline::{DecisionReply, DecisionTransport, DefaultEstimator, Signals};
use tollgate::{Decision, DecisionRequest, Error, Question, Result};

use crate::codec;
use crate::transport::Endpoint;

/// The most options a choice may have: each gets a one-letter label, `A` to `Z`.
pub const MAX_OPTIONS: usize = 26;

/// The decision transport of one `gemini` or `vertex` model whose catalog entry says it
/// returns logprobs (`options.logprobs = true`).
///
/// Each question is one `generateContent` request whose answer is constrained to the
/// labels (`text/x.enum`): `yes`/`no` for a [`Question::Noul`], `A`, `B`, … for a
/// [`Question::Choice`]. The first step's top candidates are summed per label and
/// renormalized over the options; a label absent from them gets probability 0.
#[derive(Debug)]
pub struct GeminiDecision {
    endpoint: Endpoint,
}

impl GeminiDecision {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        GeminiDecision { endpoint }
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
impl DecisionTransport for GeminiDecision {
    /// Sends the request's one question (the pipeline passes one per call:
    /// [`max_batch`](DecisionTransport::max_batch) is 1); a request with more is refused,
    /// so that no request leaves unreserved.
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
            request.state(),
            prompt(question),
            &pairs,
            self.endpoint.thinking_json(),
        );
        let bytes = self
            .endpoint
            .post_json("generateContent", &body, signals)
            .await?;
        let names: Vec<String> = pairs.iter().map(|(l, _)| l.clone()).collect();
        let (by_label, usage) = codec::decode_decision(&bytes, &names)?;
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
        let text = |t: &str| DefaultEstimator.estimate_text(t);
        request
            .questions()
            .iter()
            .map(|q| {
                40 + text(prompt(q))
                    + q.options().iter().map(|o| 2 + text(o)).sum::<u64>()
                    + text(request.state())
            })
            .sum()
    }
}
