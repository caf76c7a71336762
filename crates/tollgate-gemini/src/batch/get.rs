//! The batch API's GETs (a batch, the batch list), which the kit's
//! [`Endpoint`](tollgate::provider::http::Endpoint) cannot send: it POSTs only. This is
//! the endpoint's send-once for a GET, kept as close to it as the kit's public parts
//! allow: the model's credential fetched per request and sent as `x-goog-api-key`
//! (marked sensitive), the provider's connect timeout, no proxy from the environment and
//! no retries; an error answer read (at most
//! [`MAX_ERROR_BODY_BYTES`]) with the key cut out, through [`codec::read_error`] and the
//! core's one verdict, `retry-after` included; a success body read up to a limit
//! ([`Error::ResponseTooLarge`] past it) with the key cut out. What it lacks is the kit's
//! typed DNS failure (the kit's resolver is private): a name that does not resolve is a
//! connection error of another cause. It belongs in the kit (`Endpoint::get`); until
//! then it lives here.

use std::time::Duration;

use reqwest::header::HeaderValue;
use tollgate::provider::http::{MAX_ERROR_BODY_BYTES, retry_after};
use tollgate::provider::{
    CatalogError, CredentialRef, Error, ModelEntry, ProviderContext, ProviderError, Result, Secret,
    connection_error, redact_bytes,
};

use crate::codec;

/// The most bytes one byte of a key takes when a server quotes it escaped (the kit's
/// figure: eight backslashes, `u` and four digits), so that a key the error cap cuts is
/// still read whole for redaction.
const LONGEST_FORM_PER_BYTE: usize = 13;

/// GETs from one `gemini` model's address with its key.
#[derive(Debug)]
pub(crate) struct Getter {
    http: reqwest::Client,
    base_url: String,
    model_id: String,
    credential: CredentialRef,
    connect_timeout: Duration,
    max_body_bytes: usize,
}

impl Getter {
    /// The getter of `entry` at `base_url`, reading success bodies up to
    /// `max_body_bytes`; fails unless the model names a credential.
    pub(crate) fn new(
        context: &ProviderContext,
        entry: &ModelEntry,
        base_url: &str,
        max_body_bytes: usize,
    ) -> Result<Self> {
        let credential = context.credential_ref(entry).ok_or_else(|| {
            Error::Catalog(CatalogError::MissingCredential {
                model_id: entry.id.clone(),
                provider: entry.provider.clone(),
            })
        })?;
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
        Ok(Getter {
            http,
            base_url: base_url.to_owned(),
            model_id: entry.id.clone(),
            credential,
            connect_timeout: context.connect_timeout(),
            max_body_bytes,
        })
    }

    /// GETs `{base_url}{path}?{query}` once and reads the whole answer, with the key cut
    /// out of it; an error answer is its verdict.
    pub(crate) async fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<Vec<u8>> {
        let secret = self.credential.secret().await?;
        let key = secret.expose_secret();
        let mut url = reqwest::Url::parse(&format!("{}{path}", self.base_url)).map_err(|e| {
            Error::invalid_request("options.base_url", format!("does not make an address: {e}"))
        })?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut value = HeaderValue::from_str(key).map_err(|_| Error::InvalidRequest {
            field: "credential".into(),
            reason: format!(
                "`{}` holds characters an HTTP header cannot carry; store the API key alone",
                self.credential.id()
            ),
        })?;
        value.set_sensitive(true);
        tracing::debug!(model = %self.model_id, path, "sending");
        let response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .header("x-goog-api-key", value)
            .send()
            .await
            .map_err(|e| self.transport_error(&e, &secret))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            let bytes = self
                .read(response, self.max_body_bytes, true, &secret)
                .await?;
            return Ok(without_key(bytes, key));
        }
        let wait = retry_after(response.headers());
        let cap = MAX_ERROR_BODY_BYTES + LONGEST_FORM_PER_BYTE * key.len();
        let mut bytes = without_key(self.read(response, cap, false, &secret).await?, key);
        bytes.truncate(MAX_ERROR_BODY_BYTES);
        let mut wire = codec::read_error(status, &bytes);
        wire.retry_after = wire.retry_after.or(wait);
        Err(wire.verdict().redacted(&[key]))
    }

    /// Reads the body, up to `cap` bytes: beyond it, fails when `strict`, else stops.
    async fn read(
        &self,
        mut response: reqwest::Response,
        cap: usize,
        strict: bool,
        secret: &Secret,
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

    /// A failure to get an answer at all: a timeout, or a connection error by cause.
    fn transport_error(&self, error: &reqwest::Error, secret: &Secret) -> Error {
        if error.is_timeout() {
            let after = error.is_connect().then_some(self.connect_timeout);
            return ProviderError::Timeout { after }.into();
        }
        connection_error(error, &[secret.expose_secret()]).into()
    }
}

/// `bytes` with every form of `key` cut out.
fn without_key(bytes: Vec<u8>, key: &str) -> Vec<u8> {
    redact_bytes(&bytes, key).unwrap_or(bytes)
}
