//! The `anthropic-direct` provider, its rate-limit header table ([`RATE_LIMITS`]), and
//! the transports it builds per model over the kit's endpoint: chat, and the Message
//! Batches API for the same model.

use std::sync::Arc;

use tollgate::provider::batch::BatchTransport;
use tollgate::provider::http::{Auth, HttpClient, RateLimitHeaders, Reset};
use tollgate::provider::{ChatTransport, Provider, ProviderContext, ProviderTransports};
use tollgate::provider::{Dimension, ModelEntry, Result};

use crate::batch::AnthropicBatch;
use crate::chat::AnthropicChat;
use crate::codec::{self, ANTHROPIC_VERSION};
use crate::options::AnthropicOptions;

/// The `anthropic-direct` provider. Registered through `inventory`; built once per
/// `Models`, on the first call to one of its models.
#[derive(Debug, Default, Clone, Copy)]
pub struct AnthropicProvider;

#[tollgate::provider::async_trait]
impl Provider for AnthropicProvider {
    fn key(&self) -> &'static str {
        crate::KEY
    }

    fn conventions_name(&self) -> &'static str {
        "anthropic"
    }

    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        AnthropicOptions::from_model(model).ok().map(|o| o.base_url)
    }

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(AnthropicClients {
            http: HttpClient::new(context)?,
        }))
    }
}

#[derive(Debug)]
struct AnthropicClients {
    http: HttpClient,
}

/// Each limit (`anthropic-ratelimit-*-limit`), what is left of it (`*-remaining`) and
/// when it is full again (`*-reset`, RFC 3339).
const RATE_LIMITS: &[RateLimitHeaders] = &[
    rate_limit(
        Dimension::Requests,
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    ),
    rate_limit(
        Dimension::Tokens,
        "anthropic-ratelimit-tokens-limit",
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
    ),
    rate_limit(
        Dimension::InputTokens,
        "anthropic-ratelimit-input-tokens-limit",
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
    ),
    rate_limit(
        Dimension::OutputTokens,
        "anthropic-ratelimit-output-tokens-limit",
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
    ),
];

const fn rate_limit(
    dimension: Dimension,
    limit: &'static str,
    remaining: &'static str,
    reset: &'static str,
) -> RateLimitHeaders {
    RateLimitHeaders {
        dimension,
        limit,
        remaining,
        reset,
        reset_format: Reset::Rfc3339,
    }
}

/// The fixed headers of every request: the API version, and the model's beta flags.
fn fixed_headers(options: &AnthropicOptions) -> Vec<(&'static str, String)> {
    let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
    if !options.beta.is_empty() {
        headers.push(("anthropic-beta", options.beta.join(",")));
    }
    headers
}

impl AnthropicClients {
    /// The live chat transport of `model`, which the batch API shares (its endpoint, its
    /// encoder).
    fn live(&self, model: &ModelEntry) -> Result<AnthropicChat> {
        let options = AnthropicOptions::from_model(model)?;
        let mut endpoint = self
            .http
            .endpoint(model, &options.base_url, codec::read_error)
            .require_credential()?
            .auth(Auth::Header("x-api-key"))
            .rate_limits(RATE_LIMITS);
        for (name, value) in fixed_headers(&options) {
            endpoint = endpoint.header(name, value);
        }
        Ok(AnthropicChat::new(endpoint, model, options))
    }
}

impl ProviderTransports for AnthropicClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(self.live(model)?))
    }

    /// Anthropic's Message Batches API for `model` (this crate is the first-party API
    /// alone: Claude on Bedrock and Vertex is other crates'), over the live transport's
    /// endpoint, key, headers and encoder.
    fn batch(&self, model: &ModelEntry) -> Result<Arc<dyn BatchTransport>> {
        Ok(Arc::new(AnthropicBatch::new(self.live(model)?, model)))
    }
}
