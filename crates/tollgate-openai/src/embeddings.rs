//! The embeddings transport: `/v1/embeddings`, one request per call, at most
//! `options.embedding_batch` inputs (the pipeline splits larger batches, reserving each
//! request). The core makes every vector the deployment's width and
//! unit length; this returns the vectors as the server sent them.

use tollgate::provider::http::Endpoint;
use tollgate::provider::{EmbeddingPurpose, ModelEntry, Result, Usage};
use tollgate::provider::{EmbeddingsReply, EmbeddingsTransport, Signals};

use crate::codec;
use crate::options::{OpenAiOptions, provisional_limit};

/// The embeddings transport of one model of an OpenAI-like provider.
///
/// [`EmbeddingPurpose`] has no effect: OpenAI's embeddings take no task type.
#[derive(Debug)]
pub struct OpenAiEmbeddings {
    endpoint: Endpoint,
    model: ModelEntry,
    options: OpenAiOptions,
    path: String,
}

impl OpenAiEmbeddings {
    /// The transport of `model` through `endpoint`, posting to `path` (after the
    /// endpoint's base URL, a query string allowed).
    pub fn new(
        endpoint: Endpoint,
        model: &ModelEntry,
        options: OpenAiOptions,
        path: impl Into<String>,
    ) -> Self {
        OpenAiEmbeddings {
            endpoint,
            model: model.clone(),
            options,
            path: path.into(),
        }
    }
}

#[tollgate::provider::async_trait]
impl EmbeddingsTransport for OpenAiEmbeddings {
    /// Sends the texts in one request (the pipeline never passes more than
    /// [`max_batch`](EmbeddingsTransport::max_batch)) and returns the vectors in input
    /// order with `usage.prompt_tokens`. `dimensions` is sent when set.
    async fn embed(
        &self,
        texts: &[String],
        _purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        let body = codec::encode_embeddings(&self.model.name, texts, dimensions);
        let (vectors, tokens) = self
            .endpoint
            .post_decoded(&self.path, &body, signals, |bytes| {
                codec::decode_embeddings(bytes, texts.len())
            })
            .await?;
        Ok(EmbeddingsReply {
            vectors,
            usage: Usage::from_cache_inclusive(tokens, 0, 0, 0),
        })
    }

    /// `options.embedding_batch` (default 2048, OpenAI's per-request maximum).
    fn max_batch(&self) -> usize {
        self.options.embedding_batch
    }

    /// Tiktoken's count for OpenAI's models (until the table is loaded, the texts' bytes
    /// when they total at most `provisional_limit`); the conservative default
    /// for other servers.
    fn estimate_input_tokens(&self, texts: &[String]) -> u64 {
        self.options
            .count(&self.model, provisional_limit(&self.model, 0), |e| {
                texts.iter().map(|t| e.estimate_text(t)).sum()
            })
    }
}
