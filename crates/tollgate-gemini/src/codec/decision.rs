//! Decision bodies over logprobs: [`encode_decision`] and [`decode_decision`].
//!
//! One question per request: the answer is constrained to the option labels
//! (`responseMimeType: text/x.enum` with an enum `responseSchema`), and
//! `responseLogprobs` with `logprobs: `[`TOP_LOGPROBS`] returns the top alternatives of
//! each decoding step; the first step's give a probability per label.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::labels::{DECISION_SYSTEM, decision_prompt, label_weights};
use tollgate::provider::{Result, Usage};
use tollgate::provider::{keep_raw, parse_json, undecodable};

use super::response::WireUsage;

/// How many alternatives per step are asked for (Gemini takes 0 to 20).
pub const TOP_LOGPROBS: u64 = 20;

/// A decision answer: a `GenerateContentResponse`, of which only the first candidate's
/// `logprobsResult` and the usage are read.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireDecision {
    #[serde(default)]
    candidates: Vec<WireDecisionCandidate>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireDecisionCandidate {
    #[serde(default)]
    logprobs_result: Option<WireLogprobsResult>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireLogprobsResult {
    #[serde(default)]
    top_candidates: Vec<WireTopCandidates>,
    #[serde(default)]
    chosen_candidates: Vec<WireCandidateToken>,
}

#[derive(Debug, Default, Deserialize)]
struct WireTopCandidates {
    #[serde(default)]
    candidates: Vec<WireCandidateToken>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCandidateToken {
    #[serde(default)]
    token: String,
    #[serde(default)]
    log_probability: Option<f64>,
}

/// Encodes one decision question as a `generateContent` body: the state and the
/// question, the answer constrained to one of `labels` (`(label, option)` pairs), with
/// logprobs, at temperature 0. `thinking` is the catalog's `thinkingConfig`, if any
/// (a thinking budget of 0 keeps thoughts from using the output limit).
pub fn encode_decision(
    state: &str,
    prompt: &str,
    labels: &[(String, String)],
    thinking: Option<Value>,
) -> Value {
    let names: Vec<&str> = labels.iter().map(|(l, _)| l.as_str()).collect();
    let user = decision_prompt(state, prompt, labels);
    let mut config = json!({
        "responseMimeType": "text/x.enum",
        "responseSchema": {"type": "STRING", "enum": names},
        "responseLogprobs": true,
        "logprobs": TOP_LOGPROBS,
        "temperature": 0,
        "candidateCount": 1,
        "maxOutputTokens": 16,
    });
    if let Some(thinking) = thinking {
        config["thinkingConfig"] = thinking;
    }
    json!({
        "systemInstruction": {"parts": [{"text": DECISION_SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": user}]}],
        "generationConfig": config,
    })
}

/// Decodes a decision answer: the first step's top candidates (or the chosen token alone
/// where no alternatives came back) as a weight per label, `exp(logProbability)` summed
/// over the tokens that read as the label (case and surrounding spaces ignored). A label
/// no candidate matches has weight 0; an answer where none matches is an error.
pub fn decode_decision(body: &[u8], labels: &[String]) -> Result<(BTreeMap<String, f64>, Usage)> {
    decode_body(body, labels).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8], labels: &[String]) -> Result<(BTreeMap<String, f64>, Usage)> {
    let response: WireDecision = parse_json(body)?;
    let usage = response.usage_metadata.unwrap_or_default().neutral();
    let result = response
        .candidates
        .into_iter()
        .next()
        .and_then(|c| c.logprobs_result)
        .ok_or_else(|| {
            undecodable(
                "no logprobsResult: the model returned no logprobs (set `options.logprobs = \
                 false` for this model)",
            )
        })?;
    let mut candidates: Vec<(String, f64)> = result
        .top_candidates
        .into_iter()
        .next()
        .map(|step| {
            step.candidates
                .into_iter()
                .filter_map(|c| Some((c.token, c.log_probability?)))
                .collect()
        })
        .unwrap_or_default();
    if candidates.is_empty()
        && let Some(chosen) = result.chosen_candidates.into_iter().next()
        && let Some(lp) = chosen.log_probability
    {
        candidates.push((chosen.token, lp));
    }
    let weights = label_weights(candidates, labels).ok_or_else(|| {
        undecodable("none of the first step's candidate tokens is an option label")
    })?;
    Ok((weights, usage))
}
