//! Resuming a batch: what an earlier run's output already holds, and what a re-run sends
//! again.
//!
//! Every error line records `retryable`, decided from the typed error when the line was
//! written ([`retry_on_rerun`]): `true` when the same request may well succeed if sent
//! again later (a provider failure after the retry budget, a cancellation, the run's own
//! spend cap, the account's quota, an open circuit, an unreachable shared limiter);
//! `false` when the request itself is at fault or the model judged it (a refusal, an
//! invalid request, a context overflow, an answer that failed its schema).
//!
//! A re-run first *compacts* the output ([`prepare`]): it keeps every success and every
//! final failure (all failures with `--retry-failed` are dropped instead), and every
//! line of an id the batch no longer has; it drops the lines it will send again, any
//! line cut short by a crash and any repeat of an id; and, if it dropped
//! anything, replaces the file at once with a copy holding only the kept lines (written
//! to a temporary file beside it, synced, then renamed over it: a crash leaves either
//! the old file or the new one, never a mix). Kept lines are copied byte for byte. The
//! run then appends its results, so the output holds at most one line per `custom_id` at
//! every moment, and exactly one per request once a run completes.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tollgate::Error;

/// Whether a request that failed with `error` is sent again by a re-run of the same
/// command (without `--retry-failed`).
///
/// Sent again: what would be different later without changing the request. Kept as
/// final: what the same request to the same model would meet again.
pub(crate) fn retry_on_rerun(error: &Error) -> bool {
    match error {
        // 429, 529, 5xx, timeouts, malformed answers, dropped connections: the pipeline
        // ran out of retries, and later is another chance.
        Error::Provider(_)
        // Ctrl-C twice: the answer never came.
        | Error::Cancelled
        // A provider batch expired or was cancelled before the request ran.
        | Error::BatchLineUnfinished { .. }
        // The run's `--max-cost`: a re-run has a cap of its own.
        | Error::SpendCapExceeded { .. }
        // The account, not the request: credit can be added, a key fixed.
        | Error::QuotaExhausted { .. }
        | Error::Credential(_)
        // Failing fast for now; the circuit closes again.
        | Error::CircuitOpen { .. }
        | Error::StreamInterrupted { .. }
        // `--redis` could not be reached, or the queue closed: nothing was sent.
        | Error::LimiterUnavailable { .. }
        | Error::QueueClosed
        // The limiter's own "not now": nothing was sent.
        | Error::WouldWait { .. }
        // Setup that can be fixed between runs: the catalog, a provider crate linked, a
        // replay directory that could not be written.
        | Error::Catalog(_)
        | Error::ProviderNotLinked { .. }
        | Error::DuplicateProvider { .. }
        | Error::ReplayStore { .. } => true,
        // The request (too long, too large, invalid, rejected with a 4xx) or the model's
        // judgement of it (a refusal, a cut-off answer, one that fails its schema): the
        // same request to the same model would meet it again. Every variant is named, so
        // a new one does not compile until it is placed here.
        Error::ProviderRequest(_)
        | Error::ProviderRefusal { .. }
        | Error::OutputTruncated { .. }
        | Error::ContextWindowExceeded { .. }
        | Error::ShapeInvalid { .. }
        | Error::TooLargeForBucket { .. }
        | Error::ResponseTooLarge { .. }
        | Error::UnmatchedRequest { .. }
        | Error::UnknownModel { .. }
        | Error::WrongModelKind { .. }
        | Error::Unsupported { .. }
        | Error::UnsupportedSetting { .. }
        | Error::InvalidRequest { .. }
        | Error::EmbeddingShape { .. }
        | Error::Decode { .. } => false,
    }
}

/// What could not be read or replaced, and which file.
#[derive(Debug)]
pub(crate) enum ResumeError {
    /// The existing output could not be read.
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The compacted copy could not be written or put in place of the output.
    Replace {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for ResumeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResumeError::Read { path, source } => write!(
                f,
                "cannot read the earlier output `{}` to resume from it: {source}; make it \
                 readable, or give another -o",
                path.display()
            ),
            ResumeError::Replace { path, source } => write!(
                f,
                "cannot replace `{}` with its compacted copy (the old file is unchanged): \
                 {source}; make its directory writable, or give another -o",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ResumeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResumeError::Read { source, .. } | ResumeError::Replace { source, .. } => Some(source),
        }
    }
}

/// What the output held before this run, once compacted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Previous {
    /// The `custom_id`s whose line is kept: they are not sent again.
    pub(crate) kept: HashSet<String>,
    /// Of those, how many are (final) failures.
    pub(crate) kept_failures: usize,
    /// Failed requests whose line was dropped to send them again.
    pub(crate) retried: usize,
    /// Lines dropped because they did not parse (cut short by a crash) or repeated an id.
    pub(crate) discarded: usize,
    /// The first free number for the `id` and `request_id` of new lines.
    pub(crate) next_seq: u64,
}

