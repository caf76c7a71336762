//! Embeddings bodies, in the three shapes Google uses:
//!
//! - Gemini API `:batchEmbedContents` ([`encode_batch_embeddings`]): up to
//!   [`MAX_BATCH_EMBEDDINGS`] texts, vectors in request order, no usage reported;
//! - Vertex `:predict` ([`encode_vertex_predict`]), for `gemini-embedding-001` and the
//!   `text-embedding-*` / `text-multilingual-embedding-*` models: `instances`, with
//!   `statistics.token_count` per vector;
//! - Vertex `:embedContent` ([`encode_vertex_embed_content`]), for newer Gemini
//!   embedding models: one text, with `usageMetadata.promptTokenCount`.

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::{EmbeddingPurpose, Result};
use tollgate::provider::{parse_json, undecodable};

/// The most texts one `batchEmbedContents` request takes ("at most 100 requests can be
/// in one batch").
pub const MAX_BATCH_EMBEDDINGS: usize = 100;

/// The `taskType` for a purpose: documents are embedded for retrieval, queries to
/// search with.
pub fn task_type(purpose: EmbeddingPurpose) -> &'static str {
    match purpose {
        EmbeddingPurpose::Document => "RETRIEVAL_DOCUMENT",
        EmbeddingPurpose::Query => "RETRIEVAL_QUERY",
    }
}

/// Encodes a Gemini API `batchEmbedContents` body: one request per text, each naming
/// the model (`models/{model}`), with `taskType` and, when set, `outputDimensionality`.
pub fn encode_batch_embeddings(
    model: &str,
    texts: &[String],
    purpose: EmbeddingPurpose,
    dimensions: Option<u64>,
) -> Value {
    let requests: Vec<Value> = texts
        .iter()
        .map(|text| {
            let mut request = json!({
                "model": format!("models/{model}"),
                "content": {"parts": [{"text": text}]},
                "taskType": task_type(purpose),
            });
            if let Some(d) = dimensions {
                request["outputDimensionality"] = json!(d);
            }
            request
        })
        .collect();
    json!({ "requests": requests })
}

#[derive(Debug, Deserialize)]
struct WireValues {
    #[serde(default)]
    values: Vec<f32>,
}

#[derive(Debug, Deserialize)]
struct WireBatch {
    #[serde(default)]
    embeddings: Vec<WireValues>,
}

fn check_count(got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(undecodable(format!(
            "{got} embeddings for {expected} texts"
        )))
    }
}

/// Decodes a `batchEmbedContents` answer for `expected` texts: the vectors, in order.
pub fn decode_batch_embeddings(body: &[u8], expected: usize) -> Result<Vec<Vec<f32>>> {
    let batch: WireBatch = parse_json(body)?;
    check_count(batch.embeddings.len(), expected)?;
    Ok(batch.embeddings.into_iter().map(|e| e.values).collect())
}

/// Encodes a Vertex `:predict` body for text embedding models.
pub fn encode_vertex_predict(
    texts: &[String],
    purpose: EmbeddingPurpose,
    dimensions: Option<u64>,
) -> Value {
    let instances: Vec<Value> = texts
        .iter()
        .map(|text| json!({"content": text, "task_type": task_type(purpose)}))
        .collect();
    let mut body = json!({ "instances": instances });
    if let Some(d) = dimensions {
        body["parameters"] = json!({ "outputDimensionality": d });
    }
    body
}

#[derive(Debug, Deserialize)]
struct WirePredictions {
    #[serde(default)]
    predictions: Vec<WirePrediction>,
}

#[derive(Debug, Deserialize)]
struct WirePrediction {
    embeddings: WirePredictedEmbedding,
}

#[derive(Debug, Deserialize)]
struct WirePredictedEmbedding {
    #[serde(default)]
    values: Vec<f32>,
    #[serde(default)]
    statistics: Option<WireStatistics>,
}

#[derive(Debug, Deserialize)]
struct WireStatistics {
    #[serde(default)]
    token_count: Option<f64>,
}

/// Decodes a Vertex `:predict` answer for `expected` texts: the vectors in order and the
/// tokens they took (`statistics.token_count`, summed).
pub fn decode_vertex_predict(body: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64)> {
    let answer: WirePredictions = parse_json(body)?;
    check_count(answer.predictions.len(), expected)?;
    let mut tokens = 0u64;
    let vectors = answer
        .predictions
        .into_iter()
        .map(|p| {
            let count = p.embeddings.statistics.and_then(|s| s.token_count);
            // A count is a whole number sent as a JSON number (sometimes `7.0`).
            tokens += count.filter(|c| c.is_finite() && *c >= 0.0).unwrap_or(0.0) as u64;
            p.embeddings.values
        })
        .collect();
    Ok((vectors, tokens))
}

/// Encodes a Vertex `:embedContent` body (one text).
pub fn encode_vertex_embed_content(
    text: &str,
    purpose: EmbeddingPurpose,
    dimensions: Option<u64>,
) -> Value {
    let mut body = json!({
        "content": {"role": "user", "parts": [{"text": text}]},
        "taskType": task_type(purpose),
    });
    if let Some(d) = dimensions {
        body["outputDimensionality"] = json!(d);
    }
    body
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEmbedContent {
    embedding: WireValues,
    #[serde(default)]
    usage_metadata: Option<WirePromptCount>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePromptCount {
    #[serde(default)]
    prompt_token_count: Option<u64>,
}

/// Decodes an `:embedContent` answer: the vector and its prompt tokens (0 where the
/// answer reports none, as the Gemini API's does).
pub fn decode_embed_content(body: &[u8]) -> Result<(Vec<f32>, u64)> {
    let answer: WireEmbedContent = parse_json(body)?;
    let tokens = answer
        .usage_metadata
        .and_then(|u| u.prompt_token_count)
        .unwrap_or(0);
    Ok((answer.embedding.values, tokens))
}
