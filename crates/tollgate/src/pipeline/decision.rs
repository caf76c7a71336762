//! The decision client: the same pipeline as chat around a decision transport.
//!
//! A decision's questions are split into requests of at most the transport's `max_batch`
//! questions, one reservation per request, exactly as the embeddings client splits texts
//! (see `embeddings.rs`); one [`crate::pipeline::CallRecord`] per `decide` call sums them.

use std::sync::Arc;

use tracing::Instrument;

use super::call::CallState;
use super::job::JobContext;
use super::record::Outcome;
use super::runtime::ModelRuntime;
use crate::client::{Decision, DecisionClient, DecisionRequest, DecisionWeights};
use crate::error::{Error, Result};
use crate::limit::Cost;
use crate::provider::{DecisionTransport, Signals};

/// A decision client for one model.
#[derive(Debug)]
pub(crate) struct PipelineDecision {
    pub(crate) rt: Arc<ModelRuntime>,
    /// The first deployment's transport (estimates and accounting).
    pub(crate) transport: Arc<dyn DecisionTransport>,
    /// One per deployment of the model.
    pub(crate) transports: Arc<[Arc<dyn DecisionTransport>]>,
    pub(crate) job: Option<JobContext>,
}

#[async_trait::async_trait]
impl DecisionClient for PipelineDecision {
    async fn decide(&self, request: &DecisionRequest) -> Result<Decision> {
        if !self.rt.answers_to(request.model_id()) {
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
        let span = call.span().clone();
        let result = self.decide_all(&mut call, request).instrument(span).await;
        call.finish(result.as_ref().map(|_| ()));
        result
    }
}

impl PipelineDecision {
    /// Splits the questions into requests of at most the transport's `max_batch`
    /// questions (same state, questions in order) and sends them one after another, each
    /// reserved, retried and settled on its own; merges their answers.
    async fn decide_all(
        &self,
        call: &mut CallState,
        request: &DecisionRequest,
    ) -> Result<Decision> {
        let size = self.transport.max_batch().max(1);
        if request.questions().len() <= size {
            call.next_request();
            return self.decide_request(call, request).await;
        }
        let mut answers = DecisionWeights::new();
        for questions in request.questions().chunks(size) {
            let part =
                DecisionRequest::new(request.model_id(), request.state(), questions.to_vec())?;
            call.next_request();
            answers.extend(self.decide_request(call, &part).await?.answers().clone());
        }
        Decision::from_weights(request, answers)
    }

    /// One HTTP request: `request` (at most `max_batch` questions) reserved, sent,
    /// retried and settled as one attempt loop of `call`.
    async fn decide_request(
        &self,
        call: &mut CallState,
        request: &DecisionRequest,
    ) -> Result<Decision> {
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
        call.run(cost, self.transport.accounting(), send, |_| {
            Outcome::Success
        })
        .await
        .map(|(d, _)| d)
    }
}
