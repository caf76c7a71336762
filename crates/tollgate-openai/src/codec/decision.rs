//! Decision bodies: [`encode_decision`] and [`decode_decision`] over logprobs.

use super::response::{WireResponse, malformed, null_as_default};
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::pipeline::labels::label_weights;
use tollgate::{Result, Usage};

use crate::options::OutputLimitField;

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireLogprobs {
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
    let system = "You answer a question about a state with exactly one option label \
                  from the list given, and nothing else.";
    let user = format!(
        "State:\n{state}\n\nQuestion: {prompt}\n\nOptions:\n{}\n\nAnswer with one label only.",
        listed.join("\n")
    );
    let mut body = json!({
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
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
    decode_body(body, labels).map_err(|e| tollgate::wire::keep_raw(e, body))
}

/// An answer that decodes but cannot serve the decision (no logprobs, no label among
/// them): final, since the same request gets the same kind of answer.
fn unusable(what: &str) -> tollgate::Error {
    tollgate::ProviderRequestError::new(
        200,
        format!("the server's answer cannot serve a decision: {what}"),
    )
    .into()
}

fn decode_body(body: &[u8], labels: &[String]) -> Result<(BTreeMap<String, f64>, Usage)> {
    let response: WireResponse =
        serde_json::from_slice(body).map_err(|e| malformed(format!("{e}")))?;
    let usage = response.usage.unwrap_or_default().neutral();
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| malformed("no choices"))?;
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
