//! The command's recorder: keeps each call's records by job (one job per batch request,
//! so a request's attempts, usage and cost can be written on its output line), counts
//! 429s, and, with `--record FILE`, appends every record as a JSON line with the wall
//! time it was made (`at_ms`, Unix milliseconds), which `tollgate usage` reads.

use std::collections::HashMap;
use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

use serde::Serialize;
use tollgate::clock;
use tollgate::pipeline::{AttemptRecord, CallRecord, Outcome, Recorder};

/// Records as the command keeps them.
#[derive(Debug, Default)]
pub(crate) struct CliRecorder {
    by_job: Mutex<HashMap<String, Vec<CallRecord>>>,
    rate_limited: AtomicU64,
    overloaded: AtomicU64,
    retries: AtomicU64,
    file: Option<Mutex<LineWriter<File>>>,
}

#[derive(Serialize)]
struct Line<'a, T> {
    r#type: &'a str,
    at_ms: u64,
    #[serde(flatten)]
    record: &'a T,
}

impl CliRecorder {
    /// Also appends every record to `path` (created if missing).
    pub(crate) fn with_file(path: Option<&Path>) -> std::io::Result<Self> {
        let file = match path {
            Some(p) => Some(Mutex::new(LineWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ))),
            None => None,
        };
        Ok(CliRecorder {
            file,
            ..Self::default()
        })
    }

    /// Takes the call records made for job `job_id`.
    pub(crate) fn take(&self, job_id: &str) -> Vec<CallRecord> {
        self.by_job
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(job_id)
            .unwrap_or_default()
    }

    /// 429s seen so far (attempts refused as rate limited).
    pub(crate) fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }

    /// 529s seen so far.
    pub(crate) fn overloaded(&self) -> u64 {
        self.overloaded.load(Ordering::Relaxed)
    }

    /// Attempts that were retried.
    pub(crate) fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    fn write<T: Serialize>(&self, kind: &str, record: &T) {
        let Some(file) = &self.file else { return };
        let at_ms = clock::wall_now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let Ok(mut line) = serde_json::to_string(&Line {
            r#type: kind,
            at_ms,
            record,
        }) else {
            return;
        };
        line.push('\n');
        let mut out = file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()) {
            eprintln!("tollgate: cannot write a record: {e}");
        }
    }
}

impl Recorder for CliRecorder {
    fn record_call(&self, record: &CallRecord) {
        self.write("call", record);
        if let Some(job) = &record.job_id {
            self.by_job
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(job.clone())
                .or_default()
                .push(record.clone());
        }
    }

    fn record_attempt(&self, record: &AttemptRecord) {
        self.write("attempt", record);
        if let Outcome::Failed { error, .. } = &record.outcome {
            match error.as_str() {
                "rate_limited" => self.rate_limited.fetch_add(1, Ordering::Relaxed),
                "overloaded" => self.overloaded.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        }
        if record.retry_in.is_some() {
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
    }
}
