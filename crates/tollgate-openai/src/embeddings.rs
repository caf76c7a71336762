//! The embeddings transport: `/v1/embeddings`, batches split to the per-request maximum
//! and reassembled in order. The core makes every vector the deployment's width and
//! unit length; this returns the vectors as the server sent them.

use tollgate::EmbeddingPurpose;
use tollgate::pipeline::{EmbeddingsReply, EmbeddingsTransport, Signals};
use tollgate::{Result, Usage};

use crate::codec;
use crate::transport::Endpoint;

const EMBEDDINGS_PATH: &str = "/v1/embeddings";

/// The embeddings transport of one `openai` or `openai-compatible` model.
///
/// [`EmbeddingPurpose`] has no effect: OpenAI's embeddings take no task type.
#[derive(Debug)]
pub struct OpenAiEmbeddings {
    endpoint: Endpoint,
}

impl OpenAiEmbeddings {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        OpenAiEmbeddings { endpoint }
    }
}

#[tollgate::async_trait]
impl EmbeddingsTransport for OpenAiEmbeddings {
    /// Sends the texts in batches of at most `options.embedding_batch` (default 2048),
    /// one after another, and returns every vector in input order with the summed
    /// `usage.prompt_tokens`. `dimensions` is sent when set.
    async fn embed(
        &self,
        texts: &[String],
        _purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        let mut vectors = Vec::with_capacity(texts.len());
        let mut tokens = 0u64;
        for batch in texts.chunks(self.endpoint.options.embedding_batch) {
            let body = codec::encode_embeddings(&self.endpoint.model.name, batch, dimensions);
            let bytes = self
                .endpoint
                .post_json(EMBEDDINGS_PATH, &body, signals)
                .await?;
            let (batch_vectors, batch_tokens) = codec::decode_embeddings(&bytes, batch.len())?;
            vectors.extend(batch_vectors);
            tokens += batch_tokens;
        }
        Ok(EmbeddingsReply {
            vectors,
            usage: Usage::from_cache_inclusive(tokens, 0, 0, 0),
        })
    }

    fn estimate_input_tokens(&self, texts: &[String]) -> u64 {
        texts.iter().map(|t| self.endpoint.estimate_text(t)).sum()
    }
}
