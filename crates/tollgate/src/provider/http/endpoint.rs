//! The send-once endpoint: one model's address, credential and fixed headers; sends a
//! JSON body once and turns an error answer into the one verdict.
//!
//! **The key never reaches the codec.** Every body the endpoint reads (an error answer,
//! a whole answer, each stream event) has the key it sent cut out
//! ([`crate::provider::wire::REDACTED`]) before the codec sees it, in every form a server may
//! quote it in (raw, JSON-escaped such as `\/` or `\u002F`, URL-encoded:
//! [`crate::provider::wire::redact`]), so decoding the JSON cannot turn an escaped key back into
//! the raw one. Every error the codec then returns (a verdict read from an error
//! answer, a decoded answer's error, each stream error) is redacted again, on its final
//! text, and so is every error the endpoint builds itself (a connection that failed
//! mid-body). So no error a codec builds from those bytes (a `Malformed` keeping the
//! start of a 200 that does not decode, a rejection read from a success body, a
//! stream's error event) can carry the key, whichever endpoint method read them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::HeaderValue;

use super::headers::{RateLimitHeaders, read_signals, retry_after};
use super::stream::Framing;
use crate::catalog::{CatalogError, ModelEntry};
use crate::context::{CredentialRef, ProviderContext};
use crate::credentials::Secret;
use crate::error::{Error, ProviderError, Result};
use crate::provider::Signals;
use crate::provider::wire::{
    DnsFailure, EventDecoder, WireError, connection_error, decode_events, redact, redact_bytes,
    redacted_stream,
};
use crate::stream::ResponseStream;

/// The most bytes of a success body any model may be configured to read (the default
/// for embeddings models, whose full batches are tens of MB as JSON). Each model's own
/// limit is its catalog `max_response_bytes` ([`ModelEntry::response_byte_limit`]).
pub const MAX_BODY_BYTES: usize = 256 << 20;

/// The most bytes of an error body read; the rest is dropped (messages are short).
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// The most bytes one byte of a key can take when a server quotes it escaped or encoded
/// (`\\\\\\\\u0073`), for reading an error body past its cap far enough to redact a key
/// that straddles the cap.
const LONGEST_FORM_PER_BYTE: usize = 13;

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
            .dns_resolver(TypedDns)
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
            urls: Arc::default(),
            credential: self.context.credential_ref(model),
            source: None,
            auth: Auth::Bearer,
            headers: Vec::new(),
            rate_limits: &[],
            read_error,
            connect_timeout: self.context.connect_timeout(),
            idle_timeout: model.stream_idle_timeout(),
            max_body_bytes: usize::try_from(model.response_byte_limit()).unwrap_or(usize::MAX),
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
    /// `base_url` and a path, parsed once per path (not on every request).
    urls: Arc<Urls>,
    credential: Option<CredentialRef>,
    source: Option<Arc<dyn SecretSource>>,
    auth: Auth,
    headers: Vec<(&'static str, String)>,
    rate_limits: &'static [RateLimitHeaders],
    read_error: ReadError,
    connect_timeout: Duration,
    /// The longest an [`Endpoint::request`] answer may go without a byte (the model's
    /// `stream_idle_timeout_secs`).
    idle_timeout: Duration,
    max_body_bytes: usize,
}

/// The addresses an endpoint has sent to, parsed: a provider uses a handful of paths,
/// and parsing its address was a measurable part of a request's CPU.
#[derive(Debug, Default)]
struct Urls(std::sync::RwLock<Vec<(Box<str>, reqwest::Url)>>);

impl Urls {
    /// At most this many paths are kept (a provider with a path per request, a model
    /// name in it, say, parses the rest each time).
    const MOST: usize = 16;

    /// `base` and `path`, parsed (`None` if it does not parse: the client then reports
    /// it, as for any address).
    fn get(&self, base: &str, path: &str) -> Option<reqwest::Url> {
        if let Ok(urls) = self.0.read()
            && let Some((_, url)) = urls.iter().find(|(p, _)| &**p == path)
        {
            return Some(url.clone());
        }
        let url = reqwest::Url::parse(&format!("{base}{path}")).ok()?;
        if let Ok(mut urls) = self.0.write()
            && urls.len() < Self::MOST
            && urls.iter().all(|(p, _)| &**p != path)
        {
            urls.push((path.into(), url.clone()));
        }
        Some(url)
    }
}

