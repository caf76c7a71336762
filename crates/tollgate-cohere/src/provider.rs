//! The `cohere` provider and the transports it builds per model, over the kit's endpoint
//! with Cohere's trial rate-limit headers ([`COHERE_RATE_LIMITS`]).

use std::sync::Arc;

use tollgate::provider::http::{Endpoint, HttpClient, RateLimitHeaders, Reset};
use tollgate::provider::{
    ChatTransport, Dimension, EmbeddingsTransport, Provider, ProviderContext, ProviderTransports,
};
use tollgate::provider::{ModelEntry, Result};

use crate::chat::CohereChat;
use crate::codec;
use crate::embeddings::CohereEmbeddings;
use crate::options::CohereOptions;

/// The rate-limit headers Cohere sends. Its documentation names none; answers to a
/// trial key carry `x-trial-endpoint-call-limit` (the endpoint's calls a minute, 20 for
/// chat) and `x-trial-endpoint-call-remaining` (what is left of them), read as the
/// requests dimension. No reset is sent, and production keys' answers carry neither
/// (the catalog's `rpm` then rules alone). `x-endpoint-monthly-call-limit` (a trial
/// key's calls a month) is no per-minute limit and is not read.
pub const COHERE_RATE_LIMITS: &[RateLimitHeaders] = &[RateLimitHeaders {
    dimension: Dimension::Requests,
    limit: "x-trial-endpoint-call-limit",
    remaining: "x-trial-endpoint-call-remaining",
    reset: "",
    reset_format: Reset::Seconds,
}];

/// The `cohere` provider: chat and embeddings, a credential required.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CohereProvider;

#[tollgate::provider::async_trait]
impl Provider for CohereProvider {
    fn key(&self) -> &'static str {
        crate::KEY
    }

    /// The model's `base_url`. `Models::build` asks this of every catalog model of the
    /// provider, before any call.
    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        CohereOptions::from_model(model).ok().map(|o| o.base_url)
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(CohereClients {
            http: HttpClient::new(context)?,
        }))
    }
}

#[derive(Debug)]
struct CohereClients {
    http: HttpClient,
}

impl CohereClients {
    /// The model's options and its endpoint: its address and its key, sent as a bearer
    /// token (required).
    fn endpoint(&self, model: &ModelEntry) -> Result<(Endpoint, CohereOptions)> {
        let options = CohereOptions::from_model(model)?;
        let endpoint = self
            .http
            .endpoint(model, &options.base_url, codec::read_error)
            .rate_limits(COHERE_RATE_LIMITS)
            .require_credential()?;
        Ok((endpoint, options))
    }
}

impl ProviderTransports for CohereClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        Ok(Arc::new(CohereChat::new(endpoint, model, options)))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        Ok(Arc::new(CohereEmbeddings::new(endpoint, model, options)))
    }
}
