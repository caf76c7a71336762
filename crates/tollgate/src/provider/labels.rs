//! What every logprobs decision transport shares: a question asked as a choice among
//! one-token labels (`yes`/`no`, or `A` to `Z`), one question per request, and the
//! label probabilities read back into a [`Decision`]. A provider writes only how its
//! request carries the labels (the words asked are [`DECISION_SYSTEM`] and
//! [`decision_prompt`]) and where its answer keeps the top candidates.

use std::collections::BTreeMap;

use super::transport::DecisionReply;
use crate::client::{Decision, DecisionRequest, Question};
use crate::error::{Error, Result};
use crate::usage::Usage;

/// The most options a choice may have: each gets a one-letter label, `A` to `Z` (a
/// letter is one token for every tokenizer, where option texts may share a first token).
pub const MAX_LABELED_OPTIONS: usize = 26;

/// The one question of a decision request, with a label per option.
#[derive(Debug, Clone)]
pub struct LabeledQuestion<'r> {
    request: &'r DecisionRequest,
    question: &'r Question,
    /// `(label, option)` pairs, in the question's order.
    pairs: Vec<(String, String)>,
}

impl<'r> LabeledQuestion<'r> {
    /// The request's question, labelled. A request holding more than one question is
    /// refused (the pipeline sends one per request, so that each is reserved), as is a
    /// choice of more than [`MAX_LABELED_OPTIONS`] options.
    pub fn of(request: &'r DecisionRequest, model_id: &str) -> Result<Self> {
        let [question] = request.questions() else {
            return Err(Error::InvalidRequest {
                field: "questions".into(),
                reason: format!(
                    "holds {} questions; model `{model_id}`'s decision transport sends one \
                     question per request (the pipeline splits a request into one per question)",
                    request.questions().len(),
                ),
            });
        };
        let pairs = match question {
            Question::Noul { .. } => vec![
                ("yes".to_owned(), "yes".to_owned()),
                ("no".to_owned(), "no".to_owned()),
            ],
            Question::Choice { options, .. } if options.len() > MAX_LABELED_OPTIONS => {
                return Err(Error::InvalidRequest {
                    field: format!("questions.{}.options", question.name()),
                    reason: format!(
                        "has {} options; the logprobs decision client labels options A to Z, \
                         at most {MAX_LABELED_OPTIONS}",
                        options.len()
                    ),
                });
            }
            Question::Choice { options, .. } => options
                .iter()
                .zip('A'..='Z')
                .map(|(o, l)| (l.to_string(), o.clone()))
                .collect(),
        };
        Ok(LabeledQuestion {
            request,
            question,
            pairs,
        })
    }

    /// The question's prompt.
    pub fn prompt(&self) -> &str {
        match self.question {
            Question::Choice { prompt, .. } | Question::Noul { prompt, .. } => prompt,
        }
    }

    /// `(label, option)` pairs, in the question's order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The labels alone.
    pub fn labels(&self) -> Vec<String> {
        self.pairs.iter().map(|(l, _)| l.clone()).collect()
    }

    /// The decision, from the weight of each label (a label missing weighs 0).
    pub fn reply(self, by_label: &BTreeMap<String, f64>, usage: Usage) -> Result<DecisionReply> {
        let by_option: BTreeMap<String, f64> = self
            .pairs
            .into_iter()
            .map(|(label, option)| (option, by_label.get(&label).copied().unwrap_or(0.0)))
            .collect();
        let weights = BTreeMap::from([(self.question.name().to_owned(), by_option)]);
        Ok(DecisionReply {
            decision: Decision::from_weights(self.request, weights)?,
            usage,
        })
    }
}

/// The system instruction of a labelled question: answer with one label, nothing else.
pub const DECISION_SYSTEM: &str = "You answer a question about a state with exactly one \
     option label from the list given, and nothing else.";

/// The user turn of a labelled question: the state, the question and the options, one
/// `- label: option` line each (`- label` where the two are the same, as `yes`/`no`).
pub fn decision_prompt(state: &str, prompt: &str, labels: &[(String, String)]) -> String {
    let listed: Vec<String> = labels
        .iter()
        .map(|(label, option)| {
            if label == option {
                format!("- {label}")
            } else {
                format!("- {label}: {option}")
            }
        })
        .collect();
    format!(
        "State:\n{state}\n\nQuestion: {prompt}\n\nOptions:\n{}\n\nAnswer with one label only.",
        listed.join("\n")
    )
}

/// Sums the probability of each candidate token per label it spells (case and
/// surrounding spaces ignored; a non-finite log-probability is skipped). `None` when no
/// candidate is a label: the answer says nothing about the options.
pub fn label_weights(
    candidates: impl IntoIterator<Item = (String, f64)>,
    labels: &[String],
) -> Option<BTreeMap<String, f64>> {
    let mut weights: BTreeMap<String, f64> = labels.iter().map(|l| (l.clone(), 0.0)).collect();
    for (token, logprob) in candidates {
        if !logprob.is_finite() {
            continue;
        }
        let token = token.trim();
        if let Some(label) = labels.iter().find(|l| l.eq_ignore_ascii_case(token)) {
            *weights.entry(label.clone()).or_default() += logprob.exp();
        }
    }
    weights.values().any(|w| *w > 0.0).then_some(weights)
}

/// What one labelled question costs in input tokens: fixed instructions (about 40
/// tokens), the prompt, each option and the shared state, by `estimate_text`.
pub fn labeled_input_tokens(request: &DecisionRequest, estimate_text: impl Fn(&str) -> u64) -> u64 {
    request
        .questions()
        .iter()
        .map(|q| {
            let prompt = match q {
                Question::Choice { prompt, .. } | Question::Noul { prompt, .. } => prompt,
            };
            40 + estimate_text(prompt)
                + q.options()
                    .iter()
                    .map(|o| 2 + estimate_text(o))
                    .sum::<u64>()
                + estimate_text(request.state())
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn label_weights_sum_candidates_per_label_ignoring_case_and_spaces() {
        let w = label_weights(
            [
                ("yes".to_owned(), (0.5f64).ln()),
                (" Yes".to_owned(), (0.25f64).ln()),
                ("no".to_owned(), (0.125f64).ln()),
                ("maybe".to_owned(), (0.1f64).ln()),
                ("no".to_owned(), f64::NEG_INFINITY),
            ],
            &labels(&["yes", "no"]),
        )
        .unwrap();
        assert!((w["yes"] - 0.75).abs() < 1e-12);
        assert!((w["no"] - 0.125).abs() < 1e-12);
    }

    #[test]
    fn decision_prompt_lists_each_label_with_its_option_unless_they_are_the_same() {
        let pairs = vec![
            ("A".to_owned(), "red".to_owned()),
            ("yes".to_owned(), "yes".to_owned()),
        ];
        assert_eq!(
            decision_prompt("s", "Which?", &pairs),
            "State:\ns\n\nQuestion: Which?\n\nOptions:\n- A: red\n- yes\n\nAnswer with one label only."
        );
        assert!(DECISION_SYSTEM.contains("one option label from the list given"));
    }

    #[test]
    fn label_weights_with_no_label_among_the_candidates_is_none() {
        assert!(label_weights([("maybe".to_owned(), -0.1)], &labels(&["A", "B"])).is_none());
    }
}
