//! Embeddings and decision clients: the same pipeline as chat (reserved, retried,
//! recorded, costed, capped) around their transports.

use std::sync::Arc;

use super::engine::{CallState, ModelRuntime};
use super::job::JobContext;
use super::transport::{DecisionTransport, EmbeddingsTransport, Signals};
use crate::client::{
    Decision, DecisionClient, DecisionRequest, Embedding, EmbeddingPurpose, EmbeddingsClient,
};
use crate::error::{Error, ProviderRequestError, Result};
use crate::limit::Cost;

/// An embeddings client for one model, enforcing the deployment's width.
#[derive(Debug)]
pub(crate) struct PipelineEmbeddings {
    pub(crate) rt: Arc<ModelRuntime>,
    /// The first deployment's transport (estimates and accounting).
    pub(crate) transport: Arc<dyn EmbeddingsTransport>,
    /// One per deployment of the model.
    pub(crate) transports: Vec<Arc<dyn EmbeddingsTransport>>,
    pub(crate) job: Option<JobContext>,
    pub(crate) width: u64,
}

#[async_trait::async_trait]
impl EmbeddingsClient for PipelineEmbeddings {
    async fn embed_batch(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Embedding>> {
        let entry = &self.rt.entry;
        let dimensions = entry.embedding.dimensions_param.then_some(self.width);
        let mut call =
            CallState::new(self.rt.clone(), self.job.clone(), "embeddings").with_content(texts);
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
        let result = call
            .run(cost, self.transport.accounting(), send)
            .await
            .and_then(|(vectors, _)| {
                if vectors.len() != texts.len() {
                    return Err(Error::ProviderRequest(ProviderRequestError::new(
                        200,
                        format!(
                            "asked for {} embeddings, the provider returned {}",
                            texts.len(),
                            vectors.len()
                        ),
                    )));
                }
                let width = usize::try_from(self.width).unwrap_or(usize::MAX);
                vectors
                    .into_iter()
                    .map(|v| {
                        Embedding::normalize(&entry.id, v, width, entry.embedding.truncation_safe)
                    })
                    .collect()
            });
        call.finish(result.as_ref().map(|_| ()), None);
        result
    }
}

/// A decision client for one model.
#[derive(Debug)]
pub(crate) struct PipelineDecision {
    pub(crate) rt: Arc<ModelRuntime>,
    /// The first deployment's transport (estimates and accounting).
    pub(crate) transport: Arc<dyn DecisionTransport>,
    /// One per deployment of the model.
    pub(crate) transports: Vec<Arc<dyn DecisionTransport>>,
    pub(crate) job: Option<JobContext>,
}

#[async_trait::async_trait]
impl DecisionClient for PipelineDecision {
    async fn decide(&self, request: &DecisionRequest) -> Result<Decision> {
        if request.model_id() != self.rt.entry.id {
            return Err(Error::InvalidRequest {
                field: "model_id".into(),
                reason: format!(
                    "is `{}` but this client serves model `{}`",
                    request.model_id(),
                    self.rt.entry.id
                ),
            });
        }
        let mut call =
            CallState::new(self.rt.clone(), self.job.clone(), "decision").with_content(request);
        let cost = Cost::call(self.transport.estimate_input_tokens(request), 0);
        let send = |deployment: usize| {
            let transport = self.transports[deployment].clone();
            async move {
                let signals = Signals::default();
                let result = transport
                    .decide(request, &signals)
                    .await
                    .map(|r| (r.decision, r.usage));
                (result, signals)
            }
        };
        let result = call
            .run(cost, self.transport.accounting(), send)
            .await
            .map(|(d, _)| d);
        call.finish(result.as_ref().map(|_| ()), None);
        result
    }
}
