//! The providers and their chat transport: encode, send once, decode. The HTTP helper
//! here ([`Endpoint`]) is shared by the embeddings and decision transports.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};
use tollgate::catalog::CatalogError;
use tollgate::pipeline::{
    ChatTransport, DecisionTransport, EmbeddingsTransport, Signals, TiktokenEstimator,
    TokenEstimator, parse_retry_after,
};
use tollgate::provider::{CredentialRef, Provider, ProviderContext, ProviderTransports};
use tollgate::sse::SseStream;
use tollgate::{
    Dimension, Error, LlmRequest, LlmResponse, ModelEntry, ProviderError, ResponseStream, Result,
    StreamEvent,
};

use crate::codec::{self, EncodeOptions, StreamDecoder};
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

#[tollgate::async_trait]
impl Provider for OpenAiProvider {
    fn key(&self) -> &'static str {
        self.key
    }

    /// `openai-compatible` servers often take no key; a model may still name one.
    fn requires_credential(&self) -> bool {
        self.key == crate::KEY
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
                Error::Catalog(CatalogError::InvalidSection {
                    field: format!("providers.{}", self.key),
                    reason: format!("the HTTP client could not be made: {e}"),
                })
            })?;
        Ok(Arc::new(OpenAiClients {
            key: self.key,
            http,
            context: context.clone(),
        }))
    }
}

#[derive(Debug)]
struct OpenAiClients {
    key: &'static str,
    http: reqwest::Client,
    context: ProviderContext,
}

impl OpenAiClients {
    fn endpoint(&self, model: &ModelEntry) -> Result<Endpoint> {
        let credential = self.context.credential_ref(model);
        if credential.is_none() && self.key == crate::KEY {
            return Err(Error::Catalog(CatalogError::MissingCredential {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
            }));
        }
        Ok(Endpoint {
            http: self.http.clone(),
            model: model.clone(),
            options: OpenAiOptions::from_model(model)?,
            credential,
            connect_timeout: self.context.connect_timeout(),
        })
    }
}

impl ProviderTransports for OpenAiClients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(OpenAiChat {
            endpoint: self.endpoint(model)?,
        }))
    }

    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Ok(Arc::new(OpenAiEmbeddings::new(self.endpoint(model)?)))
    }

    /// Refuses a model whose options say its server returns no logprobs.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        let endpoint = self.endpoint(model)?;
        if !endpoint.options.quirks.logprobs {
            return Err(Error::Unsupported {
                model_id: model.id.clone(),
                provider: model.provider.clone(),
                capability: "decision (the decision client reads logprobs, and this model's \
                             catalog entry says its server returns none: `options.logprobs = false`)"
                    .into(),
            });
        }
        Ok(Arc::new(OpenAiDecision::new(endpoint)))
    }
}

/// One model's address, options and credential handle; sends one request at a time.
/// Holds the credential's id, never the key: the key is fetched for each request.
#[derive(Debug)]
pub(crate) struct Endpoint {
    http: reqwest::Client,
    pub(crate) model: ModelEntry,
    pub(crate) options: OpenAiOptions,
    credential: Option<CredentialRef>,
    connect_timeout: Duration,
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Passes the answer's rate-limit headers and retry advice to the pipeline: each limit
/// (`x-ratelimit-limit-{requests,tokens}`), what is left of it
/// (`x-ratelimit-remaining-{requests,tokens}`) and when it is full again
/// (`x-ratelimit-reset-{requests,tokens}`, Go durations such as `6m0s`).
fn read_signals(headers: &HeaderMap, signals: &Signals) {
    for (suffix, dimension) in [
        ("requests", Dimension::Requests),
        ("tokens", Dimension::Tokens),
    ] {
        if let Some(n) = header(headers, &format!("x-ratelimit-limit-{suffix}"))
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            signals.limit(dimension, n);
        }
        if let Some(n) = header(headers, &format!("x-ratelimit-remaining-{suffix}"))
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            signals.remaining(dimension, n);
        }
        if let Some(d) = header(headers, &format!("x-ratelimit-reset-{suffix}"))
            .and_then(codec::parse_go_duration)
        {
            signals.reset_in(dimension, d);
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

impl Endpoint {
    /// The output limit to send when the request has none.
    pub(crate) fn default_output_limit(&self) -> Option<u64> {
        self.model.output_limit(None)
    }

    /// POSTs `body` to `{base_url}{path}` once; an error answer becomes its typed error.
    pub(crate) async fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
        stream: bool,
        signals: &Signals,
    ) -> Result<reqwest::Response> {
        let secret = match &self.credential {
            Some(c) => Some(c.secret().await?),
            None => None,
        };
        let mut request = self
            .http
            .post(format!("{}{path}", self.options.base_url))
            .header(
                "accept",
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .json(body);
        if let (Some(secret), Some(credential)) = (&secret, &self.credential) {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", secret.expose_secret()))
                .map_err(|_| Error::InvalidRequest {
                    field: "credential".into(),
                    reason: format!(
                        "`{}` holds characters an HTTP header cannot carry; store the API key alone",
                        credential.id()
                    ),
                })?;
            value.set_sensitive(true);
            request = request.header("authorization", value);
        }
        if let Some(org) = &self.options.organization {
            request = request.header("OpenAI-Organization", org);
        }
        if let Some(project) = &self.options.project {
            request = request.header("OpenAI-Project", project);
        }
        tracing::debug!(provider = %self.model.provider, model = %self.model.name, path, stream, "openai: sending");
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
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        // Defence in depth: an error message never carries the key, even if echoed.
        if let Some(secret) = &secret
            && !secret.expose_secret().is_empty()
        {
            text = text.replace(secret.expose_secret(), "[redacted]");
        }
        Err(codec::classify_error(
            status.as_u16(),
            text.as_bytes(),
            retry_after,
        ))
    }

    /// POSTs `body` and reads the whole answer.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
    ) -> Result<Vec<u8>> {
        let response = self.post(path, body, false, signals).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport_error(&e, self.connect_timeout))?;
        Ok(bytes.to_vec())
    }