/// The parts of an output line that resuming reads.
#[derive(Deserialize)]
struct Seen {
    id: String,
    custom_id: String,
    error: Option<SeenError>,
}

#[derive(Deserialize)]
struct SeenError {
    /// Missing in lines written before it was recorded: final.
    #[serde(default)]
    retryable: bool,
}

/// How one line of the earlier output is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Keep,
    Retry,
    Discard,
}

/// Reads the output at `path` (nothing if it does not exist), decides which lines stay
/// (all failures of the batch are sent again with `retry_failed`; a line whose id is not
/// `in_batch` stays, as nothing would send it), and replaces the file with the kept
/// lines if any line goes.
pub(crate) fn prepare(
    path: &Path,
    retry_failed: bool,
    in_batch: impl Fn(&str) -> bool,
) -> Result<Previous, ResumeError> {
    let read = |source| ResumeError::Read {
        path: path.to_owned(),
        source,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Previous::default()),
        Err(e) => return Err(read(e)),
    };
    let mut previous = Previous::default();
    // The chosen line of each id: a success over any failure, else the last failure.
    let mut chosen: HashMap<String, (usize, bool, bool)> = HashMap::new();
    let mut parsed: Vec<Option<String>> = Vec::new();
    let mut ends_cleanly = true;
    for_each_line(file, |n, line, complete| {
        ends_cleanly = complete;
        let seen = serde_json::from_slice::<Seen>(line).ok();
        let Some(seen) = seen else {
            parsed.push(None);
            return;
        };
        if let Some(seq) = seen
            .id
            .strip_prefix("batch_req_")
            .and_then(|s| s.parse::<u64>().ok())
        {
            previous.next_seq = previous.next_seq.max(seq + 1);
        }
        let success = seen.error.is_none();
        let retryable = seen.error.is_some_and(|e| e.retryable);
        let replace = match chosen.get(&seen.custom_id) {
            Some((_, was_success, _)) => !was_success,
            None => true,
        };
        if replace {
            chosen.insert(seen.custom_id.clone(), (n, success, retryable));
        }
        parsed.push(Some(seen.custom_id));
    })
    .map_err(read)?;

    let mut fates = Vec::with_capacity(parsed.len());
    for (n, id) in parsed.iter().enumerate() {
        let fate = match id.as_ref().and_then(|id| chosen.get(id).map(|c| (id, c))) {
            Some((id, &(at, success, retryable))) if at == n => {
                if success || !(retryable || retry_failed) || !in_batch(id) {
                    previous.kept.insert(id.clone());
                    previous.kept_failures += usize::from(!success);
                    Fate::Keep
                } else {
                    previous.retried += 1;
                    Fate::Retry
                }
            }
            _ => {
                previous.discarded += 1;
                Fate::Discard
            }
        };
        fates.push(fate);
    }
    if ends_cleanly && fates.iter().all(|f| *f == Fate::Keep) {
        return Ok(previous);
    }
    rewrite(path, &fates).map_err(|source| ResumeError::Replace {
        path: path.to_owned(),
        source,
    })?;
    Ok(previous)
}

/// Calls `f(n, line, complete)` for each line of `file` (without its newline; `complete`
/// is false for a last line with no newline).
fn for_each_line(file: File, mut f: impl FnMut(usize, &[u8], bool)) -> std::io::Result<()> {
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            return Ok(());
        }
        let complete = buf.last() == Some(&b'\n');
        if complete {
            buf.pop();
        }
        f(n, &buf, complete);
        n += 1;
    }
}

