//! The embeddings client: the same pipeline as chat (reserved, retried, recorded,
//! costed, capped) around an embeddings transport, and the deployment's one width.
//!
//! **One HTTP request, one reservation.** A batch of texts is split into requests of at
//! most the transport's `max_batch` items. The requests go one after another
//! (sequentially: each is paced by the model's limiter like any call, and an error stops
//! the batch before more is spent). Each runs its own attempt loop: it is reserved, sent,
//! retried alone (a retry re-sends that request only) and settled on its own, with its own
//! spend-cap hold and, without a job, its own retry budget (a job's budget is shared as
//! always).
//!
//! Recording: one [`crate::pipeline::CallRecord`] per `embed_batch` call, with one
//! [`crate::pipeline::AttemptRecord`] per HTTP attempt of every request. The call's
//! `attempts`, usage and cost are the sums over all its requests, so the recorder's totals,
//! the cost and the spend cap count every request.

use std::sync::Arc;

use tracing::Instrument;

use super::call::CallState;
use super::job::JobContext;
use super::record::Outcome;
use super::runtime::ModelRuntime;
use crate::client::{Embedding, EmbeddingPurpose, EmbeddingsClient};
use crate::error::{Error, ProviderRequestError, Result};
use crate::limit::Cost;
use crate::provider::{EmbeddingsTransport, Signals};

/// An embeddings client for one model, enforcing the deployment's width.
#[derive(Debug)]
pub(crate) struct PipelineEmbeddings {
    pub(crate) rt: Arc<ModelRuntime>,
    /// The first deployment's transport (estimates and accounting).
    pub(crate) transport: Arc<dyn EmbeddingsTransport>,
    /// One per deployment of the model.
    pub(crate) transports: Arc<[Arc<dyn EmbeddingsTransport>]>,
    pub(crate) job: Option<JobContext>,
    pub(crate) width: u64,
}

#[async_trait::async_trait]
impl EmbeddingsClient for PipelineEmbeddings {
    /// Splits `texts` into requests of at most the transport's `max_batch` texts and
    /// sends them one after another, each reserved, retried and settled on its own (a
    /// retry re-sends only the request that failed). The first request that fails for
    /// good ends the call with its error; requests not yet sent are not sent.
    async fn embed_batch(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Embedding>> {
        let mut call =
            CallState::new(self.rt.clone(), self.job.clone(), "embeddings").with_content(texts);
        let span = call.span().clone();
        span.record(
            "gen_ai.embeddings.dimension.count",
            super::telemetry::int(self.width),
        );
        let result = self
            .embed_all(&mut call, texts, purpose)
            .instrument(span)
            .await;
        call.finish(result.as_ref().map(|_| ()));
        result
    }
}

impl PipelineEmbeddings {
    async fn embed_all(
        &self,
        call: &mut CallState,
        texts: &[String],
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Embedding>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.transport.max_batch().max(1)) {
            call.next_request();
            vectors.extend(self.embed_request(call, chunk, purpose).await?);
        }
        Ok(vectors)
    }

    /// One HTTP request: `texts` (at most `max_batch` of them) reserved, sent, retried
    /// and settled as one attempt loop of `call`.
    async fn embed_request(
        &self,
        call: &mut CallState,
        texts: &[String],
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Embedding>> {
        let entry = &self.rt.entry;
        let dimensions = entry.embedding.dimensions_param.then_some(self.width);
        let cost = Cost::call(self.transport.estimate_input_tokens(texts), 0);
        let send = |deployment: usize| {
            let transport = self.transports[deployment].clone();
            async move {
                let signals = Signals::default();
                let result = transport
                    .embed(texts, purpose, dimensions, &signals)
                    .await
                    .map(|r| (r.vectors, r.usage));
                (result, signals)
            }
        };
        let (vectors, _) = call
            .run(cost, self.transport.accounting(), send, |_| {
                Outcome::Success
            })
            .await
            .map_err(|e| match e {
                // A provider's overflow (an input too long to embed), with the model named.
                Error::ContextWindowExceeded { .. } => Error::ContextWindowExceeded {
                    model_id: entry.id.clone(),
                    needed: cost.input_tokens,
                    window: entry.context_window,
                },
                other => other,
            })?;
        if vectors.len() != texts.len() {
            return Err(Error::ProviderRequest(ProviderRequestError::new(
                200,
                format!(
                    "asked model `{}` for {} embeddings in one request, the provider returned {}",
                    entry.id,
                    texts.len(),
                    vectors.len()
                ),
            )));
        }
        let width = usize::try_from(self.width).unwrap_or(usize::MAX);
        vectors
            .into_iter()
            .map(|v| Embedding::normalize(&entry.id, v, width, entry.embedding.truncation_safe))
            .collect()
    }
}
