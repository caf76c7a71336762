//! The provider and its chat transport: encode, send once, decode. Everything else is
//! the kit's ([`tollgate::http`]).

use std::sync::Arc;

use tollgate::http::{Auth, Endpoint, Framing, HttpClient, RateLimitHeaders, Reset};
use tollgate::limit::{AccountingRule, CacheReadAccounting, OutputAccounting};
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::{Dimension, LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result};

use crate::codec::{self, ANTHROPIC_VERSION, EncodeOptions, StreamDecoder};
use crate::options::AnthropicOptions;

/// The `anthropic-direct` provider. Registered through `inventory`; built once per
/// `Models`, on the first call to one of its models.
#[derive(Debug, Default, Clone, Copy)]
pub struct AnthropicProvider;

#[tollgate::async_trait]
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

impl ProviderTransports for AnthropicClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let options = AnthropicOptions::from_model(model)?;
        let mut endpoint = self
            .http
            .endpoint(model, &options.base_url, codec::read_error)
            .require_credential()?
            .auth(Auth::Header("x-api-key"))
            .header("anthropic-version", ANTHROPIC_VERSION)
            .rate_limits(RATE_LIMITS);
        if !options.beta.is_empty() {
            endpoint = endpoint.header("anthropic-beta", options.beta.join(","));
        }
        Ok(Arc::new(AnthropicChat {
            endpoint,
            model: model.clone(),
            options,
        }))
    }
}

/// The chat transport of one `anthropic-direct` model. Holds the credential's id, never
/// the key: the key is fetched from the store for each request.
#[derive(Debug)]
pub struct AnthropicChat {
    endpoint: Endpoint,
    model: ModelEntry,
    options: AnthropicOptions,
}

const MESSAGES_PATH: &str = "/v1/messages";

impl AnthropicChat {
    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
        codec::encode_request(
            request,
            &EncodeOptions {
                model: Some(self.model.name.clone()),
                max_tokens: self
                    .model
                    .output_limit(None)
                    .unwrap_or(codec::DEFAULT_MAX_TOKENS),
                stream,
                top_k: self.options.top_k,
                tool_choice: self.options.tool_choice.clone(),
            },
        )
    }
}

#[tollgate::async_trait]
impl ChatTransport for AnthropicChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        self.endpoint
            .post_decoded(MESSAGES_PATH, &body, signals, codec::decode_response)
            .await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        self.endpoint
            .stream(
                MESSAGES_PATH,
                &body,
                signals,
                Framing::Sse,
                StreamDecoder::new(),
            )
            .await
    }

    /// Anthropic counts output actually produced against output TPM, and cache reads do
    /// not count against input TPM.
    fn accounting(&self) -> AccountingRule {
        AccountingRule {
            output: OutputAccounting::Actual,
            cache_reads: CacheReadAccounting::NotCounted,
        }
    }
}
