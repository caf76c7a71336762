//! The `anthropic-vertex` provider and the chat transport it builds per model over the
//! kit's endpoint.

use std::sync::Arc;

use tollgate::provider::http::HttpClient;
use tollgate::provider::{ChatTransport, Provider, ProviderContext, ProviderTransports};
use tollgate::provider::{ModelEntry, Result};

use super::chat::AnthropicVertexChat;
use super::errors::read_error;
use super::options::{self, AnthropicVertexOptions};
use crate::auth::{ModelTokens, TokenSource};

/// The `anthropic-vertex` provider: Claude on Vertex AI, with Google's credentials (a
/// service-account key from the credential store when the model names one, else
/// Application Default Credentials) or a given token source.
#[derive(Debug, Clone)]
pub struct AnthropicVertexProvider {
    tokens: Option<Arc<dyn TokenSource>>,
}

impl AnthropicVertexProvider {
    /// With Google's credentials, as `vertex` has them ([`crate::auth`]).
    pub const GOOGLE: AnthropicVertexProvider = AnthropicVertexProvider { tokens: None };

    /// With access tokens from `tokens` (an application's own token broker, or a
    /// test's); give it to `ModelsBuilder::provider`.
    pub fn with_tokens(tokens: Arc<dyn TokenSource>) -> Self {
        AnthropicVertexProvider {
            tokens: Some(tokens),
        }
    }
}

#[tollgate::provider::async_trait]
impl Provider for AnthropicVertexProvider {
    fn key(&self) -> &'static str {
        crate::ANTHROPIC_VERTEX_KEY
    }

    fn conventions_name(&self) -> &'static str {
        "gcp.vertex_ai"
    }

    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        AnthropicVertexOptions::from_model(model)
            .ok()
            .map(|o| o.base_url)
    }

    /// A model without a credential uses Application Default Credentials.
    fn requires_credential(&self) -> bool {
        false
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        let tokens = match &self.tokens {
            Some(tokens) => tokens.clone(),
            None => crate::auth::google_tokens(context)?,
        };
        Ok(Arc::new(ClaudeClients {
            http: HttpClient::new(context)?,
            tokens,
        }))
    }
}

#[derive(Debug)]
struct ClaudeClients {
    http: HttpClient,
    tokens: Arc<dyn TokenSource>,
}

impl ProviderTransports for ClaudeClients {
    /// The model's endpoint: a bearer token from the token source for each request,
    /// `x-goog-user-project` when the options name a quota project, `anthropic-beta`
    /// when they name betas; no rate-limit headers (Vertex sends none for Claude).
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let options = AnthropicVertexOptions::from_model(model)?;
        let name = options::model_name(model)?;
        let source = ModelTokens::new(self.tokens.clone(), model);
        let mut endpoint = self
            .http
            .endpoint(model, &options.base_url, read_error)
            .secret_source(Arc::new(source));
        if let Some(project) = &options.place.quota_project {
            endpoint = endpoint.header("x-goog-user-project", project.clone());
        }
        if !options.beta.is_empty() {
            endpoint = endpoint.header("anthropic-beta", options.beta.join(","));
        }
        Ok(Arc::new(AnthropicVertexChat::new(
            endpoint, model, name, options,
        )))
    }
}