/// Writes the lines of `path` whose fate is [`Fate::Keep`] to a temporary file beside
/// it, syncs it and renames it over `path`.
fn rewrite(path: &Path, fates: &[Fate]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.tollgate-compact"));
    let mut out = BufWriter::new(File::create(&temp)?);
    let mut result = Ok(());
    for_each_line(File::open(path)?, |n, line, _| {
        if result.is_ok() && fates.get(n) == Some(&Fate::Keep) {
            result = out.write_all(line).and_then(|()| out.write_all(b"\n"));
        }
    })?;
    result?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path)?;
    // The rename itself survives a crash once the directory is synced.
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(dir) = File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tollgate::ProviderError;

    fn line(seq: u64, id: &str, error: Option<(&str, bool)>) -> String {
        let error = match error {
            Some((code, retryable)) => {
                serde_json::json!({"code": code, "message": "m", "retryable": retryable})
            }
            None => serde_json::Value::Null,
        };
        let response = if error.is_null() {
            serde_json::json!({"status_code": 200, "request_id": format!("req_{seq:06}"), "body": {}})
        } else {
            serde_json::Value::Null
        };
        serde_json::json!({
            "id": format!("batch_req_{seq:06}"), "custom_id": id, "response": response,
            "error": error, "tollgate": {"model": "m", "attempts": 1, "usage": {}, "cost_usd": null, "latency_ms": 1, "line": 1},
        })
        .to_string()
    }

    #[test]
    fn retry_on_rerun_sends_again_transient_and_run_bound_failures_and_keeps_the_requests_own() {
        let again = [
            Error::from(ProviderError::RateLimited {
                retry_after: Some(Duration::from_secs(1)),
            }),
            Error::Cancelled,
            Error::SpendCapExceeded {
                cap: "c".into(),
                limit_usd: 1.0,
                remaining_usd: 0.0,
                needed_usd: 0.1,
            },
            Error::QuotaExhausted {
                provider: "p".into(),
                message: "m".into(),
            },
            Error::CircuitOpen {
                model_id: "m".into(),
                retry_in: Duration::from_secs(1),
            },
            // Nothing was sent, or the setup can be fixed between runs.
            Error::WouldWait {
                ready_in: Duration::from_secs(1),
            },
            Error::ProviderNotLinked {
                model_id: "m".into(),
                provider: "p".into(),
                hint: String::new(),
            },
        ];
        for e in &again {
            assert!(retry_on_rerun(e), "{e}");
        }
        let final_ = [
            Error::refusal("cyber", "no", tollgate::Usage::default()),
            Error::InvalidRequest {
                field: "f".into(),
                reason: "r".into(),
            },
            Error::ContextWindowExceeded {
                model_id: "m".into(),
                needed: 10,
                window: Some(5),
            },
            Error::ShapeInvalid { errors: vec![] },
        ];
        for e in &final_ {
            assert!(!retry_on_rerun(e), "{e}");
        }
    }

    #[test]
    fn prepare_keeps_successes_and_final_failures_byte_for_byte_and_drops_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let ok = line(0, "a", None);
        let refused = line(1, "b", Some(("refusal", false)));
        let text = [
            ok.clone(),
            refused.clone(),
            line(2, "c", Some(("rate_limited", true))),
            line(7, "d", Some(("cancelled", true))),
            "{\"id\":\"batch_req_000009\",\"custom_id\":\"e\",\"resp".to_owned(),
        ]
        .join("\n");
        std::fs::write(&path, &text).unwrap();
        let previous = prepare(&path, false, |_| true).unwrap();
        assert_eq!(
            previous.kept,
            HashSet::from(["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(previous.kept_failures, 1);
        assert_eq!(previous.retried, 2);
        assert_eq!(previous.discarded, 1, "the line cut short");
        assert_eq!(previous.next_seq, 8);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{ok}\n{refused}\n")
        );
        assert!(
            !dir.path().join(".out.jsonl.tollgate-compact").exists(),
            "the temporary copy was renamed into place"
        );
    }

    #[test]
    fn prepare_with_retry_failed_drops_final_failures_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let ok = line(0, "a", None);
        std::fs::write(
            &path,
            format!("{ok}\n{}\n", line(1, "b", Some(("refusal", false)))),
        )
        .unwrap();
        let previous = prepare(&path, true, |_| true).unwrap();
        assert_eq!(previous.kept, HashSet::from(["a".to_owned()]));
        assert_eq!(previous.retried, 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{ok}\n"));
    }

    #[test]
    fn prepare_keeps_a_success_over_a_repeated_id_and_leaves_a_clean_file_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let ok = line(3, "a", None);
        let clean = format!("{ok}\n");
        std::fs::write(&path, &clean).unwrap();
        let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        let before = inode();
        assert_eq!(prepare(&path, false, |_| true).unwrap().kept.len(), 1);
        assert_eq!(inode(), before, "nothing to drop: not replaced");
        std::fs::write(
            &path,
            format!(
                "{}\n{ok}\n{}\n",
                line(1, "a", Some(("timeout", true))),
                line(4, "a", Some(("timeout", true)))
            ),
        )
        .unwrap();
        let previous = prepare(&path, false, |_| true).unwrap();
        assert_eq!(previous.kept, HashSet::from(["a".to_owned()]));
        assert_eq!(previous.discarded, 2);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), clean);
    }

    #[test]
    fn prepare_on_a_missing_output_starts_from_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            prepare(&dir.path().join("none.jsonl"), false, |_| true).unwrap(),
            Previous::default()
        );
    }

    #[test]
    fn prepare_keeps_the_failures_of_ids_not_in_the_batch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let text = format!(
            "{}\n{}\n",
            line(0, "gone", Some(("timeout", true))),
            line(1, "here", Some(("timeout", true)))
        );
        std::fs::write(&path, &text).unwrap();
        let previous = prepare(&path, true, |id| id == "here").unwrap();
        assert_eq!(previous.kept, HashSet::from(["gone".to_owned()]));
        assert_eq!(previous.retried, 1);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", line(0, "gone", Some(("timeout", true))))
        );
    }
}
