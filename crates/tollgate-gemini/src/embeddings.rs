//! The embeddings transport: one request per call, at most
//! [`max_batch`](EmbeddingsTransport::max_batch) texts (the pipeline splits larger
//! batches, reserving each request). The core makes every vector the deployment's width
//! and unit length (Gemini normalizes only its full width); this returns the vectors as
//! Google sent them.
//!
//! | key | method | texts per request | usage |
//! |---|---|---|---|
//! | `gemini` | `:batchEmbedContents` | 100 (`options.embedding_batch` lowers it) | none reported: the estimate |
//! | `vertex`, `gemini-embedding-001` and `text-*embedding*` models | `:predict` | `gemini-embedding-001` 1, others 250 | `statistics.token_count` |
//! | `vertex`, other models; `gemini` with `embedding_api = "embed_content"` | `:embedContent` | 1 | `usageMetadata.promptTokenCount` (Vertex; none from the Gemini API: the estimate) |

use tollgate::provider::http::Endpoint;
use tollgate::provider::{
    DefaultEstimator, EmbeddingsReply, EmbeddingsTransport, Signals, TokenEstimator,
};
use tollgate::provider::{EmbeddingPurpose, Error, Result, Usage};

use crate::codec::{self, MAX_BATCH_EMBEDDINGS};
use crate::options::{EmbeddingApi, GeminiModel};

/// The most instances one Vertex `:predict` request takes for `text-embedding-*` models.
pub const VERTEX_PREDICT_BATCH: usize = 250;

/// The embeddings transport of one `gemini` or `vertex` model. [`EmbeddingPurpose`] is
/// sent as `taskType` (`RETRIEVAL_DOCUMENT` / `RETRIEVAL_QUERY`); the dimensions the
/// pipeline passes as `outputDimensionality`.
#[derive(Debug)]
pub struct GeminiEmbeddings {
    endpoint: Endpoint,
    model: GeminiModel,
}

impl GeminiEmbeddings {
    pub(crate) fn new(endpoint: Endpoint, model: GeminiModel) -> Self {
        GeminiEmbeddings { endpoint, model }
    }

    /// POSTs `body` to the model's `method` once and decodes the answer with `decode`.
    async fn post<T>(
        &self,
        method: &str,
        body: &serde_json::Value,
        signals: &Signals,
        decode: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        let path = self.model.path(method);
        self.endpoint
            .post_decoded(&path, body, signals, decode)
            .await
    }

    fn estimate(texts: &[String]) -> u64 {
        texts
            .iter()
            .map(|t| DefaultEstimator.estimate_text(t))
            .sum()
    }
}

#[tollgate::provider::async_trait]
impl EmbeddingsTransport for GeminiEmbeddings {
    async fn embed(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        let m = &self.model;
        let n = texts.len();
        let (vectors, tokens) = match m.options.embedding_api {
            EmbeddingApi::Batch => {
                let body = codec::encode_batch_embeddings(&m.name, texts, purpose, dimensions);
                let decode = |b: &[u8]| codec::decode_batch_embeddings(b, n);
                let vectors = self
                    .post("batchEmbedContents", &body, signals, decode)
                    .await?;
                // The Gemini API reports no usage for embeddings: settle on the estimate.
                (vectors, Self::estimate(texts))
            }
            EmbeddingApi::Predict => {
                let body = codec::encode_vertex_predict(texts, purpose, dimensions);
                let decode = |b: &[u8]| codec::decode_vertex_predict(b, n);
                self.post("predict", &body, signals, decode).await?
            }
            EmbeddingApi::EmbedContent => {
                // `max_batch` is 1: one text, one request, one reservation.
                let [text] = texts else {
                    return Err(Error::invalid_request(
                        "texts",
                        format!(
                            "holds {n} texts; model `{}` embeds one text per request (the \
                             pipeline splits a batch into one request per text)",
                            m.entry.id
                        ),
                    ));
                };
                let body = codec::encode_vertex_embed_content(text, purpose, dimensions);
                let decode = codec::decode_embed_content;
                let (vector, tokens) = self.post("embedContent", &body, signals, decode).await?;
                // The Gemini API reports no usage: settle on the estimate.
                let tokens = if tokens == 0 {
                    Self::estimate(texts)
                } else {
                    tokens
                };
                (vec![vector], tokens)
            }
        };
        Ok(EmbeddingsReply {
            vectors,
            usage: Usage::from_cache_inclusive(tokens, 0, 0, 0),
        })
    }

    fn max_batch(&self) -> usize {
        let m = &self.model;
        let native = match m.options.embedding_api {
            EmbeddingApi::Batch => MAX_BATCH_EMBEDDINGS,
            EmbeddingApi::Predict if m.name.starts_with("gemini-embedding") => 1,
            EmbeddingApi::Predict => VERTEX_PREDICT_BATCH,
            EmbeddingApi::EmbedContent => 1,
        };
        m.options.embedding_batch.map_or(native, |b| b.min(native))
    }

    fn estimate_input_tokens(&self, texts: &[String]) -> u64 {
        Self::estimate(texts)
    }
}
