//! The Gemini API's batch mode for a `gemini` chat model ([`GeminiBatch`]): requests sent
//! inline in one `batchGenerateContent` call, answered within 24 hours at half the
//! price (<https://ai.google.dev/gemini-api/docs/batch-mode>). Vertex AI's batch
//! prediction jobs read and write Cloud Storage or BigQuery instead: `vertex` has no
//! batch transport.
//!
//! | call | request | read |
//! |---|---|---|
//! | submit | `POST /v1beta/models/{model}:batchGenerateContent`, `{"batch":{"displayName": label, "inputConfig":{"requests":{"requests":[{"request", "metadata":{"key": custom_id}}]}}}}` | the operation's `name`, `batches/…` |
//! | status | `GET /v1beta/batches/{id}` | `metadata.state` (`BATCH_STATE_*`, also `JOB_STATE_*`), `metadata.batchStats`, a failed batch's `error` |
//! | results | the same GET | `response.inlinedResponses.inlinedResponses[]`: `response` (the live decoder) or `error` (the live error classifier), by `metadata.key` |
//! | cancel | `POST /v1beta/batches/{id}:cancel` | — |
//! | find | `GET /v1beta/batches?pageSize=100` (ten pages at most) | the batch whose `metadata.displayName` is the label |
//!
//! Each request is the body a live `generateContent` call sends ([`codec::encode_request`],
//! with the model's options), so what the live call refuses, [`GeminiBatch::encode`]
//! refuses the same way. Every request, the POSTs and the GETs, goes through the model's
//! endpoint (its key as `x-goog-api-key`, its error reading, the key cut out of what it
//! reads).
//!
//! A batch's answers come back inline, in the batch resource that status and results
//! GET: that body is read up to the model's `max_response_bytes` when the catalog sets
//! it, else [`DEFAULT_RESULT_BYTES`] (1 GiB, far above one chat answer).
//!
//! llmock 0.2.2 (a mock server of provider APIs the tests run against) takes another
//! body, `{"requests":[{"custom_id","request"}]}`, and rejects the real one; the real API
//! rejects llmock's (Google's JSON parser refuses unknown fields, so no body serves
//! both). `options.batch_body = "llmock"` sends llmock's, for tests against it; answers
//! are read in either shape whatever the option says. llmock keeps no display name, so
//! `find` finds nothing there.

mod wire;

use serde_json::Value;
use tollgate::provider::batch::{
    BatchCaps, BatchHandle, BatchItem, BatchOutcome, BatchStatus, BatchTransport,
};
use tollgate::provider::http::{Endpoint, Method, Payload};
use tollgate::provider::{Error, Result, Signals};

use crate::codec;
use crate::options::GeminiModel;

/// The most bytes one `batchGenerateContent` request may have: "the total request size
/// under 20MB" for inline requests (the batch mode guide), read as 20,000,000 bytes, the
/// smaller reading of "MB".
pub const INLINE_BATCH_BYTES: u64 = 20_000_000;

/// The most requests in one batch. The Gemini API documents no count for inline
/// requests (the guide bounds them by the 20 MB above; its rate limits page bounds
/// batch mode by 100 concurrent batches, a 2 GB input file and enqueued tokens per
/// model): this bound is tollgate's, so that a batch's answers, which come back inline
/// in one body, stay within [`DEFAULT_RESULT_BYTES`] (10,000 answers of 100 KB, about
/// 25,000 tokens each). A catalog's `batch.max_requests` may lower it.
pub const MAX_BATCH_REQUESTS: usize = 10_000;

/// The bytes of a create body besides its entries: the envelope and the label (64 KiB
/// for both), and a comma between each two entries.
const ENVELOPE_BYTES: u64 = (64 << 10) + MAX_BATCH_REQUESTS as u64;

/// The most bytes of a batch resource read (status and results), when the catalog sets
/// no `max_response_bytes` for the model: 1 GiB.
pub const DEFAULT_RESULT_BYTES: u64 = 1 << 30;

/// The list pages [`GeminiBatch::find`] reads at most, and the batches it asks for on
/// each.
const LIST_PAGES: usize = 10;
const LIST_PAGE_SIZE: &str = "100";

/// The batch transport of one `gemini` chat model.
#[derive(Debug)]
pub struct GeminiBatch {
    endpoint: Endpoint,
    model: GeminiModel,
    /// The most bytes of a batch resource or list page read.
    limit: usize,
}

impl GeminiBatch {
    /// The batch transport of `model` over `endpoint` (built as the live transport's),
    /// reading bodies up to the model's `max_response_bytes`, else
    /// [`DEFAULT_RESULT_BYTES`].
    pub(crate) fn new(endpoint: Endpoint, model: GeminiModel) -> Self {
        let limit = model
            .entry
            .max_response_bytes
            .unwrap_or(DEFAULT_RESULT_BYTES);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        GeminiBatch {
            endpoint: endpoint.max_body_bytes(limit),
            model,
            limit,
        }
    }

