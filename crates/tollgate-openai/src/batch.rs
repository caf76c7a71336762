//! The batch transport of an OpenAI-like provider whose preset names a batch API
//! ([`BatchApi`]: OpenAI's Batch API, Mistral's batch jobs): requests encoded by the
//! live chat transport's encoder into JSONL lines, uploaded as one input file,
//! polled, collected from the results files (each answer decoded by the live decoder,
//! each error read by the live error reader), cancelled, and found again by label.
//!
//! It sends once per call and never waits or retries (the `run --via batch` command
//! does); every error names the model's provider, as the pipeline's would.

mod http;
#[cfg(test)]
mod tests;
mod wire;

use serde_json::json;
use tollgate::provider::batch::{
    BatchCaps, BatchHandle, BatchItem, BatchOutcome, BatchPhase, BatchStatus, BatchTransport,
};
use tollgate::provider::{Error, ModelEntry, Result};

pub(crate) use self::http::BatchHttp;
use self::wire::{FIND_PAGES, Job, PURPOSE, file_id, label_of, outcome};
use crate::chat::OpenAiChat;
use crate::dialect::BatchApi;

/// The batch transport of one chat model.
#[derive(Debug)]
pub(crate) struct OpenAiBatch {
    api: BatchApi,
    chat: OpenAiChat,
    http: BatchHttp,
    model: String,
    provider: String,
    caps: BatchCaps,
}

impl OpenAiBatch {
    /// The transport of `model` speaking `api`, its requests encoded and its answers
    /// decoded by `chat` (the model's live chat transport), its HTTP through `http`.
    /// Its caps are `api`'s, lowered by the catalog's `[models.ID.batch]` terms.
    pub(crate) fn new(
        api: BatchApi,
        chat: OpenAiChat,
        http: BatchHttp,
        model: &ModelEntry,
    ) -> Self {
        let own = api.caps();
        let lower = |cap: u64, term: Option<u64>| term.map_or(cap, |t| t.min(cap));
        let max_requests = lower(own.max_requests as u64, model.batch.max_requests);
        OpenAiBatch {
            api,
            chat,
            http,
            model: model.name.clone(),
            provider: model.provider.clone(),
            caps: BatchCaps {
                max_requests: usize::try_from(max_requests).unwrap_or(own.max_requests),
                max_bytes: lower(own.max_bytes, model.batch.max_bytes),
            },
        }
    }

    /// The batch (job) `id` names, as it is now.
    async fn job(&self, id: &str) -> Result<Job> {
        let path = format!("{}/{}", self.api.batches_path(), segment(id)?);
        self.api.read_job(&self.http.get(&path).await?)
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
        let upload = self
            .http
            .upload(self.api.files_path(), PURPOSE, &file_name(label), &content)
            .await?;
        let file = file_id(&upload)?;
        let create = self
            .api
            .create_body(&file, &self.model, self.chat.chat_path(), label);
        let job = self
            .api
            .read_job(&self.http.post(self.api.batches_path(), &create).await?)?;
        Ok(BatchHandle {
            id: job.id,
            input_file: Some(file),
        })
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
        let read_error = self.http.read_error();
        let mut outcomes = Vec::new();
        for file in [&job.output_file, &job.error_file].into_iter().flatten() {
            let path = format!("{}/{}/content", self.api.files_path(), segment(file)?);
            let content = self.http.get(&path).await?;
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
        let mut after: Option<String> = None;
        for page in 0..FIND_PAGES {
            let path = self.api.list_path(page, after.as_deref());
            let listed = self.api.read_page(&self.http.get(&path).await?)?;
            if let Some(found) = listed.jobs.into_iter().find(|j| label_of(j) == Some(label)) {
                return Ok(Some(self.api.job(found)?.handle()));
            }
            if !listed.more {
                break;
            }
            after = listed.after;
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
        self.http
            .post(&path, &json!({}))
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