    /// Input tokens of `text`: tiktoken for OpenAI's models, tollgate's conservative
    /// estimate for other servers' (whose tokenizers are unknown).
    pub(crate) fn estimate_text(&self, text: &str) -> u64 {
        if self.options.quirks.tiktoken {
            TiktokenEstimator::for_model(&self.model.name).estimate_text(text)
        } else {
            tollgate::pipeline::DefaultEstimator.estimate_text(text)
        }
    }
}

/// The chat transport of one `openai` or `openai-compatible` model.
#[derive(Debug)]
pub struct OpenAiChat {
    endpoint: Endpoint,
}

impl OpenAiChat {
    fn encode(&self, request: &LlmRequest, stream: bool) -> Result<serde_json::Value> {
        let quirks = self.endpoint.options.quirks;
        codec::encode_request(
            request,
            &EncodeOptions {
                model: self.endpoint.model.name.clone(),
                max_tokens: self.endpoint.default_output_limit(),
                output_limit_field: quirks.output_limit_field,
                stream,
                stream_usage: quirks.stream_usage,
                tool_choice: self.endpoint.options.tool_choice.clone(),
            },
        )
    }
}

const CHAT_PATH: &str = "/v1/chat/completions";

#[tollgate::async_trait]
impl ChatTransport for OpenAiChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = self.encode(request, false)?;
        let bytes = self.endpoint.post_json(CHAT_PATH, &body, signals).await?;
        codec::decode_response(&bytes)
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = self.encode(request, true)?;
        let response = self.endpoint.post(CHAT_PATH, &body, true, signals).await?;
        let connect_timeout = self.endpoint.connect_timeout;
        let done_required = self.endpoint.options.quirks.done_required;
        let state = StreamState {
            events: Box::pin(SseStream::new(response.bytes_stream())),
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
                let result = match s.events.next().await {
                    Some(Ok(sse)) => s.decoder.event(&sse.data),
                    Some(Err(e)) => Err(transport_error(&e, connect_timeout)),
                    None => s.decoder.end(done_required),
                };
                match result {
                    Ok(events) => {
                        s.ready.extend(events);
                        if s.decoder.is_finished() {
                            s.done = true;
                        }
                    }
                    Err(failure) => {
                        s.done = true;
                        return Some((Err(failure), s));
                    }
                }
            }
        });
        Ok(ResponseStream::new(stream))
    }

    /// Tiktoken's exact count for OpenAI's models (plus tollgate's per-message and
    /// per-request overheads); the conservative default for other servers.
    fn estimate_input_tokens(&self, request: &LlmRequest) -> u64 {
        if self.endpoint.options.quirks.tiktoken {
            TiktokenEstimator::for_model(&self.endpoint.model.name).estimate_request(request)
        } else {
            tollgate::pipeline::DefaultEstimator.estimate_request(request)
        }
    }

    // `accounting` is the default: OpenAI counts the reserved output limit against
    // output TPM at request time, so output settles at the reservation.
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
