//! The send-once endpoint: one model's address, credential and fixed headers; sends a
//! JSON body once and turns an error answer into the one verdict.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::HeaderValue;

use super::headers::{RateLimitHeaders, read_signals, retry_after};
use super::stream::Framing;
use crate::catalog::{CatalogError, ModelEntry};
use crate::credentials::Secret;
use crate::error::{Error, ProviderError, ProviderRequestError, Result};
use crate::pipeline::Signals;
use crate::provider::{CredentialRef, ProviderContext};
use crate::stream::ResponseStream;
use crate::wire::{EventDecoder, WireError, decode_events, redact};

/// The most bytes of a success body read (an embeddings batch of 2,048 wide vectors is
/// tens of MB as JSON); a larger answer fails rather than filling memory.
pub const MAX_BODY_BYTES: usize = 256 << 20;

/// The most bytes of an error body read; the rest is dropped (messages are short).
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// How the API key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// `authorization: Bearer KEY`.
    Bearer,
    /// `NAME: KEY`, e.g. `x-api-key`.
    Header(&'static str),
}

/// Makes the secret an [`Endpoint`] sends, for a provider whose secret is not the stored
/// credential itself: e.g. an OAuth access token minted (and cached, and refreshed) from
/// a service-account key in the credential store. Asked once per request; the secret is
/// sent as [`Auth`] says, marked sensitive, and redacted from error messages like a key.
#[async_trait::async_trait]
pub trait SecretSource: Send + Sync + fmt::Debug {
    /// The secret to send with the next request.
    async fn secret(&self) -> Result<Secret>;

    /// What to call it in an error (a credential id, never the secret).
    fn id(&self) -> &str;
}

/// Reads an error answer's status and body into a [`WireError`] (the codec's part).
pub type ReadError = fn(status: u16, body: &[u8]) -> WireError;

/// One HTTP client per provider, made once in `Provider::build`: tollgate's connect
/// timeout, no proxy from the environment (tollgate reads none) and no retries (the
/// pipeline is the one place that retries).
#[derive(Debug, Clone)]
pub struct HttpClient {
    http: reqwest::Client,
    context: ProviderContext,
}

