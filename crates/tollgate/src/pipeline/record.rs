//! Recording: a [`CallRecord`] per call and an [`AttemptRecord`] per attempt, to a
//! [`Recorder`]; and `tracing` spans with the OpenTelemetry GenAI attribute names.
//! Records hold no request text and no secrets.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::error::Error;
use crate::response::LlmResponse;
use crate::usage::Usage;

/// How a call or attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// Answered.
    Success,
    /// Failed with this error kind (e.g. `rate_limited`, `quota_exhausted`).
    Failed {
        /// The error's kind, a stable snake_case name.
        error: String,
        /// The HTTP status, where there is one.
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
}

impl Outcome {
    /// A failure, named by [`Error::kind`] with the HTTP status behind it, if any.
    pub(crate) fn of(error: &Error) -> Self {
        Outcome::Failed {
            error: error.kind().into(),
            status: error.status(),
        }
    }

    /// How an attempt that answered is recorded: a refused answer as `refusal` (the
    /// kind of [`Error::ProviderRefusal`]), so the records count refusals whether or not
    /// the caller takes them as answers; any other answer as [`Outcome::Success`].
    pub(crate) fn of_answer(response: &LlmResponse) -> Self {
        if response.stop_reason().is_refusal() {
            Outcome::Failed {
                error: "refusal".into(),
                status: None,
            }
        } else {
            Outcome::Success
        }
    }
}

/// One attempt (one send to the provider).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptRecord {
    /// The call this attempt belongs to.
    pub call_id: u64,
    /// The job the call was made for, if any (a gateway's `key:<id>`).
    pub job_id: Option<String>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Catalog model id.
    pub model_id: String,
    /// The deployment it was sent to, when the model has several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// Tokens the provider reported (zero for most failures).
    pub usage: Usage,
    /// From send to answer (or failure).
    pub latency: Duration,
    /// How long the pipeline waits before the next attempt, if it retries.
    pub retry_in: Option<Duration>,
}

/// One call, with all its attempts folded in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    /// A number unique within the process.
    pub call_id: u64,
    /// The job the call was made for, if any.
    pub job_id: Option<String>,
    /// Catalog model id.
    pub model_id: String,
    /// The provider's name for the model.
    pub model_name: String,
    /// Provider key.
    pub provider: String,
    /// `chat`, `chat_stream`, `embeddings` or `decision`.
    pub operation: String,
    /// Attempts made (sends), re-runs for truncation and corrections included.
    pub attempts: u32,
    /// Tokens over all attempts.
    pub usage: Usage,
    /// Cost over all attempts in USD, from catalog prices (`None` when unpriced).
    pub cost_usd: Option<f64>,
    /// From the call to its answer, waiting for the limiter included.
    pub latency: Duration,
    /// How long its attempts waited for their reservations, in all.
    pub queue_wait: Duration,
    /// Time to the first streamed event (streams only).
    pub time_to_first_token: Option<Duration>,
    /// How it ended.
    pub outcome: Outcome,
}

/// Where records go.
pub trait Recorder: Send + Sync + fmt::Debug {
    /// A call finished.
    fn record_call(&self, record: &CallRecord);
    /// An attempt finished.
    fn record_attempt(&self, record: &AttemptRecord);
}

/// Discards records (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRecorder;

impl Recorder for NoRecorder {
    fn record_call(&self, _: &CallRecord) {}
    fn record_attempt(&self, _: &AttemptRecord) {}
}

/// Keeps records in memory, for tests and dashboards.
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    calls: Mutex<Vec<CallRecord>>,
    attempts: Mutex<Vec<AttemptRecord>>,
}

impl MemoryRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every attempt so far.
    pub fn attempts(&self) -> Vec<AttemptRecord> {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Recorder for MemoryRecorder {
    fn record_call(&self, record: &CallRecord) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
    }
    fn record_attempt(&self, record: &AttemptRecord) {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
    }
}

/// Appends one JSON object per line: `{"type":"call",...}` or `{"type":"attempt",...}`.
pub struct JsonLinesRecorder {
    out: Mutex<Box<dyn Write + Send>>,
}

impl fmt::Debug for JsonLinesRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonLinesRecorder").finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct Line<'a, T> {
    r#type: &'a str,
    #[serde(flatten)]
    record: &'a T,
}

impl JsonLinesRecorder {
    /// Writes to `out`.
    pub fn new(out: impl Write + Send + 'static) -> Self {
        JsonLinesRecorder {
            out: Mutex::new(Box::new(out)),
        }
    }

    /// Appends to the file at `path` (created if missing).
    pub fn append_to(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self::new(std::io::LineWriter::new(file)))
    }

    fn write<T: Serialize>(&self, kind: &str, record: &T) {
        let Ok(mut line) = serde_json::to_string(&Line {
            r#type: kind,
            record,
        }) else {
            return;
        };
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "could not write a call record");
        }
    }
}

impl Recorder for JsonLinesRecorder {
    fn record_call(&self, record: &CallRecord) {
        self.write("call", record);
    }
    fn record_attempt(&self, record: &AttemptRecord) {
        self.write("attempt", record);
    }
}
