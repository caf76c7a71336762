//! A provider's batch API (OpenAI's Batch API, Anthropic's Message Batches, Gemini's
//! batch mode, Mistral's batch jobs): requests queued for hours at about half the price.
//!
//! A provider crate implements [`BatchTransport`] for a catalog chat model and hands it
//! out from [`ProviderTransports::batch`](super::ProviderTransports::batch); the
//! `tollgate run --via batch` command splits a run into batches within
//! [`BatchCaps`], reserves each batch on the model's queue limits
//! ([`crate::limit::QueueLedger`]), submits, polls, collects and resumes. A transport
//! only speaks the wire: it never waits, retries or keeps state between calls, so that
//! everything a resumed run needs is in the [`BatchHandle`] the command stores.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::request::LlmRequest;
use crate::response::LlmResponse;

/// One request of a batch: the caller's id for it and what it asks.
#[derive(Debug, Clone)]
pub struct BatchItem {
    /// The caller's id, unique within a batch; the provider's answer line carries it back.
    pub custom_id: String,
    /// The request, as a live call would send it.
    pub request: LlmRequest,
}

/// What one batch of a provider's batch API may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchCaps {
    /// Requests per batch, at most (OpenAI 50,000; Anthropic 100,000).
    pub max_requests: usize,
    /// Bytes of encoded lines per batch, at most (OpenAI's 200 MB input file; Anthropic's
    /// 256 MB request; the inline request size for an API that takes them inline).
    pub max_bytes: u64,
}

/// A submitted batch as the provider names it: everything a later process needs to poll,
/// collect or cancel it. Kept by the caller (the command writes it beside its output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchHandle {
    /// The provider's batch id (`batch_…`, `msgbatch_…`, `batches/…`, a job id).
    pub id: String,
    /// The input file the batch was made from, where the API takes a file (deleted or
    /// left to expire by the provider; kept here for the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_file: Option<String>,
}

/// Where a batch is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchPhase {
    /// Accepted, waiting to run (OpenAI `validating`, Gemini `PENDING`, Mistral `QUEUED`).
    Queued,
    /// Running (OpenAI `in_progress` and `finalizing`, Anthropic `in_progress`).
    Running,
    /// Being cancelled (OpenAI `cancelling`, Anthropic `canceling`).
    Cancelling,
    /// Over: its results, whatever they are, can be collected.
    Ended,
}

/// How many of a batch's requests are where, as the provider counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BatchCounts {
    /// Requests in the batch.
    pub total: u64,
    /// Requests that ended with an answer.
    pub succeeded: u64,
    /// Requests that ended with an error, expired or were cancelled.
    pub failed: u64,
}

/// What [`BatchTransport::status`] says of a batch.
#[derive(Debug)]
pub struct BatchStatus {
    /// Where it is.
    pub phase: BatchPhase,
    /// Its requests' counts, where the provider gives them.
    pub counts: BatchCounts,
    /// Why the batch as a whole failed (rejected at validation, over a queue limit,
    /// expired before anything ran): each of its requests ends with this error. `None`
    /// while it runs and when it ended with per-request results.
    pub failure: Option<Error>,
}

/// One request's end, as read from a batch's results.
#[derive(Debug)]
pub struct BatchOutcome {
    /// The request's [`BatchItem::custom_id`].
    pub custom_id: String,
    /// Its answer, or its error typed as a live call's would be
    /// ([`Error::BatchLineUnfinished`] for a request that expired or was cancelled).
    pub result: Result<LlmResponse>,
}

/// A provider's batch API for one catalog chat model. Implementations send once per
/// call and report failures by type; they never retry, sleep or pace (the caller does).
#[async_trait::async_trait]
pub trait BatchTransport: Send + Sync + Debug {
    /// What one batch may hold.
    fn caps(&self) -> BatchCaps;

    /// The request as one line (or inline entry) of a batch, in the provider's format,
    /// or the typed reason the batch API cannot carry it (a streamed request, a setting
    /// the API refuses). The bytes count towards [`BatchCaps::max_bytes`].
    fn encode(&self, item: &BatchItem) -> Result<Vec<u8>>;

    /// Uploads (where the API takes a file) and creates one batch of `lines` from
    /// [`BatchTransport::encode`], labelled `label` where the API keeps a label (batch
    /// metadata, a display name) so that [`BatchTransport::find`] can recognise it.
    async fn submit(&self, lines: &[Vec<u8>], label: &str) -> Result<BatchHandle>;

    /// Where the batch is.
    async fn status(&self, handle: &BatchHandle) -> Result<BatchStatus>;

    /// The results of an ended batch, one per request that has one (in any order).
    async fn results(&self, handle: &BatchHandle) -> Result<Vec<BatchOutcome>>;

    /// Asks the provider to cancel the batch (it ends later, [`BatchPhase::Ended`]).
    async fn cancel(&self, handle: &BatchHandle) -> Result<()>;

    /// The batch submitted earlier under `label`, if the API keeps labels and lists
    /// batches: how a run that stopped between submitting and recording a batch finds it
    /// instead of submitting it twice. `None` when there is none or the API cannot tell.
    async fn find(&self, _label: &str) -> Result<Option<BatchHandle>> {
        Ok(None)
    }
}