impl Endpoint {
    /// Reads at most `bytes` of a success body or of one stream event (default: the
    /// model's [`ModelEntry::response_byte_limit`]); more is
    /// [`Error::ResponseTooLarge`].
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
        self.send(path, body, accept, signals)
            .await
            .map(|(response, _)| response)
    }

    /// [`Endpoint::post`], also handing back the key it sent (to redact later errors).
    async fn send(
        &self,
        path: &str,
        body: &serde_json::Value,
        accept: &str,
        signals: &Signals,
    ) -> Result<(reqwest::Response, Option<Secret>)> {
        self.send_with(
            reqwest::Method::POST,
            path,
            Payload::Json(body),
            accept,
            signals,
        )
        .await
    }

    /// Sends one request and reads its signals; an error answer becomes its verdict.
    async fn send_with(
        &self,
        method: reqwest::Method,
        path: &str,
        payload: Payload<'_>,
        accept: &str,
        signals: &Signals,
    ) -> Result<(reqwest::Response, Option<Secret>)> {
        let (secret, id) = match (&self.source, &self.credential) {
            (Some(s), _) => (Some(s.secret().await?), s.id()),
            (None, Some(c)) => (Some(c.secret().await?), c.id()),
            (None, None) => (None, ""),
        };
        let request = match self.urls.get(&self.base_url, path) {
            Some(url) => self.http.request(method, url),
            None => self
                .http
                .request(method, format!("{}{path}", self.base_url)),
        };
        let mut request = request.header("accept", accept);
        request = match payload {
            Payload::Empty => request,
            Payload::Json(body) => request.json(body),
            Payload::Bytes { content_type, body } => {
                request.header("content-type", content_type).body(body)
            }
        };
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
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_error(&e, secret.as_ref()))?;
        read_signals(response.headers(), self.rate_limits, signals);
        let status = response.status().as_u16();
        if response.status().is_success() {
            return Ok((response, secret));
        }
        let retry_after = retry_after(response.headers());
        // The longest spelling of the key past the cap, so that a key the cap cuts is
        // still whole when it is redacted (an escaped form is up to 13 bytes a key byte:
        // eight backslashes, `u` and four digits; `%2525` and two digits is 9); the cap
        // applies after.
        let key_len = secret.as_ref().map_or(0, |s| s.expose_secret().len());
        let bytes = self
            .read(
                response,
                MAX_ERROR_BODY_BYTES + LONGEST_FORM_PER_BYTE * key_len,
                false,
                secret.as_ref(),
            )
            .await?;
        // Defence in depth: an error message never carries the key, even if echoed.
        let mut bytes = without_secret(bytes, secret.as_ref());
        bytes.truncate(MAX_ERROR_BODY_BYTES);
        let text = String::from_utf8_lossy(&bytes);
        let mut wire = (self.read_error)(status, text.as_bytes());
        wire.retry_after = wire.retry_after.or(retry_after);
        // And again after the codec decoded it: a form the bytes kept is cut out of the
        // final text too.
        Err(redacted(wire.verdict(), secret.as_ref()))
    }

    /// POSTs `body` and reads the whole answer (at most [`Endpoint::max_body_bytes`]:
    /// a larger one is [`Error::ResponseTooLarge`], and reading stops there).
    ///
    /// The key sent is cut out of the bytes returned (a body that carries it is the
    /// server echoing it), so an error the caller builds from them, such as
    /// [`crate::provider::wire::malformed`] for a 200 that does not decode, cannot carry it.
    /// [`Endpoint::post_decoded`] is the same with the decoding step included.
    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
    ) -> Result<Vec<u8>> {
        self.post_read(path, body, signals)
            .await
            .map(|(bytes, _)| bytes)
    }

    /// [`Endpoint::post_json`], then `decode` (the codec's) on the body: the usual way
    /// to read a whole answer. The codec sees the body with the key cut out, and the
    /// error it returns is redacted again (a decoder that kept the key from elsewhere).
    pub async fn post_decoded<T>(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
        decode: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<T> {
        let (bytes, secret) = self.post_read(path, body, signals).await?;
        decode(&bytes).map_err(|e| redacted(e, secret.as_ref()))
    }

    /// Sends `body` and reads the whole success answer with the key cut out of it;
    /// hands back the key sent too.
    async fn post_read(
        &self,
        path: &str,
        body: &serde_json::Value,
        signals: &Signals,
    ) -> Result<(Vec<u8>, Option<Secret>)> {
        let (response, secret) = self.send(path, body, "application/json", signals).await?;
        let bytes = self
            .read(response, self.max_body_bytes, true, secret.as_ref())
            .await?;
        Ok((without_secret(bytes, secret.as_ref()), secret))
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
        let (response, secret) = self.send(path, body, framing.accept(), signals).await?;
        let connect_timeout = self.connect_timeout;
        let chunk_secret = secret.clone();
        let bytes = response.bytes_stream().map(move |chunk| {
            chunk.map_err(|e| transport_error(&e, connect_timeout, chunk_secret.as_ref()))
        });
        let (model_id, limit) = (self.model_id.clone(), self.max_body_bytes);
        let event_secret = secret.clone();
        let events = framing
            .events_limited(bytes, limit)
            .map(move |event| match event {
                // The decoder never sees the key, so no error it builds from an event can
                // carry it.
                Ok(text) => Ok(redact_text(text, event_secret.as_ref())),
                Err(Error::ResponseTooLarge { limit_bytes, .. }) => Err(Error::ResponseTooLarge {
                    model_id: model_id.clone(),
                    limit_bytes,
                }),
                Err(other) => Err(other),
            });
        let secrets = secret.map(|s| s.expose_secret().to_owned()).into_iter();
        Ok(redacted_stream(
            decode_events(events, decoder),
            secrets.collect(),
        ))
    }

    /// Reads the body, up to `cap` bytes: beyond it, fails when `strict`
    /// ([`Error::ResponseTooLarge`], without reading further), else stops.
    async fn read(
        &self,
        mut response: reqwest::Response,
        cap: usize,
        strict: bool,
        secret: Option<&Secret>,
    ) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.transport_error(&e, secret))?
        {
            if body.len() + chunk.len() > cap {
                if strict {
                    return Err(Error::ResponseTooLarge {
                        model_id: self.model_id.clone(),
                        limit_bytes: u64::try_from(cap).unwrap_or(u64::MAX),
                    });
                }
                body.extend_from_slice(&chunk[..cap - body.len()]);
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport_error(&self, error: &reqwest::Error, secret: Option<&Secret>) -> Error {
        transport_error(error, self.connect_timeout, secret)
    }
}

/// `text` with the key, in any form ([`redact`]), cut out; left as it is when it does
/// not hold the key (an empty key redacts nothing).
fn redact_text(text: String, secret: Option<&Secret>) -> String {
    match secret.map(Secret::expose_secret) {
        Some(key) => redact(&text, [key]),
        None => text,
    }
}

/// `bytes` with every form of the key ([`redact`]) replaced by [`crate::provider::wire::REDACTED`];
/// the same bytes (no copy) when the key is not in them. Works on any bytes, UTF-8 or
/// not.
fn without_secret(bytes: Vec<u8>, secret: Option<&Secret>) -> Vec<u8> {
    match secret.map(Secret::expose_secret) {
        Some(key) => redact_bytes(&bytes, key).unwrap_or(bytes),
        None => bytes,
    }
}

/// `error` with the key, in any form, cut out of its text ([`Error::redacted`]).
fn redacted(error: Error, secret: Option<&Secret>) -> Error {
    match secret {
        Some(s) => error.redacted(&[s.expose_secret()]),
        None => error,
    }
}

/// A failure to get an answer at all (connect, send, or read the body): a timeout, or a
/// [`ProviderError::Connection`] whose cause is read from the error's type.
fn transport_error(
    error: &reqwest::Error,
    connect_timeout: Duration,
    secret: Option<&Secret>,
) -> Error {
    if error.is_timeout() {
        let after = error.is_connect().then_some(connect_timeout);
        return ProviderError::Timeout { after }.into();
    }
    let secrets: Vec<&str> = secret.map(Secret::expose_secret).into_iter().collect();
    connection_error(error, &secrets).into()
}

/// The system resolver (`getaddrinfo`, through tokio), with its failures wrapped in
/// [`DnsFailure`] so that a name that does not resolve is told apart by type.
#[derive(Debug, Clone, Copy)]
struct TypedDns;

impl reqwest::dns::Resolve for TypedDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| Box::new(DnsFailure(e)) as Box<dyn std::error::Error + Send + Sync>)?;
            let addrs: Vec<std::net::SocketAddr> = addrs.collect();
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

