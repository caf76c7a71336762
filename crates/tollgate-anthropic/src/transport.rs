//! The provider and its chat transport: encode, send once, decode.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};
use tollgate::limit::{AccountingRule, CacheReadAccounting, OutputAccounting};
use tollgate::pipeline::{ChatTransport, Signals, parse_retry_after};
use tollgate::provider::{CredentialRef, Provider, ProviderContext, ProviderTransports};
use tollgate::sse::SseStream;
use tollgate::{
    Dimension, Error, LlmRequest, LlmResponse, ModelEntry, ProviderError, ResponseStream, Result,
    StreamEvent,
};

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

    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        // No proxy from the environment (tollgate reads none) and no retries: the
        // pipeline is the one place that retries.
        let http = reqwest::Client::builder()
            .connect_timeout(context.connect_timeout())
            .no_proxy()
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| {
                Error::Catalog(tollgate::catalog::CatalogError::InvalidSection {
                    field: "providers.anthropic-direct".into(),
                    reason: format!("the HTTP client could not be made: {e}"),
                })
            })?;
        Ok(Arc::new(AnthropicClients {
            http,
            context: context.clone(),
        }))
    }
}

#[derive(Debug)]
struct AnthropicClients {
    http: reqwest::Client,
    context: ProviderContext,
}

impl ProviderTransports for AnthropicClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        let credential = self.context.credential_ref(model).ok_or_else(|| {
            Error::Catalog(tollgate::catalog::CatalogError::MissingCredential {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
            })
        })?;
        Ok(Arc::new(AnthropicChat {
            http: self.http.clone(),
            model: model.clone(),
            options: AnthropicOptions::from_model(model)?,
            credential,
            connect_timeout: self.context.connect_timeout(),
        }))
    }
}

/// The chat transport of one `anthropic-direct` model. Holds the credential's id, never
/// the key: the key is fetched from the store for each request.
#[derive(Debug)]
pub struct AnthropicChat {
    http: reqwest::Client,
    model: ModelEntry,
    options: AnthropicOptions,
    credential: CredentialRef,
    connect_timeout: Duration,
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Passes the answer's rate-limit headers and retry advice to the pipeline: each limit
/// (`anthropic-ratelimit-*-limit`), what is left of it (`anthropic-ratelimit-*-remaining`)
/// and when it is full again (`anthropic-ratelimit-*-reset`, RFC 3339).
fn read_signals(headers: &HeaderMap, signals: &Signals) {
    let now = tollgate::clock::wall_now();
    for (prefix, dimension) in [
        ("anthropic-ratelimit-requests", Dimension::Requests),
        ("anthropic-ratelimit-tokens", Dimension::Tokens),
        ("anthropic-ratelimit-input-tokens", Dimension::InputTokens),
        ("anthropic-ratelimit-output-tokens", Dimension::OutputTokens),
    ] {
        if let Some(n) =
            header(headers, &format!("{prefix}-limit")).and_then(|v| v.trim().parse::<u64>().ok())
        {
            signals.limit(dimension, n);
        }
        if let Some(n) = header(headers, &format!("{prefix}-remaining"))
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            signals.remaining(dimension, n);
        }
        if let Some(at) = header(headers, &format!("{prefix}-reset"))
            .and_then(|v| humantime::parse_rfc3339_weak(v.trim()).ok())
        {
            signals.reset_in(dimension, at.duration_since(now).unwrap_or(Duration::ZERO));
        }
    }
    match header(headers, "x-should-retry").map(str::trim) {
        Some("true") => signals.should_retry(true),
        Some("false") => signals.should_retry(false),
        _ => {}
    }
}

/// A failure to get an answer at all (connect, send, or read the body).
fn transport_error(error: &reqwest::Error, connect_timeout: Duration) -> Error {
    if error.is_timeout() {
        let after = error.is_connect().then_some(connect_timeout);
        return ProviderError::Timeout { after }.into();
    }
    // No answer from the server (refused, reset, cut): as a bad gateway, so it is retried.
    ProviderError::server(502).into()
}

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

    /// Sends `body` once; an error answer becomes its typed error.
    async fn post(
        &self,
        body: &serde_json::Value,
        stream: bool,
        signals: &Signals,
    ) -> Result<reqwest::Response> {
        let secret = self.credential.secret().await?;
        let mut key =
            HeaderValue::from_str(secret.expose_secret()).map_err(|_| Error::InvalidRequest {
                field: "credential".into(),
                reason: format!(
                    "`{}` holds characters an HTTP header cannot carry; store the API key alone",
                    self.credential.id()
                ),
            })?;
        key.set_sensitive(true);
        let mut request = self
            .http
            .post(format!("{}/v1/messages", self.options.base_url))
            .header("x-api-key", key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header(
                "accept",
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .json(body);
        if !self.options.beta.is_empty() {
            request = request.header("anthropic-beta", self.options.beta.join(","));
        }
        tracing::debug!(model = %self.model.name, stream, "anthropic: sending");
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(&e, self.connect_timeout))?;
        read_signals(response.headers(), signals);
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers();
        let retry_after = parse_retry_after(
            header(headers, "retry-after-ms"),
            header(headers, "retry-after"),
            tollgate::clock::wall_now(),
        );
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport_error(&e, self.connect_timeout))?;
        // Defence in depth: an error message never carries the key, even if echoed.
        let text = String::from_utf8_lossy(&bytes).replace(secret.expose_secret(), "[redacted]");
        Err(codec::classify_error(
            status.as_u16(),
            text.as_bytes(),
            retry_after,
        ))
    }
}

#[tollgate::async_trait]
impl ChatTransport for AnthropicChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        let response = self.post(&body, false, signals).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport_error(&e, self.connect_timeout))?;
        codec::decode_response(&bytes)
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        let response = self.post(&body, true, signals).await?;
        let connect_timeout = self.connect_timeout;
        let events = SseStream::new(response.bytes_stream());
        let state = StreamState {
            events: Box::pin(events),
            decoder: StreamDecoder::new(),
            ready: VecDeque::new(),
            done: false,
        };
        let stream = futures::stream::unfold(state, move |mut s| async move {
            loop {
                if let Some(event) = s.ready.pop_front() {
                    return Some((Ok(event), s));
                }
                if s.done {
                    return None;
                }
                let failure = match s.events.next().await {
                    Some(Ok(sse)) => match s.decoder.event(&sse.data) {
                        Ok(events) => {
                            s.ready.extend(events);
                            if s.decoder.is_finished() {
                                s.done = true;
                            }
                            continue;
                        }
                        Err(e) => e,
                    },
                    Some(Err(e)) => transport_error(&e, connect_timeout),
                    // Cut before `message_stop`: no answer, as a bad gateway (retried
                    // when nothing reached the reader yet).
                    None => ProviderError::server(502).into(),
                };
                s.done = true;
                return Some((Err(failure), s));
            }
        });
        Ok(ResponseStream::new(stream))
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

type EventStream = std::pin::Pin<
    Box<
        dyn futures::Stream<Item = std::result::Result<tollgate::sse::SseEvent, reqwest::Error>>
            + Send,
    >,
>;

struct StreamState {
    events: EventStream,
    decoder: StreamDecoder,
    ready: VecDeque<StreamEvent>,
    done: bool,
}