impl HttpClient {
    /// The client for the provider `context` builds.
    pub fn new(context: &ProviderContext) -> Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(context.connect_timeout())
            .no_proxy()
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| {
                Error::Catalog(CatalogError::InvalidSection {
                    field: format!("providers.{}", context.key()),
                    reason: format!("the HTTP client could not be made: {e}"),
                })
            })?;
        Ok(HttpClient {
            http,
            context: context.clone(),
        })
    }

    /// The endpoint of `model` at `base_url`, with the model's credential (if it names
    /// one) sent as a bearer token; `read_error` is the codec's error reader.
    pub fn endpoint(
        &self,
        model: &ModelEntry,
        base_url: impl Into<String>,
        read_error: ReadError,
    ) -> Endpoint {
        Endpoint {
            http: self.http.clone(),
            provider: model.provider.clone(),
            model_id: model.id.clone(),
            base_url: base_url.into(),
            credential: self.context.credential_ref(model),
            source: None,
            auth: Auth::Bearer,
            headers: Vec::new(),
            rate_limits: &[],
            read_error,
            connect_timeout: self.context.connect_timeout(),
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

/// One model's address, credential handle and fixed headers; sends one request at a
/// time. Holds the credential's id, never the key: the key is fetched for each request.
#[derive(Debug, Clone)]
pub struct Endpoint {
    http: reqwest::Client,
    provider: String,
    model_id: String,
    base_url: String,
    credential: Option<CredentialRef>,
    source: Option<Arc<dyn SecretSource>>,
    auth: Auth,
    headers: Vec<(&'static str, String)>,
    rate_limits: &'static [RateLimitHeaders],
    read_error: ReadError,
    connect_timeout: Duration,
    max_body_bytes: usize,
}

impl Endpoint {
    /// Reads at most `bytes` of a success body (default [`MAX_BODY_BYTES`]).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sends the key as `auth` (default [`Auth::Bearer`]).
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Sends `name: value` with every request.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Reads these rate-limit headers from every answer.
    pub fn rate_limits(mut self, rate_limits: &'static [RateLimitHeaders]) -> Self {
        self.rate_limits = rate_limits;
        self
    }

    /// Sends the secret `source` makes instead of the model's stored credential.
    pub fn secret_source(mut self, source: Arc<dyn SecretSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Fails unless the model names a credential.
    pub fn require_credential(self) -> Result<Self> {
        match self.credential {
            Some(_) => Ok(self),
            None => Err(Error::Catalog(CatalogError::MissingCredential {
                model_id: self.model_id,
                provider: self.provider,
            })),
        }
    }

    /// POSTs `body` to `{base_url}{path}` once, asking for `accept`; reads the answer's
    /// signals; an error answer becomes its verdict, with the key redacted from it.
    pub async fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
        accept: &str,
        signals: &Signals,
    ) -> Result<reqwest::Response> {
        let (secret, id) = match (&self.source, &self.credential) {
            (Some(s), _) => (Some(s.secret().await?), s.id()),
            (None, Some(c)) => (Some(c.secret().await?), c.id()),
            (None, None) => (None, ""),
        };
        let mut request = self
            .http
            .post(format!("{}{path}", self.base_url))
            .header("accept", accept)
            .json(body);
        if let Some(secret) = &secret {
            let (name, value) = match self.auth {
                Auth::Bearer => (
                    "authorization",
                    format!("Bearer {}", secret.expose_secret()),
                ),
                Auth::Header(name) => (name, secret.expose_secret().to_owned()),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| Error::InvalidRequest {
                field: "credential".into(),
                reason: format!(
                    "`{id}` holds characters an HTTP header cannot carry; store the API key alone"
                ),
            })?;
            value.set_sensitive(true);
            request = request.header(name, value);
        }
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        tracing::debug!(provider = %self.provider, model = %self.model_id, path, "sending");
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        read_signals(response.headers(), self.rate_limits, signals);
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let bytes = self.read(response, MAX_ERROR_BODY_BYTES, false).await?;
        // Defence in depth: an error message never carries the key, even if echoed.
        let text = redact(
            &String::from_utf8_lossy(&bytes),
            secret.as_ref().map(|s| s.expose_secret()),
        );
        let mut wire = (self.read_error)(status, text.as_bytes());
        wire.retry_after = wire.retry_after.or(retry_after);
        Err(wire.verdict())
    }

    /// POSTs `body` and reads the whole answer (at most [`Endpoint::max_body_bytes`]).
    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
    ) -> Result<Vec<u8>> {
        let response = self.post(path, body, "application/json", signals).await?;
        self.read(response, self.max_body_bytes, true).await
    }

    /// POSTs `body` and pumps the answer's events (`framing`) through `decoder`.
    pub async fn stream<D: EventDecoder>(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
        framing: Framing,
        decoder: D,
    ) -> Result<ResponseStream> {
        let response = self.post(path, body, framing.accept(), signals).await?;
        let connect_timeout = self.connect_timeout;
        let bytes = response
            .bytes_stream()
            .map(move |chunk| chunk.map_err(|e| transport_error(&e, connect_timeout)));
        Ok(decode_events(framing.events(bytes), decoder))
    }

    /// Reads the body, up to `cap` bytes: beyond it, fails when `strict`, else stops.
    async fn read(
        &self,
        mut response: reqwest::Response,
        cap: usize,
        strict: bool,
    ) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(&e))?
        {
            if body.len() + chunk.len() > cap {
                if strict {
                    return Err(ProviderRequestError::new(
                        response.status().as_u16(),
                        format!("the answer is larger than {cap} bytes"),
                    )
                    .into());
                }
                body.extend_from_slice(&chunk[..cap - body.len()]);
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport_error(&self, error: &reqwest::Error) -> Error {
        transport_error(error, self.connect_timeout)
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
