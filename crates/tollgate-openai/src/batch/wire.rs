//! The batch APIs' JSON, no I/O: the line a request becomes, the create body, a batch
//! (OpenAI) or job (Mistral) object read into one neutral [`Job`], a list page, and a
//! results line read into a [`BatchOutcome`].
//!
//! Sources: OpenAI's Batch API reference (the batch object, its `errors.data[].code`,
//! the request output `{id, custom_id, response: {status_code, request_id, body},
//! error: {code, message}}` with codes `batch_expired`, `batch_cancelled`,
//! `request_timeout`); Mistral's batch docs and its client's `BatchJobOut` (statuses
//! `QUEUED` … `CANCELLED`, `*_requests` counts, `errors: [{message, count}]`,
//! `output_file` / `error_file` ids: llmock sends them as file objects, read too);
//! Groq's batch guide (console.groq.com/docs/batch: OpenAI's objects under
//! `/openai/v1`, but `errors` a bare `[{code, message, param, line}]` list and the list
//! paged by `paging.next_cursor` and `?cursor=`; llmock pages Groq's as OpenAI's).

use serde::Deserialize;
use serde_json::{Value, json};
use tollgate::provider::batch::BatchStatus;
use tollgate::provider::batch::{BatchCaps, BatchCounts, BatchHandle, BatchOutcome, BatchPhase};
use tollgate::provider::{Error, LlmResponse, ProviderError, Result, WireError, malformed};

use crate::dialect::BatchApi;

/// The metadata key a batch's label is kept under (what `find` matches).
pub(crate) const LABEL_KEY: &str = "tollgate_label";

/// The `purpose` of an uploaded batch input file, in both APIs.
pub(crate) const PURPOSE: &str = "batch";

/// The pages of the batch list `find` reads at most (100 batches each), newest first.
pub(crate) const FIND_PAGES: usize = 5;

/// A batch as either API describes it, in the transport's terms.
#[derive(Debug)]
pub(crate) struct Job {
    /// The batch's (job's) id.
    pub(crate) id: String,
    /// Where it is.
    pub(crate) phase: BatchPhase,
    /// Its requests' counts.
    pub(crate) counts: BatchCounts,
    /// Why it failed as a whole, if it did.
    pub(crate) failure: Option<Error>,
    /// The file of its answers.
    pub(crate) output_file: Option<String>,
    /// The file of its failed requests.
    pub(crate) error_file: Option<String>,
    /// Its input file.
    pub(crate) input_file: Option<String>,
}

impl Job {
    /// What `status` says of it.
    pub(crate) fn status(self) -> BatchStatus {
        BatchStatus {
            phase: self.phase,
            counts: self.counts,
            failure: self.failure,
        }
    }

    /// The handle that names it.
    pub(crate) fn handle(&self) -> BatchHandle {
        BatchHandle {
            id: self.id.clone(),
            input_file: self.input_file.clone(),
        }
    }
}

/// One page of the batch list: its batches (kept raw until one's label matches) and
/// where the next page is, if one may follow.
#[derive(Debug)]
pub(crate) struct Page {
    /// The batches on the page, newest first.
    pub(crate) jobs: Vec<Value>,
    /// The next page.
    pub(crate) next: Option<Next>,
}

/// Where the next page of the batch list is, in each API's paging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// OpenAI's: the batches after this one (`after`, the page's `last_id`).
    After(String),
    /// Groq's: the page's `paging.next_cursor` (`cursor`).
    Cursor(String),
    /// Mistral's: the page of this number (0 first).
    Page(usize),
}