mod request;

pub use request::Payload;

#[cfg(test)]
mod redaction_tests;

#[cfg(test)]
mod url_tests {
    use super::Urls;

    #[test]
    fn an_endpoint_parses_each_path_once_and_answers_the_same_address() {
        let urls = Urls::default();
        let base = "http://127.0.0.1:9/plain";
        let first = urls.get(base, "/v1/chat/completions").expect("parses");
        assert_eq!(
            first.as_str(),
            "http://127.0.0.1:9/plain/v1/chat/completions"
        );
        assert_eq!(urls.get(base, "/v1/chat/completions"), Some(first));
        let other = urls.get(base, "/v1/embeddings").expect("parses");
        assert_eq!(other.path(), "/plain/v1/embeddings");
        assert_eq!(urls.0.read().expect("lock").len(), 2);
    }

    #[test]
    fn paths_past_the_cap_are_parsed_each_time_and_an_address_that_does_not_parse_is_none() {
        let urls = Urls::default();
        for i in 0..Urls::MOST + 4 {
            let url = urls
                .get("http://127.0.0.1:9", &format!("/m{i}"))
                .expect("parses");
            assert_eq!(url.path(), format!("/m{i}"));
        }
        assert_eq!(urls.0.read().expect("lock").len(), Urls::MOST);
        assert_eq!(urls.get("not a url", "/v1"), None);
    }
}
