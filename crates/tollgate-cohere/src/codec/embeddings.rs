//! Embed bodies: [`encode_embeddings`] and [`decode_embeddings`].

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::{EmbeddingPurpose, Result};
use tollgate::provider::{keep_raw, parse_json, undecodable};

use super::response::Units;
use crate::options::InputType;

/// The `input_type` a request says: the catalog's `input_type` when set, else
/// `search_document` for documents and `search_query` for queries.
pub fn input_type(purpose: EmbeddingPurpose, configured: Option<InputType>) -> &'static str {
    match (configured, purpose) {
        (Some(kind), _) => kind.as_str(),
        (None, EmbeddingPurpose::Document) => "search_document",
        (None, EmbeddingPurpose::Query) => "search_query",
    }
}

/// Encodes an Embed request body: float vectors of `texts`, `output_dimension` when
/// `dimensions` is set.
pub fn encode_embeddings(
    model: &str,
    texts: &[String],
    input_type: &str,
    dimensions: Option<u64>,
) -> Value {
    let mut body = json!({"model": model, "texts": texts, "input_type": input_type,
                          "embedding_types": ["float"]});
    if let Some(d) = dimensions {
        body["output_dimension"] = json!(d);
    }
    body
}

#[derive(Debug, Deserialize)]
struct WireEmbed {
    #[serde(default)]
    embeddings: WireVectors,
    #[serde(default)]
    meta: Option<WireMeta>,
}

#[derive(Debug, Default, Deserialize)]
struct WireVectors {
    #[serde(default, rename = "float")]
    floats: Option<Vec<Vec<f32>>>,
}

#[derive(Debug, Deserialize)]
struct WireMeta {
    #[serde(default)]
    billed_units: Option<Units>,
    #[serde(default)]
    tokens: Option<Units>,
}

/// Decodes an Embed answer for `expected` texts: the float vectors in input order and
/// the input tokens (`meta.billed_units.input_tokens`, else `meta.tokens.input_tokens`,
/// else 0).
pub fn decode_embeddings(body: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64)> {
    decode_body(body, expected).map_err(|e| keep_raw(e, body))
}

fn decode_body(body: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64)> {
    let response: WireEmbed = parse_json(body)?;
    let vectors = response
        .embeddings
        .floats
        .ok_or_else(|| undecodable("no `embeddings.float`"))?;
    if vectors.len() != expected {
        return Err(undecodable(format!(
            "{} embeddings for {expected} texts",
            vectors.len()
        )));
    }
    let tokens = response.meta.map_or(0, |m| {
        m.billed_units
            .and_then(|u| u.input())
            .or_else(|| m.tokens.and_then(|u| u.input()))
            .unwrap_or(0)
    });
    Ok((vectors, tokens))
}
