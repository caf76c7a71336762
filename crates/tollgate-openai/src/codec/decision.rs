//! Decision bodies: [`encode_decision`] and [`decode_decision`] over logprobs.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::labels::{DECISION_SYSTEM, decision_prompt, label_weights};
use tollgate::provider::{Result, Usage};
use tollgate::provider::{keep_raw, undecodable};

use super::response::{WireUsage, null_as_default, read_in};
use crate::dialect::Dialect;
use crate::dialect::OutputLimitField;

/// A decision answer: a Chat Completions body, of which only the first choice's
/// logprobs and the usage are read.
#[derive(Debug, Deserialize)]
struct WireDecision {
    #[serde(default, deserialize_with = "null_as_default")]
    choices: Vec<WireDecisionChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireDecisionChoice {
    #[serde(default)]
    logprobs: Option<WireLogprobs>,
}

#[derive(Debug, Default, Deserialize)]
struct WireLogprobs {
    #[serde(default)]
    content: Option<Vec<WireTokenLogprob>>,
}

#[derive(Debug, Deserialize)]
struct WireTokenLogprob {
    #[serde(default)]
    token: String,
    #[serde(default)]
    logprob: f64,
    #[serde(default, deserialize_with = "null_as_default")]
    top_logprobs: Vec<WireTopLogprob>,
}

#[derive(Debug, Deserialize)]
struct WireTopLogprob {
    #[serde(default)]
    token: String,
    #[serde(default)]
    logprob: f64,
}

/// OpenAI's "not among the top logprobs" value.
const NOT_IN_TOP: f64 = -9999.0;

/// Encodes one decision question as a Chat Completions body asking for one token with
/// its top 20 logprobs, at temperature 0.
pub fn encode_decision(
    model: &str,
    output_limit_field: OutputLimitField,
    state: &str,
    prompt: &str,
    labels: &[(String, String)],
) -> Value {
    let mut body = json!({
        "model": model,
        "messages": [
            {"role": "system", "content": DECISION_SYSTEM},
            {"role": "user", "content": decision_prompt(state, prompt, labels)},
        ],
        "logprobs": true,
        "top_logprobs": 20,
        "temperature": 0,
    });
    body[output_limit_field.field()] = json!(1);
    body
}

/// Decodes a decision answer: the first generated token's top logprobs, as a weight per
/// label (`exp(logprob)` summed over the tokens that read as the label, ignoring case
/// and surrounding spaces). Returns the weights and the usage. A label no top token
/// matches has weight 0; an answer where no label matches at all is an error.
pub fn decode_decision(body: &[u8], labels: &[String]) -> Result<(BTreeMap<String, f64>, Usage)> {
    decode_decision_in(body, labels, &Dialect::OPENAI)
}

/// [`decode_decision`] in `dialect` (its rewrite of the answer: usage read as the
/// dialect says).
pub fn decode_decision_in(
    body: &[u8],
    labels: &[String],
    dialect: &Dialect,
) -> Result<(BTreeMap<String, f64>, Usage)> {
    decode_body(body, labels, dialect).map_err(|e| keep_raw(e, body))
}

/// An answer that decodes but cannot serve the decision (no logprobs, no label among
/// them): final, since the same request gets the same kind of answer.
fn unusable(what: &str) -> tollgate::provider::Error {
    tollgate::provider::ProviderRequestError::new(
        200,
        format!("the server's answer cannot serve a decision: {what}"),
    )
    .into()
}

fn decode_body(
    body: &[u8],
    labels: &[String],
    dialect: &Dialect,
) -> Result<(BTreeMap<String, f64>, Usage)> {
    let (response, _): (WireDecision, _) = read_in(body, dialect)?;
    let usage = response.usage.unwrap_or_default().neutral();
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| undecodable("no choices"))?;
    let first = choice
        .logprobs
        .and_then(|l| l.content)
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| {
            unusable("no logprobs: the server does not return them (set `options.logprobs = false` for this model)")
        })?;
    let mut candidates: Vec<(String, f64)> = first
        .top_logprobs
        .into_iter()
        .map(|t| (t.token, t.logprob))
        .collect();
    if candidates.is_empty() {
        candidates.push((first.token, first.logprob));
    }
    // A logprob at the API's floor means "not in the top": no weight.
    let candidates = candidates.into_iter().filter(|(_, lp)| *lp > NOT_IN_TOP);
    let weights = label_weights(candidates, labels)
        .ok_or_else(|| unusable("none of the first token's top logprobs is an option label"))?;
    Ok((weights, usage))
}
