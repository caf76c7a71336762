//! The fake's transports: chat answers as scripted (streamed as deltas), deterministic
//! embeddings, scripted decisions; each request counted as a call. With them, the
//! `Provider` impl that builds them from the script.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::stream;
use tollgate::provider::{
    ChatTransport, DecisionReply, DecisionTransport, DefaultEstimator, EmbeddingsReply,
    EmbeddingsTransport, Provider, ProviderContext, ProviderTransports, Signals, TokenEstimator,
};
use tollgate::provider::{
    DecisionRequest, EmbeddingPurpose, Error, LlmRequest, LlmResponse, ModelEntry, ResponseStream,
    Result, StreamEvent, Usage,
};

use crate::KEY;
use crate::options::FakeOptions;
use crate::provider::FakeProvider;
use crate::script::{self, Step};

#[tollgate::provider::async_trait]
impl Provider for FakeProvider {
    fn key(&self) -> &'static str {
        KEY
    }

    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        self.load_options(context.catalog())?;
        Ok(Arc::new(FakeTransports {
            provider: self.clone(),
            embedding_width: context.catalog().embedding_width(),
        }))
    }
}

#[derive(Debug)]
struct FakeTransports {
    provider: FakeProvider,
    embedding_width: Option<u64>,
}

impl ProviderTransports for FakeTransports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(FakeChat {
            provider: self.provider.clone(),
            model: model.clone(),
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let width = model
            .embedding
            .native_width
            .or(self.embedding_width)
            .unwrap_or(16);
        Ok(Arc::new(FakeEmbeddings {
            provider: self.provider.clone(),
            model: model.clone(),
            native_width: width,
            max_batch: FakeOptions::from_model(model)?.max_batch,
        }))
    }

    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        Ok(Arc::new(FakeDecision {
            provider: self.provider.clone(),
            model: model.clone(),
            max_batch: FakeOptions::from_model(model)?.max_batch,
        }))
    }
}

/// The fake chat transport for one model.
#[derive(Debug)]
struct FakeChat {
    provider: FakeProvider,
    model: ModelEntry,
}

impl FakeChat {
    async fn answer(
        &self,
        request: &LlmRequest,
        signals: &Signals,
    ) -> Result<(LlmResponse, Option<usize>)> {
        match self
            .provider
            .next_step(&self.model, request, signals)
            .await?
        {
            Step::Fault(fault) => {
                let reply = fault.into_outcome(&self.model, request)?;
                Ok((reply.into_response(&self.model, request)?, None))
            }
            Step::Reply(reply) => {
                let interrupt = reply.interrupt_after();
                Ok((reply.into_response(&self.model, request)?, interrupt))
            }
            Step::Replayed(response) => Ok((response, None)),
        }
    }
}

#[tollgate::provider::async_trait]
impl ChatTransport for FakeChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        match self.answer(request, signals).await? {
            (_, Some(_)) => Err(script::INTERRUPTION.into()),
            (response, None) => Ok(response),
        }
    }

    fn estimate_input_tokens(&self, request: &LlmRequest) -> u64 {
        *self
            .provider
            .lock()
            .estimates
            .entry(self.model.id.clone())
            .or_default() += 1;
        DefaultEstimator.estimate_request(request)
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let (response, interrupt) = self.answer(request, signals).await?;
        // Input usage first, as providers report it when the answer starts.
        let started = Usage {
            output_tokens: 0,
            ..response.usage()
        };
        let mut deltas: Vec<Result<StreamEvent>> =
            script::deltas(&response).into_iter().map(Ok).collect();
        if let Some(after) = interrupt {
            deltas.truncate(after);
        }
        let mut events = vec![Ok(StreamEvent::Usage(started))];
        events.extend(deltas);
        if interrupt.is_some() {
            events.push(Err(script::INTERRUPTION.into()));
        } else {
            events.push(Ok(StreamEvent::Usage(response.usage())));
            events.push(Ok(StreamEvent::Stop(response.stop_reason())));
            events.push(Ok(StreamEvent::Completed(response)));
        }
        Ok(ResponseStream::new(stream::iter(events)))
    }
}

/// Deterministic fake embeddings: the same text and purpose always give the same vector.
/// Each `embed` call is one request (counted by [`FakeProvider::calls`]).
#[derive(Debug)]
struct FakeEmbeddings {
    provider: FakeProvider,
    model: ModelEntry,
    native_width: u64,
    max_batch: usize,
}

#[tollgate::provider::async_trait]
impl EmbeddingsTransport for FakeEmbeddings {
    async fn embed(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply> {
        if let Some(fault) = self.provider.count_request(&self.model, signals) {
            return Err(fault.into_error(&self.model));
        }
        let width = dimensions.unwrap_or(self.native_width);
        Ok(EmbeddingsReply {
            vectors: texts
                .iter()
                .map(|t| script::pseudo_vector(t, purpose, width))
                .collect(),
            usage: Usage {
                input_tokens: self.estimate_input_tokens(texts),
                ..Usage::default()
            },
        })
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }
}

/// Scripted decisions: each request (after the pipeline's split by `max_batch`) takes
/// the next queued weights, of which it reads its own questions.
#[derive(Debug)]
struct FakeDecision {
    provider: FakeProvider,
    model: ModelEntry,
    max_batch: usize,
}

#[tollgate::provider::async_trait]
impl DecisionTransport for FakeDecision {
    async fn decide(&self, request: &DecisionRequest, signals: &Signals) -> Result<DecisionReply> {
        if let Some(fault) = self.provider.count_request(&self.model, signals) {
            return Err(fault.into_error(&self.model));
        }
        let weights = self
            .provider
            .lock()
            .decisions
            .get_mut(&self.model.id)
            .and_then(VecDeque::pop_front);
        match weights {
            Some(w) => Ok(DecisionReply {
                decision: tollgate::provider::Decision::from_weights(request, w)?,
                usage: Usage {
                    input_tokens: self.estimate_input_tokens(request),
                    ..Usage::default()
                },
            }),
            None => Err(Error::UnmatchedRequest {
                model_id: self.model.id.clone(),
                cache_key: "(decision requests have no cache key)".into(),
            }),
        }
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }
}
