//! [`Endpoint::request`]: the requests a provider's batch API makes besides a model call.

use super::{Endpoint, Signals, without_secret};
use crate::error::{Error, ProviderError, Result};

/// What an [`Endpoint::request`] carries.
#[derive(Debug)]
pub enum Payload<'a> {
    /// No body (a read, a cancel).
    Empty,
    /// A JSON body.
    Json(&'a serde_json::Value),
    /// Bytes of a content type (a multipart upload, a JSONL file).
    Bytes {
        /// The `content-type` header, e.g. `multipart/form-data; boundary=…`.
        content_type: String,
        /// The body.
        body: Vec<u8>,
    },
}

impl Endpoint {
    /// Sends `payload` to `{base_url}{path}` with `method` once, asking for `accept`, and
    /// reads the whole success answer, at most `max_bytes` (more is
    /// [`Error::ResponseTooLarge`]): the requests besides a model call that a provider's
    /// batch API makes (a status read, a results file, a file upload, a cancel). Sent
    /// and read as a call is: the same key and headers, its error answer the same
    /// verdict, the key cut out of the bytes returned and of every error. An answer that
    /// goes longer than the model's stream idle timeout without a byte fails as a
    /// [`ProviderError::Timeout`] (an upload's answer waits for its headers as long as
    /// the upload takes: only its body is timed).
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        payload: Payload<'_>,
        accept: &str,
        max_bytes: usize,
    ) -> Result<Vec<u8>> {
        let idle = self.idle_timeout;
        let stalled = || Error::from(ProviderError::Timeout { after: Some(idle) });
        // The answer's first byte is awaited as long as the idle timeout, after a body
        // of bytes (an upload, which may take longer than that to send) is sent.
        let uploads = matches!(payload, Payload::Bytes { .. });
        let signals = Signals::default();
        let send = self.send_with(method, path, payload, accept, &signals);
        let (response, secret) = if uploads {
            send.await?
        } else {
            tokio::time::timeout(idle, send)
                .await
                .map_err(|_| stalled())??
        };
        let mut response = response;
        let mut body = Vec::new();
        loop {
            let chunk = tokio::time::timeout(idle, response.chunk())
                .await
                .map_err(|_| stalled())?
                .map_err(|e| self.transport_error(&e, secret.as_ref()))?;
            let Some(chunk) = chunk else { break };
            if body.len() + chunk.len() > max_bytes {
                return Err(Error::ResponseTooLarge {
                    model_id: self.model_id.clone(),
                    limit_bytes: u64::try_from(max_bytes).unwrap_or(u64::MAX),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(without_secret(body, secret.as_ref()))
    }
}