impl BatchApi {
    /// Where input files are uploaded and read.
    pub(crate) fn files_path(self) -> &'static str {
        "/v1/files"
    }

    /// Where batches (jobs) are created, read, listed and cancelled.
    pub(crate) fn batches_path(self) -> &'static str {
        match self {
            BatchApi::OpenAi => "/v1/batches",
            BatchApi::MistralJobs => "/v1/batch/jobs",
        }
    }

    /// What one batch may hold, as the API documents it: OpenAI's 50,000 requests and
    /// 200 MB input file (Batch API reference); Mistral's 100,000 requests and 512 MB
    /// file ("Known limitations": the batch guide's "up to 1M requests" is the larger,
    /// and the smaller is taken; 512 MB read as 512,000,000 bytes, the smaller reading).
    /// A preset whose provider documents other caps names them in
    /// [`Dialect::batch_caps`](crate::preset::Dialect::batch_caps).
    pub fn caps(self) -> BatchCaps {
        match self {
            BatchApi::OpenAi => BatchCaps {
                max_requests: 50_000,
                max_bytes: 209_715_200,
            },
            BatchApi::MistralJobs => BatchCaps {
                max_requests: 100_000,
                max_bytes: 512_000_000,
            },
        }
    }

    /// The line of request `custom_id` whose Chat Completions body (at `url`) is `body`:
    /// OpenAI's `{custom_id, method, url, body}`; Mistral's `{custom_id, body}` (the job
    /// names the endpoint and model; the body keeps its `model`, which Mistral allows).
    pub(crate) fn line(self, custom_id: &str, url: &str, body: Value) -> Value {
        match self {
            BatchApi::OpenAi => {
                json!({"custom_id": custom_id, "method": "POST", "url": url, "body": body})
            }
            BatchApi::MistralJobs => json!({"custom_id": custom_id, "body": body}),
        }
    }

    /// The body that creates a batch of input file `file_id` for `model` at `url`,
    /// labelled `label` in its metadata.
    pub(crate) fn create_body(self, file_id: &str, model: &str, url: &str, label: &str) -> Value {
        let metadata = json!({ LABEL_KEY: label });
        match self {
            BatchApi::OpenAi => json!({
                "input_file_id": file_id,
                "endpoint": url,
                "completion_window": "24h",
                "metadata": metadata,
            }),
            BatchApi::MistralJobs => json!({
                "input_files": [file_id],
                "model": model,
                "endpoint": url,
                "metadata": metadata,
            }),
        }
    }

    /// The path of the list page `next` names (the first page: `None`).
    pub(crate) fn list_path(self, next: Option<&Next>) -> String {
        let path = self.batches_path();
        match (self, next) {
            (BatchApi::OpenAi, Some(Next::After(id))) => {
                format!("{path}?limit=100&after={}", query_value(id))
            }
            (BatchApi::OpenAi, Some(Next::Cursor(cursor))) => {
                format!("{path}?cursor={}", query_value(cursor))
            }
            (BatchApi::OpenAi, _) => format!("{path}?limit=100"),
            (BatchApi::MistralJobs, Some(Next::Page(page))) => {
                format!("{path}?page={page}&page_size=100")
            }
            (BatchApi::MistralJobs, _) => format!("{path}?page=0&page_size=100"),
        }
    }

    /// A batch (job) object.
    pub(crate) fn read_job(self, bytes: &[u8]) -> Result<Job> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| malformed(e, bytes))?;
        self.job(value)
            .map_err(|e| tollgate::provider::keep_raw(e, bytes))
    }

    /// A batch (job) object, already parsed.
    pub(crate) fn job(self, value: Value) -> Result<Job> {
        match self {
            BatchApi::OpenAi => openai_job(value),
            BatchApi::MistralJobs => mistral_job(value),
        }
    }

    /// A page of the batch list, read at `at` (the first page: `None`): its batches, and
    /// the next page if one may follow (OpenAI's `has_more` and `last_id`, Groq's
    /// `paging.next_cursor`, a full page of Mistral's).
    pub(crate) fn read_page(self, bytes: &[u8], at: Option<&Next>) -> Result<Page> {
        #[derive(Deserialize)]
        struct List {
            #[serde(default)]
            data: Vec<Value>,
            #[serde(default)]
            has_more: Option<bool>,
            #[serde(default)]
            last_id: Option<String>,
            #[serde(default)]
            paging: Option<Paging>,
        }
        #[derive(Deserialize)]
        struct Paging {
            #[serde(default)]
            next_cursor: Option<String>,
        }
        let list: List = serde_json::from_slice(bytes).map_err(|e| malformed(e, bytes))?;
        let cursor = list
            .paging
            .and_then(|p| p.next_cursor)
            .filter(|c| !c.is_empty());
        let next = match self {
            BatchApi::OpenAi => match (cursor, list.has_more, list.last_id) {
                (Some(cursor), _, _) => Some(Next::Cursor(cursor)),
                (None, Some(true), Some(last)) => Some(Next::After(last)),
                _ => None,
            },
            BatchApi::MistralJobs => {
                let page = match at {
                    Some(Next::Page(page)) => *page,
                    _ => 0,
                };
                (list.data.len() >= 100).then_some(Next::Page(page + 1))
            }
        };
        Ok(Page {
            jobs: list.data,
            next,
        })
    }
}