    /// GETs `path` once through the endpoint and reads the whole answer (at most the
    /// batch's read limit), the key cut out; an error answer is its verdict.
    async fn get(&self, path: &str) -> Result<Vec<u8>> {
        self.endpoint
            .request(
                Method::GET,
                path,
                Payload::Empty,
                "application/json",
                self.limit,
            )
            .await
    }
}

#[tollgate::provider::async_trait]
impl BatchTransport for GeminiBatch {
    /// [`MAX_BATCH_REQUESTS`] requests and [`INLINE_BATCH_BYTES`] less the envelope's
    /// room, each lowered by the catalog's `batch.max_requests` and `batch.max_bytes`.
    fn caps(&self) -> BatchCaps {
        let terms = &self.model.entry.batch;
        let max_requests = terms.max_requests.map_or(MAX_BATCH_REQUESTS, |n| {
            usize::try_from(n).map_or(MAX_BATCH_REQUESTS, |n| n.min(MAX_BATCH_REQUESTS))
        });
        let native = INLINE_BATCH_BYTES - ENVELOPE_BYTES;
        BatchCaps {
            max_requests,
            max_bytes: terms.max_bytes.map_or(native, |b| b.min(native)),
        }
    }

    /// The inline entry: the live request body under the item's id.
    fn encode(&self, item: &BatchItem) -> Result<Vec<u8>> {
        let request = codec::encode_request(&item.request, &self.model.encode_options())?;
        let entry = wire::entry(self.model.options.batch_body, &item.custom_id, request);
        serde_json::to_vec(&entry)
            .map_err(|e| Error::invalid_request("request", format!("does not serialize: {e}")))
    }

    /// Refuses an empty batch, a line that is not an entry, and a body over
    /// [`INLINE_BATCH_BYTES`], before sending anything.
    async fn submit(&self, lines: &[Vec<u8>], label: &str) -> Result<BatchHandle> {
        if lines.is_empty() {
            return Err(Error::invalid_request(
                "lines",
                "holds no request; a batch needs one at least",
            ));
        }
        let entries = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_slice::<Value>(line).map_err(|e| {
                    Error::invalid_request(
                        format!("lines[{i}]"),
                        format!("is not an entry `encode` made: {e}"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let body = wire::create_body(self.model.options.batch_body, entries, label);
        let size = serde_json::to_vec(&body).map_or(u64::MAX, |b| b.len() as u64);
        if size > INLINE_BATCH_BYTES {
            return Err(Error::invalid_request(
                "lines",
                format!(
                    "make a {size}-byte batch request; Gemini takes {INLINE_BATCH_BYTES} bytes \
                     at most (keep batches within `caps()`)"
                ),
            ));
        }
        let path = self.model.path("batchGenerateContent");
        let id = self
            .endpoint
            .post_decoded(&path, &body, &Signals::default(), wire::decode_created)
            .await?;
        Ok(BatchHandle {
            id,
            input_file: None,
        })
    }

    async fn status(&self, handle: &BatchHandle) -> Result<BatchStatus> {
        let path = wire::batch_path(&handle.id)?;
        let body = self.get(&path).await?;
        wire::decode_status(&body, &handle.id)
    }

    async fn results(&self, handle: &BatchHandle) -> Result<Vec<BatchOutcome>> {
        let path = wire::batch_path(&handle.id)?;
        let body = self.get(&path).await?;
        wire::decode_results(&body, &handle.id)
    }

    async fn cancel(&self, handle: &BatchHandle) -> Result<()> {
        let path = format!("{}:cancel", wire::batch_path(&handle.id)?);
        let empty = Value::Object(serde_json::Map::new());
        self.endpoint
            .post_json(&path, &empty, &Signals::default())
            .await
            .map(drop)
    }

    /// Reads the batch list (ten pages of 100 at most) for the batch whose display name
    /// is `label`; none under llmock's body (llmock keeps no display name).
    async fn find(&self, label: &str) -> Result<Option<BatchHandle>> {
        let mut token: Option<String> = None;
        for _ in 0..LIST_PAGES {
            let body = self
                .get(&wire::list_path(LIST_PAGE_SIZE, token.as_deref()))
                .await?;
            match wire::find_in_page(&body, label)? {
                wire::Page::Found(id) => {
                    return Ok(Some(BatchHandle {
                        id,
                        input_file: None,
                    }));
                }
                wire::Page::Next(next) => token = Some(next),
                wire::Page::End => return Ok(None),
            }
        }
        Ok(None)
    }
}
