//! Anthropic's Message Batches API (`/v1/messages/batches`) as a [`BatchTransport`]:
//! requests queued for up to 24 hours at half the price, for `tollgate run --via batch`.
//!
//! | call | wire |
//! |---|---|
//! | [`encode`](BatchTransport::encode) | `{"custom_id", "params"}`, `params` the live call's body (the same encoder, never `stream`) |
//! | [`submit`](BatchTransport::submit) | `POST /v1/messages/batches {"requests": [line, …]}` |
//! | [`status`](BatchTransport::status) | `GET /v1/messages/batches/{id}`: `processing_status`, `request_counts` |
//! | [`results`](BatchTransport::results) | `GET` its results (JSONL), each line decoded as a live answer or error |
//! | [`cancel`](BatchTransport::cancel) | `POST /v1/messages/batches/{id}/cancel` |
//! | [`find`](BatchTransport::find) | nothing: Message Batches keep no label |
//!
//! Every request goes with the live transport's key, `anthropic-version` and
//! `anthropic-beta` (the model's betas apply to its batched requests too), and an error
//! answer of these endpoints (a 429 when the account's queue is full, a 401) is judged
//! as a live call's is.

mod wire;

#[cfg(test)]
mod tests;

use serde_json::json;
use tollgate::provider::batch::{
    BatchCaps, BatchHandle, BatchItem, BatchOutcome, BatchPhase, BatchStatus, BatchTransport,
};
use tollgate::provider::http::{Method, Payload};
use tollgate::provider::{Error, ModelEntry, Result, Signals};

use crate::chat::AnthropicChat;

const BATCHES_PATH: &str = "/v1/messages/batches";

/// The most bytes of a results file read when the catalog's `max_response_bytes` is
/// smaller: 1 GiB, far above one answer, since a file holds up to 100,000 of them.
const RESULTS_BYTE_LIMIT: u64 = 1 << 30;

/// The Message Batches transport of one `anthropic-direct` chat model. Holds the
/// credential's id, never the key.
///
/// `find` has nothing to look for: a Message Batch keeps no label or metadata, so a run
/// that stopped between submitting a batch and recording its handle cannot find it
/// again, and that one batch runs (and is billed) unseen by the command.
#[derive(Debug)]
pub struct AnthropicBatch {
    live: AnthropicChat,
    caps: BatchCaps,
    results_limit: usize,
}

impl AnthropicBatch {
    /// The batch API of `model`, over its live transport: its endpoint (address, key,
    /// headers, error reading) sends every request, its encoder writes every line.
    pub(crate) fn new(live: AnthropicChat, model: &ModelEntry) -> Self {
        let terms = &model.batch;
        let max_requests = terms
            .max_requests
            .map_or(wire::MAX_REQUESTS, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
            .min(wire::MAX_REQUESTS);
        let max_bytes = terms
            .max_bytes
            .unwrap_or(wire::MAX_LINE_BYTES)
            .min(wire::MAX_LINE_BYTES);
        let results_limit = model
            .max_response_bytes
            .unwrap_or(0)
            .max(RESULTS_BYTE_LIMIT);
        AnthropicBatch {
            live,
            caps: BatchCaps {
                max_requests,
                max_bytes,
            },
            results_limit: usize::try_from(results_limit).unwrap_or(usize::MAX),
        }
    }

    /// The batch object of `handle`.
    async fn retrieve(&self, handle: &BatchHandle) -> Result<wire::WireBatch> {
        wire::check_batch_id(&handle.id)?;
        let path = format!("{BATCHES_PATH}/{}", handle.id);
        let body = self
            .get(&path, "application/json", self.live_limit())
            .await?;
        wire::decode_batch(&body)
    }

    /// GETs `path` under the base URL through the live endpoint (its key, headers and
    /// error verdicts; the key cut out of the answer), reading at most `limit` bytes.
    async fn get(&self, path: &str, accept: &str, limit: usize) -> Result<Vec<u8>> {
        self.live
            .endpoint()
            .request(Method::GET, path, Payload::Empty, accept, limit)
            .await
    }

    /// A batch object is an answer of a live call's size.
    fn live_limit(&self) -> usize {
        usize::try_from(self.live.model().response_byte_limit()).unwrap_or(usize::MAX)
    }
}

#[tollgate::provider::async_trait]
impl BatchTransport for AnthropicBatch {
    /// 100,000 requests, and 256 MB less the create body's own bytes (a comma a line and
    /// the `{"requests":[…]}` around them); the catalog's `[models.ID.batch]`
    /// `max_requests` and `max_bytes` lower them.
    fn caps(&self) -> BatchCaps {
        self.caps
    }