/// `value` as one query-string value: letters, digits and `-_.~` as they are, every
/// other byte as `%XX` (a list cursor may hold `=`, `+` or `/`).
fn query_value(value: &str) -> String {
    use std::fmt::Write as _;
    value.bytes().fold(String::new(), |mut out, b| {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
        out
    })
}

/// The label a listed batch was submitted under.
pub(crate) fn label_of(job: &Value) -> Option<&str> {
    job.get("metadata")?.get(LABEL_KEY)?.as_str()
}

/// The id of an uploaded file (`{"id": …}`).
pub(crate) fn file_id(bytes: &[u8]) -> Result<String> {
    #[derive(Deserialize)]
    struct File {
        id: String,
    }
    serde_json::from_slice::<File>(bytes)
        .map(|f| f.id)
        .map_err(|e| malformed(format!("an uploaded file without its id ({e})"), bytes))
}

/// One `errors` entry: OpenAI's `{code, message, line}`, Mistral's `{message, count}`.
#[derive(Debug, Default, Deserialize)]
struct JobError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    line: Option<u64>,
}

fn openai_job(value: Value) -> Result<Job> {
    #[derive(Deserialize)]
    struct Batch {
        id: String,
        status: String,
        #[serde(default)]
        request_counts: Option<Counts>,
        #[serde(default)]
        errors: Option<Errors>,
        #[serde(default)]
        output_file_id: Option<String>,
        #[serde(default)]
        error_file_id: Option<String>,
        #[serde(default)]
        input_file_id: Option<String>,
    }
    #[derive(Default, Deserialize)]
    struct Counts {
        #[serde(default)]
        total: Option<u64>,
        #[serde(default)]
        completed: Option<u64>,
        #[serde(default)]
        failed: Option<u64>,
    }
    /// OpenAI's `{object: "list", data: [...]}`, or Groq's bare list.
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Errors {
        Listed {
            #[serde(default)]
            data: Vec<JobError>,
        },
        Bare(Vec<JobError>),
    }
    impl Errors {
        fn first(self) -> Option<JobError> {
            match self {
                Errors::Listed { data } | Errors::Bare(data) => data.into_iter().next(),
            }
        }
    }
    let batch: Batch = serde_json::from_value(value).map_err(|e| malformed(e, b""))?;
    let phase = match batch.status.as_str() {
        "validating" => BatchPhase::Queued,
        "in_progress" | "finalizing" => BatchPhase::Running,
        "cancelling" => BatchPhase::Cancelling,
        "completed" | "expired" | "cancelled" | "failed" => BatchPhase::Ended,
        other => return Err(malformed(format!("a batch status `{other}`"), b"")),
    };
    let failure = (batch.status == "failed").then(|| {
        let first = batch.errors.and_then(Errors::first).unwrap_or_default();
        openai_failure(first)
    });
    let counts = batch.request_counts.unwrap_or_default();
    Ok(Job {
        id: batch.id,
        phase,
        counts: BatchCounts {
            total: counts.total.unwrap_or(0),
            succeeded: counts.completed.unwrap_or(0),
            failed: counts.failed.unwrap_or(0),
        },
        failure,
        output_file: batch.output_file_id,
        error_file: batch.error_file_id,
        input_file: batch.input_file_id,
    })
}

/// Why an OpenAI batch failed as a whole: its enqueued-token cap reached
/// (`token_limit_exceeded`) is a rate limit (submit it again later); anything else (a
/// file that failed validation) a request error naming the code, line and message.
fn openai_failure(error: JobError) -> Error {
    let code = error.code.unwrap_or_default();
    if code == "token_limit_exceeded" {
        return ProviderError::RateLimited { retry_after: None }.into();
    }
    let mut message = error.message.unwrap_or_else(|| "the batch failed".into());
    if let Some(line) = error.line {
        message = format!("line {line}: {message}");
    }
    WireError {
        status: 400,
        code,
        message,
        ..WireError::default()
    }
    .verdict()
}

