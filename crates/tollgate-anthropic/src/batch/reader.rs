//! The batch API's reads (a batch's status, its results file): GETs with the model's key
//! and fixed headers. The kit's `Endpoint` sends POSTs alone, so this sends the GETs
//! the way it sends a POST: the same key, fetched from the store per request and marked
//! sensitive; the same connect timeout, no proxy from the environment, no retries; an
//! error answer read by the same codec ([`codec::read_error`]) into the core's one
//! verdict, `retry-after` included; the key cut out of every body and every error.
//! A kit `Endpoint::get` would replace this file.

use std::time::Duration;

use reqwest::header::HeaderValue;
use tollgate::provider::http::{MAX_ERROR_BODY_BYTES, retry_after};
use tollgate::provider::{CatalogError, CredentialRef, Error, ProviderContext, ProviderError};
use tollgate::provider::{ModelEntry, Result, connection_error, redact_bytes};

use crate::codec;

/// The most bytes one key byte takes when a server quotes it escaped or encoded, so
/// that an error body is read far enough past its cap to redact a key the cap cuts.
const LONGEST_FORM_PER_BYTE: usize = 13;

/// Sends the batch API's GETs for one model.
#[derive(Debug, Clone)]
pub(crate) struct BatchReader {
    http: reqwest::Client,
    credential: Option<CredentialRef>,
    headers: Vec<(&'static str, String)>,
    connect_timeout: Duration,
    model_id: String,
}

impl BatchReader {
    /// The HTTP client, made as the kit makes the live one: the provider's connect
    /// timeout, no proxy from the environment, no retries of its own.
    pub(crate) fn client(context: &ProviderContext) -> Result<reqwest::Client> {
        reqwest::Client::builder()
            .connect_timeout(context.connect_timeout())
            .no_proxy()
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| {
                Error::Catalog(CatalogError::InvalidSection {
                    field: format!("providers.{}", context.key()),
                    reason: format!("the HTTP client of the batch API could not be made: {e}"),
                })
            })
    }

    /// The reader of `model`'s batches, sending its credential as `x-api-key` and
    /// `headers` (the API version, the beta flags) with every request.
    pub(crate) fn new(
        http: reqwest::Client,
        context: &ProviderContext,
        model: &ModelEntry,
        headers: Vec<(&'static str, String)>,
    ) -> Self {
        BatchReader {
            http,
            credential: context.credential_ref(model),
            headers,
            connect_timeout: context.connect_timeout(),
            model_id: model.id.clone(),
        }
    }

    /// GETs `url` once, asking for `accept`, and reads at most `limit` bytes of its
    /// success body (more is [`Error::ResponseTooLarge`]), the key cut out; an error
    /// answer is its verdict.
    pub(crate) async fn get(&self, url: &str, accept: &str, limit: usize) -> Result<Vec<u8>> {
        let secret = match &self.credential {
            Some(credential) => Some((credential.secret().await?, credential.id())),
            None => None,
        };
        let key = secret.as_ref().map_or("", |(s, _)| s.expose_secret());
        let mut request = self.http.get(url).header("accept", accept);
        if let Some((_, id)) = &secret {
            let mut value = HeaderValue::from_str(key).map_err(|_| {
                Error::invalid_request(
                    "credential",
                    format!(
                        "`{id}` holds characters an HTTP header cannot carry; store the API key alone"
                    ),
                )
            })?;
            value.set_sensitive(true);
            request = request.header("x-api-key", value);
        }
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        tracing::debug!(model = %self.model_id, "anthropic: reading a message batch");
        let mut response = request.send().await.map_err(|e| self.failed(&e, key))?;
        let status = response.status();
        if status.is_success() {
            let body = self.read(&mut response, limit, true, key).await?;
            return Ok(without_key(body, key));
        }
        let wait = retry_after(response.headers());
        let cap = MAX_ERROR_BODY_BYTES + LONGEST_FORM_PER_BYTE * key.len();
        let mut body = without_key(self.read(&mut response, cap, false, key).await?, key);
        body.truncate(MAX_ERROR_BODY_BYTES);
        let text = String::from_utf8_lossy(&body);
        let mut wire = codec::read_error(status.as_u16(), text.as_bytes());
        wire.retry_after = wire.retry_after.or(wait);
        Err(redacted(wire.verdict(), key))
    }

    /// Reads the body, up to `cap` bytes: beyond it, fails when `strict`, else stops.
    async fn read(
        &self,
        response: &mut reqwest::Response,
        cap: usize,
        strict: bool,
        key: &str,
    ) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failed(&e, key))? {
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

    /// No answer at all: a timeout, or the connection's failure by its type.
    fn failed(&self, error: &reqwest::Error, key: &str) -> Error {
        if error.is_timeout() {
            let after = error.is_connect().then_some(self.connect_timeout);
            return ProviderError::Timeout { after }.into();
        }
        let keys: Vec<&str> = [key].into_iter().filter(|k| !k.is_empty()).collect();
        connection_error(error, &keys).into()
    }
}

/// `bytes` with every form of `key` cut out (the same bytes when it holds none).
fn without_key(bytes: Vec<u8>, key: &str) -> Vec<u8> {
    if key.is_empty() {
        return bytes;
    }
    redact_bytes(&bytes, key).unwrap_or(bytes)
}

/// `error` with `key`, in any form, cut out of its text.
fn redacted(error: Error, key: &str) -> Error {
    if key.is_empty() {
        error
    } else {
        error.redacted(&[key])
    }
}
