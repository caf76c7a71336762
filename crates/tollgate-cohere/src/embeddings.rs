//! The embeddings transport: `/v2/embed`, one request per call, at most
//! `options.embedding_batch` texts (96 at most; the pipeline splits larger batches,
//! reserving each request). The core makes every vector the deployment's width and unit
//! length; this returns the vectors as Cohere sent them.

use tollgate::provider::http::Endpoint;
use tollgate::provider::{EmbeddingPurpose, ModelEntry, Result, Usage};
use tollgate::provider::{EmbeddingsReply, EmbeddingsTransport, Signals};

use crate::codec;
use crate::options::CohereOptions;

const EMBED_PATH: &str = "/v2/embed";

/// The embeddings transport of one `cohere` model. The purpose is sent as `input_type`
/// (`search_document` / `search_query`, or the catalog's `input_type` option), the
/// dimensions the pipeline passes as `output_dimension`, and float vectors are asked
/// for (`embedding_types: ["float"]`).
#[derive(Debug)]
pub struct CohereEmbeddings {
    endpoint: Endpoint,
    model: ModelEntry,
    options: CohereOptions,
}

impl CohereEmbeddings {
    pub(crate) fn new(endpoint: Endpoint, model: &ModelEntry, options: CohereOptions) -> Self {
        CohereEmbeddings {
            endpoint,
            model: model.clone(),
            options,
        }
    }
}

#[tollgate::provider::async_trait]
impl EmbeddingsTransport for CohereEmbeddings {
    /// Sends the texts in one request and returns the vectors in input order with the
    /// billed input tokens (`meta.billed_units.input_tokens`).
    async fn embed(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        let input_type = codec::input_type(purpose, self.options.input_type);
        let body = codec::encode_embeddings(&self.model.name, texts, input_type, dimensions);
        let (vectors, tokens) = self
            .endpoint
            .post_decoded(EMBED_PATH, &body, signals, |bytes| {
                codec::decode_embeddings(bytes, texts.len())
            })
            .await?;
        Ok(EmbeddingsReply {
            vectors,
            usage: Usage::from_cache_inclusive(tokens, 0, 0, 0),
        })
    }

    /// `options.embedding_batch` (default 96, Cohere's per-request maximum).
    fn max_batch(&self) -> usize {
        self.options.embedding_batch
    }
}
