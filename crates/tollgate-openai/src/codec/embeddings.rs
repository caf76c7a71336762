//! Embeddings bodies: [`encode_embeddings`] and [`decode_embeddings`].

use super::response::{WireUsage, null_as_default};

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::Result;
use tollgate::provider::{keep_raw, parse_json, undecodable};

#[derive(Debug, Deserialize)]
struct WireEmbeddings {
    #[serde(default, deserialize_with = "null_as_default")]
    data: Vec<WireEmbedding>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireEmbedding {
    index: Option<usize>,
    embedding: Vec<f32>,
}

/// Encodes an embeddings request body.
pub fn encode_embeddings(model: &str, texts: &[String], dimensions: Option<u64>) -> Value {
    let mut body = json!({"model": model, "input": texts, "encoding_format": "float"});
    if let Some(d) = dimensions {
        body["dimensions"] = json!(d);
    }
    body
}

/// Decodes an embeddings body for `expected` inputs: the vectors in input order (by
/// each item's `index`, or list order where a server leaves it out) and the prompt
/// tokens.
pub fn decode_embeddings(body: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64)> {
    decode_body(body, expected).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64)> {
    let response: WireEmbeddings = parse_json(body)?;
    if response.data.len() != expected {
        return Err(undecodable(format!(
            "{} embeddings for {expected} inputs",
            response.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in response.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(position);
        let slot = slots
            .get_mut(index)
            .ok_or_else(|| undecodable(format!("embedding index {index} out of range")))?;
        if slot.replace(item.embedding).is_some() {
            return Err(undecodable(format!("embedding index {index} given twice")));
        }
    }
    let vectors = slots
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| undecodable("an embedding index is missing"))?;
    Ok((
        vectors,
        response.usage.map(|u| u.prompt_tokens()).unwrap_or(0),
    ))
}
