//! The `openai` and `openai-compatible` providers: one [`OpenAiProvider`] type, two
//! registrations, and the transports it builds per model, all over the kit's endpoint
//! with OpenAI's rate-limit headers ([`OPENAI_RATE_LIMITS`]).

use std::sync::Arc;

use tollgate::provider::http::{Endpoint, HttpClient, OPENAI_RATE_LIMITS};
use tollgate::provider::{
    ChatTransport, DecisionTransport, EmbeddingsTransport, Provider, ProviderContext,
    ProviderTransports, TiktokenEstimator,
};
use tollgate::{Error, ModelEntry, Result};

use crate::chat::OpenAiChat;
use crate::codec;
use crate::decision::OpenAiDecision;
use crate::embeddings::OpenAiEmbeddings;
use crate::options::OpenAiOptions;

/// The `openai` or `openai-compatible` provider (one type, two registrations: they share
/// the codec and differ only in [`crate::Quirks`] and whether a credential is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenAiProvider {
    key: &'static str,
}

impl OpenAiProvider {
    /// The `openai` provider.
    pub const OPENAI: OpenAiProvider = OpenAiProvider { key: crate::KEY };
    /// The `openai-compatible` provider.
    pub const COMPATIBLE: OpenAiProvider = OpenAiProvider {
        key: crate::COMPATIBLE_KEY,
    };
}

#[tollgate::provider::async_trait]
impl Provider for OpenAiProvider {
    fn key(&self) -> &'static str {
        self.key
    }

    /// `openai` for both keys: the conventions name the API an instrumentation speaks
    /// when the server behind it is unknown (`server.address` tells the servers apart).
    fn conventions_name(&self) -> &'static str {
        "openai"
    }

    /// The model's `base_url`. `Models::build` asks this of every catalog model of the
    /// provider, before any call.
    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        OpenAiOptions::from_model(model).ok().map(|o| o.base_url)
    }

    /// Starts loading the model's tiktoken table on a thread of its own
    /// ([`TiktokenEncoding::warm_up`](tollgate::provider::TiktokenEncoding::warm_up)), so
    /// that the process's first call does not pay for the load (about 150 ms of CPU in a
    /// release build, 0.5–2 s in a debug one on a busy machine); build does not wait for
    /// it. `openai-compatible` loads nothing.
    fn prepare(&self, model: &ModelEntry) {
        if OpenAiOptions::from_model(model).is_ok_and(|o| o.quirks.tiktoken) {
            TiktokenEstimator::for_model(&model.name).warm_up();
        }
    }

    /// `openai-compatible` servers often take no key; a model may still name one.
    fn requires_credential(&self) -> bool {
        self.key == crate::KEY
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(OpenAiClients {
            key: self.key,
            http: HttpClient::new(context)?,
        }))
    }
}

#[derive(Debug)]
struct OpenAiClients {
    key: &'static str,
    http: HttpClient,
}

impl OpenAiClients {
    /// The model's options and its endpoint: its address, its key (required for
    /// `openai`), `OpenAI-Organization` and `OpenAI-Project`.
    fn endpoint(&self, model: &ModelEntry) -> Result<(Endpoint, OpenAiOptions)> {
        let options = OpenAiOptions::from_model(model)?;
        let mut endpoint = self
            .http
            .endpoint(model, &options.base_url, codec::read_error)
            .rate_limits(OPENAI_RATE_LIMITS);
        if self.key == crate::KEY {
            endpoint = endpoint.require_credential()?;
        }
        if let Some(org) = &options.organization {
            endpoint = endpoint.header("OpenAI-Organization", org);
        }
        if let Some(project) = &options.project {
            endpoint = endpoint.header("OpenAI-Project", project);
        }
        Ok((endpoint, options))
    }
}

impl ProviderTransports for OpenAiClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        Ok(Arc::new(OpenAiChat::new(endpoint, model, options)))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        Ok(Arc::new(OpenAiEmbeddings::new(endpoint, model, options)))
    }

    /// Refuses a model whose options say its server returns no logprobs.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let (endpoint, options) = self.endpoint(model)?;
        if !options.quirks.logprobs {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "decision (the decision client reads logprobs, and this model's \
                             catalog entry says its server returns none: `options.logprobs = false`)"
                    .into(),
            });
        }
        Ok(Arc::new(OpenAiDecision::new(endpoint, model, options)))
    }
}
