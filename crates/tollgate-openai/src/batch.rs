//! The batch transport of an OpenAI-like provider whose preset names a batch API
//! ([`BatchApi`]: OpenAI's Batch API, Mistral's batch jobs): requests encoded by the
//! live chat transport's encoder into JSONL lines, uploaded as one input file,
//! polled, collected from the results files (each answer decoded by the live decoder,
//! each error read by the live error reader), cancelled, and found again by label.
//!
//! Every request (the upload, the create, a status read, a results file, a cancel, a
//! list page) goes through the model's live endpoint (`Endpoint::request`), sent and
//! read as a call is. It sends once per call and never waits or retries (the
//! `run --via batch` command does); every error names the model's provider, as the
//! pipeline's would. An input file whose batch could not be created is deleted.

#[cfg(test)]
mod tests;
mod upload;
mod wire;

use serde_json::json;
use tollgate::provider::batch::{
    BatchCaps, BatchHandle, BatchItem, BatchOutcome, BatchPhase, BatchStatus, BatchTransport,
};
use tollgate::provider::http::{Method, Payload};
use tollgate::provider::{Error, ModelEntry, Result};

use self::upload::multipart;
use self::wire::{FIND_PAGES, Job, Next, PURPOSE, file_id, label_of, outcome};
use crate::chat::OpenAiChat;
use crate::dialect::BatchApi;

/// The most bytes of a batch API's answer read (a results file above all) when the
/// catalog sets no `max_response_bytes` for the model: 1 GiB, far above any chat answer
/// (a results file holds up to 50,000 answers). Set `max_response_bytes` to read less,
/// or more.
const RESULTS_BYTE_LIMIT: u64 = 1 << 30;

/// What the batch API's answers are asked for as: JSON objects, and JSONL files.
const ACCEPT: &str = "application/json";

/// The batch transport of one chat model.
#[derive(Debug)]
pub(crate) struct OpenAiBatch {
    api: BatchApi,
    chat: OpenAiChat,
    read_limit: usize,
    model: String,
    provider: String,
    caps: BatchCaps,
}

impl OpenAiBatch {
    /// The transport of `model` speaking `api`, its requests encoded and its answers
    /// decoded by `chat` (the model's live chat transport), and sent through its
    /// endpoint, reading at most the model's `max_response_bytes` (default 1 GiB). Its
    /// caps are `api`'s (or the dialect's own), lowered by the catalog's
    /// `[models.ID.batch]` terms.
    pub(crate) fn new(api: BatchApi, chat: OpenAiChat, model: &ModelEntry) -> Self {
        let own = chat.dialect().batch_caps.unwrap_or_else(|| api.caps());
        let lower = |cap: u64, term: Option<u64>| term.map_or(cap, |t| t.min(cap));
        let max_requests = lower(own.max_requests as u64, model.batch.max_requests);
        let read_limit = model.max_response_bytes.unwrap_or(RESULTS_BYTE_LIMIT);
        OpenAiBatch {
            api,
            chat,
            read_limit: usize::try_from(read_limit).unwrap_or(usize::MAX),
            model: model.name.clone(),
            provider: model.provider.clone(),
            caps: BatchCaps {
                max_requests: usize::try_from(max_requests).unwrap_or(own.max_requests),
                max_bytes: lower(own.max_bytes, model.batch.max_bytes),
            },
        }
    }

    /// Sends one request of the batch API through the model's live endpoint, as a call
    /// is sent (its key and headers, an error answer read into the one verdict, the key
    /// cut out of what comes back): the answer's body, at most the read limit.
    async fn send(&self, method: Method, path: &str, payload: Payload<'_>) -> Result<Vec<u8>> {
        self.chat
            .endpoint()
            .request(method, path, payload, ACCEPT, self.read_limit)
            .await
    }

    /// `GET {base_url}{path}`: the body.
    async fn get(&self, path: &str) -> Result<Vec<u8>> {
        self.send(Method::GET, path, Payload::Empty).await
    }

    /// The batch (job) `id` names, as it is now.
    async fn job(&self, id: &str) -> Result<Job> {
        let path = format!("{}/{}", self.api.batches_path(), segment(id)?);
        self.api.read_job(&self.get(&path).await?)
    }