fn mistral_job(value: Value) -> Result<Job> {
    #[derive(Deserialize)]
    struct MistralJob {
        id: String,
        status: String,
        #[serde(default)]
        total_requests: Option<u64>,
        #[serde(default)]
        succeeded_requests: Option<u64>,
        #[serde(default)]
        failed_requests: Option<u64>,
        #[serde(default)]
        errors: Option<Vec<JobError>>,
        #[serde(default)]
        output_file: Option<FileRef>,
        #[serde(default)]
        error_file: Option<FileRef>,
        #[serde(default)]
        input_files: Option<Vec<String>>,
    }
    /// A file named by its id (Mistral's API) or as a file object (llmock's).
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum FileRef {
        Id(String),
        Object { id: String },
    }
    let id = |file: Option<FileRef>| match file? {
        FileRef::Id(id) | FileRef::Object { id } => Some(id),
    };
    let job: MistralJob = serde_json::from_value(value).map_err(|e| malformed(e, b""))?;
    let phase = match job.status.as_str() {
        "QUEUED" => BatchPhase::Queued,
        "RUNNING" => BatchPhase::Running,
        "CANCELLATION_REQUESTED" => BatchPhase::Cancelling,
        "SUCCESS" | "FAILED" | "TIMEOUT_EXCEEDED" | "CANCELLED" => BatchPhase::Ended,
        other => return Err(malformed(format!("a batch job status `{other}`"), b"")),
    };
    let (output_file, error_file) = (id(job.output_file), id(job.error_file));
    // A failed job with results files failed line by line (each line says why); one
    // without failed as a whole.
    let failure =
        (job.status == "FAILED" && output_file.is_none() && error_file.is_none()).then(|| {
            let first = job.errors.into_iter().flatten().next().unwrap_or_default();
            WireError {
                status: 400,
                message: first
                    .message
                    .unwrap_or_else(|| "the batch job failed".into()),
                ..WireError::default()
            }
            .verdict()
        });
    Ok(Job {
        id: job.id,
        phase,
        counts: BatchCounts {
            total: job.total_requests.unwrap_or(0),
            succeeded: job.succeeded_requests.unwrap_or(0),
            failed: job.failed_requests.unwrap_or(0),
        },
        failure,
        output_file,
        error_file,
        input_file: job.input_files.into_iter().flatten().next(),
    })
}

/// One results line: its request's id and its end, typed as a live call's would be:
/// an answer (status 2xx) decoded by `decode`, an HTTP error read by `read_error` into
/// the one verdict, a request the batch never ran ([`Error::BatchLineUnfinished`] of
/// batch `batch_id`), a timeout. `None` for a line that names no request (blank, not
/// JSON, no `custom_id`): nothing can be said of which request it was.
pub(crate) fn outcome(
    line: &[u8],
    batch_id: &str,
    decode: &dyn Fn(&[u8]) -> Result<LlmResponse>,
    read_error: fn(u16, &[u8]) -> WireError,
) -> Option<BatchOutcome> {
    #[derive(Deserialize)]
    struct Line {
        #[serde(default)]
        custom_id: Option<String>,
        #[serde(default)]
        response: Option<Response>,
        #[serde(default)]
        error: Option<JobError>,
    }
    #[derive(Deserialize)]
    struct Response {
        #[serde(default)]
        status_code: Option<u16>,
        #[serde(default)]
        body: Value,
    }
    let parsed: Line = match serde_json::from_slice(line) {
        Ok(parsed) => parsed,
        Err(e) => {
            tracing::warn!(batch_id, error = %e, "a batch results line that is not a result");
            return None;
        }
    };
    let Some(custom_id) = parsed.custom_id else {
        tracing::warn!(batch_id, "a batch results line without its custom_id");
        return None;
    };
    let result = match (parsed.error, parsed.response) {
        (Some(error), _) => Err(line_error(error, batch_id)),
        (None, Some(response)) => {
            let body = match response.body {
                Value::String(text) => text.into_bytes(),
                other => other.to_string().into_bytes(),
            };
            match response.status_code.unwrap_or(200) {
                200..=299 => decode(&body),
                status => Err(read_error(status, &body).verdict()),
            }
        }
        (None, None) => Err(malformed(
            "a batch results line with neither a response nor an error",
            line,
        )),
    };
    Some(BatchOutcome { custom_id, result })
}

/// A line's own error (no HTTP answer): `batch_expired` and `batch_cancelled` are
/// [`Error::BatchLineUnfinished`], `request_timeout` a timeout; another code is a
/// request error naming it (the line could not be run as written).
fn line_error(error: JobError, batch_id: &str) -> Error {
    let unfinished = |how: &str| Error::BatchLineUnfinished {
        batch_id: batch_id.to_owned(),
        how: how.to_owned(),
    };
    let code = error.code.unwrap_or_default();
    match code.as_str() {
        "batch_expired" => unfinished("expired"),
        "batch_cancelled" => unfinished("was cancelled"),
        "request_timeout" => ProviderError::Timeout { after: None }.into(),
        _ => WireError {
            status: 400,
            code,
            message: error.message.unwrap_or_default(),
            ..WireError::default()
        }
        .verdict(),
    }
}
