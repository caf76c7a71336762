//! The batch API's HTTP: reads (`GET`), JSON posts and the file upload (multipart) of
//! one model, with what its live endpoint sends (address, key as a bearer token,
//! `OpenAI-Organization` / `OpenAI-Project`, the connect timeout, no proxy, no retries)
//! and its error answers read by the same error reader into the core's one verdict.
//!
//! The kit's endpoint posts JSON only, and a batch API also reads and uploads, so this
//! is a small client of its own. Like the kit's, it cuts the key, in any form, out of
//! every body it hands back and every error it returns.

use std::time::Duration;

use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use tollgate::provider::http::{MAX_ERROR_BODY_BYTES, ReadError, retry_after};
use tollgate::provider::{
    CatalogError, CredentialRef, Error, ModelEntry, ProviderContext, ProviderError, Result, Secret,
    connection_error, redact_bytes,
};

/// The most bytes of a results file read when the catalog sets no
/// `max_response_bytes` for the model: 1 GiB, far above any chat answer (a results
/// file holds up to 50,000 answers). Set `max_response_bytes` to read less, or more.
pub(crate) const RESULTS_BYTE_LIMIT: u64 = 1 << 30;

/// The most bytes one key byte can take in an error body, escaped or encoded (the kit's
/// own margin), so that a key cut by the error cap is still whole when it is redacted.
const LONGEST_FORM_PER_BYTE: usize = 13;

/// One model's batch HTTP: its address, key and fixed headers.
#[derive(Debug)]
pub(crate) struct BatchHttp {
    client: reqwest::Client,
    base_url: String,
    credential: Option<CredentialRef>,
    headers: Vec<(&'static str, String)>,
    read_error: ReadError,
    connect_timeout: Duration,
    model_id: String,
    limit: u64,
}

/// What a request carries: nothing, or bytes of a content type.
type Body = Option<(String, Vec<u8>)>;

impl BatchHttp {
    /// The client of `model` at `base_url` with `headers`, its key from `context`'s
    /// store; an error answer is read by `read_error`. A read that stalls longer than
    /// the model's stream idle timeout fails as a timeout.
    pub(crate) fn new(
        context: &ProviderContext,
        model: &ModelEntry,
        base_url: &str,
        headers: Vec<(&'static str, String)>,
        read_error: ReadError,
    ) -> Result<Self> {
        let client = reqwest::Client::builder()
            .connect_timeout(context.connect_timeout())
            .read_timeout(model.stream_idle_timeout())
            .no_proxy()
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| {
                Error::Catalog(CatalogError::InvalidSection {
                    field: format!("providers.{}", context.key()),
                    reason: format!("the batch API's HTTP client could not be made: {e}"),
                })
            })?;
        Ok(BatchHttp {
            client,
            base_url: base_url.to_owned(),
            credential: context.credential_ref(model),
            headers,
            read_error,
            connect_timeout: context.connect_timeout(),
            model_id: model.id.clone(),
            limit: model.max_response_bytes.unwrap_or(RESULTS_BYTE_LIMIT),
        })
    }

    /// The error reader error answers go through (a results line's HTTP error too).
    pub(crate) fn read_error(&self) -> ReadError {
        self.read_error
    }

    /// `GET {base_url}{path}`: the body.
    pub(crate) async fn get(&self, path: &str) -> Result<Vec<u8>> {
        self.send(Method::GET, path, None).await
    }

