//! The `azure-openai` provider: the OpenAI transports of `tollgate-openai` on Azure's
//! deployment URLs, with the `api-key` header or an Entra ID token.

use std::sync::Arc;

use tollgate::provider::http::{Auth, Endpoint, HttpClient};
use tollgate::provider::{
    ChatTransport, DecisionTransport, EmbeddingsTransport, Provider, ProviderContext,
    ProviderTransports, TiktokenEstimator,
};
use tollgate::provider::{Error, ModelEntry, Result};
use tollgate_openai::{OpenAiChat, OpenAiDecision, OpenAiEmbeddings};

use crate::entra::{ClientSecretTokens, ModelTokens, TokenSource};
use crate::options::{AuthMode, AzureOptions};
use crate::{KEY, PRESET};

/// The `azure-openai` provider. [`AzureProvider::new`] (registered by this crate)
/// mints Entra ID tokens from service-principal records in the credential store;
/// [`AzureProvider::with_tokens`] takes the application's own token source.
#[derive(Debug, Clone, Default)]
pub struct AzureProvider {
    tokens: Option<Arc<dyn TokenSource>>,
}

impl AzureProvider {
    /// The provider this crate registers.
    pub const fn new() -> Self {
        AzureProvider { tokens: None }
    }

    /// The provider whose `auth = "entra"` models take their tokens from `tokens`
    /// (managed identity, the developer CLI or another broker of the application's):
    /// give it to `ModelsBuilder::provider` in place of the registered one.
    pub fn with_tokens(tokens: Arc<dyn TokenSource>) -> Self {
        AzureProvider {
            tokens: Some(tokens),
        }
    }
}

#[tollgate::provider::async_trait]
impl Provider for AzureProvider {
    fn key(&self) -> &'static str {
        KEY
    }

    /// `azure.ai.openai`, OpenTelemetry's name for Azure OpenAI.
    fn conventions_name(&self) -> &'static str {
        PRESET.conventions_name
    }

    /// The model's `endpoint`.
    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        AzureOptions::from_model(model).ok().map(|o| o.endpoint)
    }

    /// Starts loading the tiktoken table of a model deployed under its own name.
    fn prepare(&self, model: &ModelEntry) {
        if let Ok(options) = AzureOptions::from_model(model)
            && options.deployment == model.name
        {
            TiktokenEstimator::for_model(&model.name).warm_up();
        }
    }

    /// Checked per model: an `api-key` model needs one, an `entra` model's need depends
    /// on its token source.
    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        let tokens: Arc<dyn TokenSource> = match &self.tokens {
            Some(tokens) => tokens.clone(),
            None => Arc::new(ClientSecretTokens::new(context)?),
        };
        Ok(Arc::new(AzureClients {
            http: HttpClient::new(context)?,
            tokens,
        }))
    }
}

#[derive(Debug)]
struct AzureClients {
    http: HttpClient,
    tokens: Arc<dyn TokenSource>,
}

impl AzureClients {
    /// The model's options, its endpoint (address, credential, rate-limit headers), and
    /// the entry the OpenAI transports get: named after the deployment (the body's
    /// `model`, which the v1 API and the Responses API read as the deployment).
    fn endpoint(&self, model: &ModelEntry) -> Result<(Endpoint, AzureOptions, ModelEntry)> {
        let mut options = AzureOptions::from_model(model)?;
        let endpoint = self
            .http
            .endpoint(model, &options.endpoint, PRESET.dialect.error)
            .rate_limits(PRESET.rate_limits);
        let endpoint = match options.auth {
            AuthMode::ApiKey => endpoint
                .auth(Auth::Header("api-key"))
                .require_credential()?,
            AuthMode::Entra => endpoint.secret_source(Arc::new(ModelTokens {
                tokens: self.tokens.clone(),
                credential: model.credential.clone(),
                authority_host: options.authority_host.clone(),
                id: model
                    .credential
                    .clone()
                    .unwrap_or_else(|| "the provider's token source".to_owned()),
            })),
        };
        let mut deployed = model.clone();
        if options.deployment != model.name {
            // The deployment's name says nothing of its tokenizer.
            options.openai.quirks.tiktoken = false;
            deployed.name = options.deployment.clone();
        }
        Ok((endpoint, options, deployed))
    }
}

impl ProviderTransports for AzureClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let (endpoint, options, deployed) = self.endpoint(model)?;
        let (chat, responses) = (options.chat_path(), options.responses_path());
        Ok(Arc::new(
            OpenAiChat::new(endpoint, &deployed, options.openai, &PRESET).at(chat, responses),
        ))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        let (endpoint, options, deployed) = self.endpoint(model)?;
        let path = options.embeddings_path();
        Ok(Arc::new(OpenAiEmbeddings::new(
            endpoint,
            &deployed,
            options.openai,
            path,
        )))
    }

    /// Over Chat Completions' logprobs; refused where the options say the deployment
    /// returns none.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let (endpoint, options, deployed) = self.endpoint(model)?;
        if !options.openai.quirks.logprobs {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "decision (it reads logprobs, and this model's catalog entry says \
                             its deployment returns none: `options.logprobs = false`)"
                    .into(),
            });
        }
        let path = options.chat_path();
        Ok(Arc::new(OpenAiDecision::new(
            endpoint,
            &deployed,
            options.openai,
            path,
            PRESET.dialect,
        )))
    }
}