    async fn submit_lines(&self, lines: &[Vec<u8>], label: &str) -> Result<BatchHandle> {
        if lines.is_empty() {
            return Err(Error::invalid_request(
                "lines",
                "a batch needs one line at least",
            ));
        }
        let mut content = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            content.extend_from_slice(line);
            if !line.ends_with(b"\n") {
                content.push(b'\n');
            }
        }
        let (content_type, body) = multipart(PURPOSE, &file_name(label), &content);
        let upload = Payload::Bytes { content_type, body };
        let uploaded = self
            .send(Method::POST, self.api.files_path(), upload)
            .await?;
        let file = file_id(&uploaded)?;
        let create = self
            .api
            .create_body(&file, &self.model, self.chat.chat_path(), label);
        let created = match self
            .send(
                Method::POST,
                self.api.batches_path(),
                Payload::Json(&create),
            )
            .await
        {
            Ok(created) => created,
            Err(e) => {
                self.delete_file(&file).await;
                return Err(e);
            }
        };
        let job = self.api.read_job(&created)?;
        Ok(BatchHandle {
            id: job.id,
            input_file: Some(file),
        })
    }

    /// Deletes uploaded file `id`, whose batch could not be created, so that a failed
    /// submission leaves nothing behind (the caller that resubmits uploads again, and
    /// counts no batch of it). Best effort: a delete that fails is logged, and the
    /// create's error is what the caller sees.
    async fn delete_file(&self, id: &str) {
        let deleted = match segment(id) {
            Ok(id) => {
                let path = format!("{}/{id}", self.api.files_path());
                self.send(Method::DELETE, &path, Payload::Empty).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = deleted {
            tracing::warn!(
                provider = %self.provider,
                file = id,
                error = %e,
                "the input file of a batch that was not created could not be deleted"
            );
        }
    }

    async fn collect(&self, handle: &BatchHandle) -> Result<Vec<BatchOutcome>> {
        let job = self.job(&handle.id).await?;
        if job.phase != BatchPhase::Ended {
            return Err(Error::invalid_request(
                "batch",
                format!(
                    "batch `{}` has not ended ({:?}): its results are collected once it has",
                    handle.id, job.phase
                ),
            ));
        }
        let decode = |body: &[u8]| self.chat.decode_answer(body);
        let read_error = self.chat.dialect().error;
        let mut outcomes = Vec::new();
        for file in [&job.output_file, &job.error_file].into_iter().flatten() {
            let path = format!("{}/{}/content", self.api.files_path(), segment(file)?);
            let content = self.get(&path).await?;
            outcomes.extend(
                content
                    .split(|b| *b == b'\n')
                    .filter(|line| !line.trim_ascii().is_empty())
                    .filter_map(|line| outcome(line, &job.id, &decode, read_error)),
            );
        }
        let named = |o: BatchOutcome| BatchOutcome {
            custom_id: o.custom_id,
            result: o.result.map_err(|e| e.with_provider(&self.provider)),
        };
        Ok(outcomes.into_iter().map(named).collect())
    }

    async fn find_label(&self, label: &str) -> Result<Option<BatchHandle>> {
        let mut at: Option<Next> = None;
        for _ in 0..FIND_PAGES {
            let path = self.api.list_path(at.as_ref());
            let listed = self.api.read_page(&self.get(&path).await?, at.as_ref())?;
            if let Some(found) = listed.jobs.into_iter().find(|j| label_of(j) == Some(label)) {
                return Ok(Some(self.api.job(found)?.handle()));
            }
            match listed.next {
                Some(next) => at = Some(next),
                None => break,
            }
        }
        Ok(None)
    }
}

#[tollgate::provider::async_trait]
impl BatchTransport for OpenAiBatch {
    fn caps(&self) -> BatchCaps {
        self.caps
    }

    /// The request's live Chat Completions body (never streamed) in the API's line, and
    /// a line break: the bytes are the line's whole share of the input file.
    fn encode(&self, item: &BatchItem) -> Result<Vec<u8>> {
        if item.custom_id.is_empty() {
            return Err(Error::invalid_request(
                "custom_id",
                "a batch line needs a non-empty custom_id",
            ));
        }
        let body = self
            .chat
            .batch_body(&item.request)
            .map_err(|e| e.with_provider(&self.provider))?;
        let line = self.api.line(&item.custom_id, self.chat.chat_path(), body);
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        Ok(bytes)
    }

    async fn submit(&self, lines: &[Vec<u8>], label: &str) -> Result<BatchHandle> {
        self.submit_lines(lines, label)
            .await
            .map_err(|e| e.with_provider(&self.provider))
    }

    async fn status(&self, handle: &BatchHandle) -> Result<BatchStatus> {
        let job = self
            .job(&handle.id)
            .await
            .map_err(|e| e.with_provider(&self.provider))?;
        let mut status = job.status();
        status.failure = status.failure.map(|e| e.with_provider(&self.provider));
        Ok(status)
    }

    async fn results(&self, handle: &BatchHandle) -> Result<Vec<BatchOutcome>> {
        self.collect(handle)
            .await
            .map_err(|e| e.with_provider(&self.provider))
    }

    async fn cancel(&self, handle: &BatchHandle) -> Result<()> {
        let path = format!(
            "{}/{}/cancel",
            self.api.batches_path(),
            segment(&handle.id)?
        );
        self.send(Method::POST, &path, Payload::Json(&json!({})))
            .await
            .map(drop)
            .map_err(|e| e.with_provider(&self.provider))
    }

    /// The newest batch whose metadata holds `label`, among the newest 500 listed.
    async fn find(&self, label: &str) -> Result<Option<BatchHandle>> {
        self.find_label(label)
            .await
            .map_err(|e| e.with_provider(&self.provider))
    }
}

/// An id as one path segment: refused unless it is letters, digits, `-`, `_` and `.`
/// (every id these APIs hand out is), so that a stored handle cannot reach another path.
fn segment(id: &str) -> Result<&str> {
    let fits = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if fits {
        Ok(id)
    } else {
        Err(Error::invalid_request(
            "batch id",
            format!("`{id}` is not an id this batch API hands out"),
        ))
    }
}

/// The uploaded file's name: `tollgate-` and the label's letters, digits, `-` and `_`
/// (others as `_`, 64 at most), `.jsonl`.
fn file_name(label: &str) -> String {
    let kept: String = label
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("tollgate-{kept}.jsonl")
}