    /// `POST {base_url}{path}` with a JSON body: the answer's body.
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Vec<u8>> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| Error::invalid_request("body", format!("does not serialise: {e}")))?;
        self.send(Method::POST, path, Some(("application/json".into(), bytes)))
            .await
    }

    /// `POST {base_url}{path}` as `multipart/form-data`: a `purpose` field and the
    /// `file` field holding `content` as `file_name` (JSONL).
    pub(crate) async fn upload(
        &self,
        path: &str,
        purpose: &str,
        file_name: &str,
        content: &[u8],
    ) -> Result<Vec<u8>> {
        let (content_type, body) = multipart(purpose, file_name, content);
        self.send(Method::POST, path, Some((content_type, body)))
            .await
    }

    async fn send(&self, method: Method, path: &str, body: Body) -> Result<Vec<u8>> {
        let secret = match &self.credential {
            Some(credential) => Some(credential.secret().await?),
            None => None,
        };
        let keys: Vec<&str> = secret.iter().map(Secret::expose_secret).collect();
        let url = format!("{}{path}", self.base_url);
        let mut request = self
            .client
            .request(method, url)
            .header(ACCEPT, "application/json");
        if let (Some(secret), Some(credential)) = (&secret, &self.credential) {
            request = request.header(AUTHORIZATION, bearer(secret, credential.id())?);
        }
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        if let Some((content_type, bytes)) = body {
            request = request.header(CONTENT_TYPE, content_type).body(bytes);
        }
        tracing::debug!(model = %self.model_id, path, "batch request");
        let response = request.send().await.map_err(|e| self.failed(&e, &keys))?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            let bytes = self.read(response, self.limit, true, &keys).await?;
            return Ok(without(bytes, &keys));
        }
        let waited = retry_after(response.headers());
        let key_len = keys.iter().map(|k| k.len()).sum::<usize>();
        let cap = MAX_ERROR_BODY_BYTES + LONGEST_FORM_PER_BYTE * key_len;
        let bytes = self.read(response, cap as u64, false, &keys).await?;
        let mut bytes = without(bytes, &keys);
        bytes.truncate(MAX_ERROR_BODY_BYTES);
        let mut wire = (self.read_error)(status, String::from_utf8_lossy(&bytes).as_bytes());
        wire.retry_after = wire.retry_after.or(waited);
        Err(wire.verdict().redacted(&keys))
    }

    /// The body, up to `cap` bytes: past it, [`Error::ResponseTooLarge`] when `strict`
    /// (nothing more is read), else the first `cap` bytes.
    async fn read(
        &self,
        mut response: reqwest::Response,
        cap: u64,
        strict: bool,
        keys: &[&str],
    ) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let chunk = response.chunk().await.map_err(|e| self.failed(&e, keys))?;
            let Some(chunk) = chunk else {
                return Ok(body);
            };
            let room = usize::try_from(cap.saturating_sub(body.len() as u64)).unwrap_or(usize::MAX);
            if chunk.len() <= room {
                body.extend_from_slice(&chunk);
            } else if strict {
                return Err(Error::ResponseTooLarge {
                    model_id: self.model_id.clone(),
                    limit_bytes: cap,
                });
            } else {
                body.extend_from_slice(&chunk[..room]);
                return Ok(body);
            }
        }
    }

    /// No answer at all: a timeout, or the connection's failure typed by its cause.
    fn failed(&self, error: &reqwest::Error, keys: &[&str]) -> Error {
        if error.is_timeout() {
            let after = error.is_connect().then_some(self.connect_timeout);
            return ProviderError::Timeout { after }.into();
        }
        connection_error(error, keys).into()
    }
}

/// `Bearer KEY`, marked sensitive; a key a header cannot carry is refused naming its
/// credential id only.
fn bearer(secret: &Secret, id: &str) -> Result<HeaderValue> {
    let mut value =
        HeaderValue::from_str(&format!("Bearer {}", secret.expose_secret())).map_err(|_| {
            Error::invalid_request(
                "credential",
                format!(
                    "`{id}` holds characters an HTTP header cannot carry; store the API key alone"
                ),
            )
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// `bytes` with every form of each key cut out.
fn without(bytes: Vec<u8>, keys: &[&str]) -> Vec<u8> {
    keys.iter().fold(bytes, |bytes, key| {
        redact_bytes(&bytes, key).unwrap_or(bytes)
    })
}

/// A `multipart/form-data` body of two fields, `purpose` and `file`: its content type
/// (with the boundary) and its bytes. The boundary is one that `content` does not hold
/// after a line break (encoded lines hold no carriage return, so the first is taken
/// without a search).
pub(crate) fn multipart(purpose: &str, file_name: &str, content: &[u8]) -> (String, Vec<u8>) {
    let has_cr = content.contains(&b'\r');
    let boundary = (0u32..)
        .map(|n| format!("tollgate-batch-{n:08x}"))
        .find(|b| !has_cr || !holds(content, format!("\r\n--{b}").as_bytes()))
        .unwrap_or_default();
    let mut body = Vec::with_capacity(content.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Whether `haystack` holds `needle`.
fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