    /// The request as the live call's body (refused as the live call refuses it), under
    /// a `custom_id` Anthropic takes (`^[a-zA-Z0-9_-]{1,64}$`, else
    /// [`Error::InvalidRequest`] naming `custom_id`).
    fn encode(&self, item: &BatchItem) -> Result<Vec<u8>> {
        wire::check_custom_id(&item.custom_id)?;
        let params = self.live.encode(&item.request, false)?;
        wire::line(&item.custom_id, params)
    }

    /// Creates the batch (the label is not sent: Message Batches keep none). A 429 (too
    /// many batches or requests queued) is `RateLimited` with the server's wait, as for
    /// a live call.
    async fn submit(&self, lines: &[Vec<u8>], _label: &str) -> Result<BatchHandle> {
        if lines.is_empty() || lines.len() > self.caps.max_requests {
            return Err(Error::invalid_request(
                "lines",
                format!(
                    "a message batch holds 1 to {} requests; this one has {}",
                    self.caps.max_requests,
                    lines.len()
                ),
            ));
        }
        let body = wire::create_body(lines)?;
        let batch = self
            .live
            .endpoint()
            .post_decoded(BATCHES_PATH, &body, &Signals::default(), wire::decode_batch)
            .await?;
        wire::check_batch_id(&batch.id)?;
        Ok(BatchHandle {
            id: batch.id,
            input_file: None,
        })
    }

    async fn status(&self, handle: &BatchHandle) -> Result<BatchStatus> {
        self.retrieve(handle).await?.status()
    }

    /// The results of an ended batch (at most the larger of 1 GiB and the catalog's
    /// `max_response_bytes`: a file holds up to 100,000 answers), read from its
    /// `results_url` when that is under the configured base URL and from the base URL's
    /// `/v1/messages/batches/{id}/results` otherwise, so the key never goes elsewhere.
    /// A batch not yet ended is [`Error::InvalidRequest`] (its results are not ready).
    async fn results(&self, handle: &BatchHandle) -> Result<Vec<BatchOutcome>> {
        let batch = self.retrieve(handle).await?;
        let phase = batch.phase()?;
        if phase != BatchPhase::Ended {
            return Err(Error::invalid_request(
                "batch",
                format!(
                    "message batch `{}` has not ended ({phase:?}): its results are not ready",
                    handle.id
                ),
            ));
        }
        let base_url = &self.live.options().base_url;
        let path = wire::results_path(base_url, batch.results_url.as_deref(), &handle.id);
        // Asked for as Anthropic's SDKs ask for it (the file is JSONL, not one JSON).
        let body = self
            .get(&path, "application/binary", self.results_limit)
            .await?;
        Ok(wire::decode_results(&body, &handle.id))
    }

    /// Asks for the batch to be cancelled: it is `canceling` until the requests running
    /// finish, then ended, its unsent requests' lines `canceled`.
    async fn cancel(&self, handle: &BatchHandle) -> Result<()> {
        wire::check_batch_id(&handle.id)?;
        let path = format!("{BATCHES_PATH}/{}/cancel", handle.id);
        self.live
            .endpoint()
            .post_decoded(&path, &json!({}), &Signals::default(), wire::decode_batch)
            .await
            .map(drop)
    }

    /// `None`: Message Batches keep no label or metadata to find a batch by (see
    /// [`AnthropicBatch`]).
    async fn find(&self, _label: &str) -> Result<Option<BatchHandle>> {
        Ok(None)
    }
}
