//! Each request's line of the output file, written the moment it finishes: the Batch
//! API's response or error, and the `tollgate` object (the model that answered,
//! attempts, usage and cost summed over the request's call records, latency, input
//! line). The run's tally is counted as each line is written.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;
use tollgate::pipeline::{CallRecord, Outcome};
use tollgate::{Error, Usage, clock};
use tollgate_gateway::{openai_completion, openai_embeddings};

use crate::input::Item;
use crate::output::{ErrorPart, Meta, OutputLine, ResponsePart};
use crate::progress::Tally;
use crate::record::CliRecorder;
use crate::resume::retry_on_rerun;

/// What a request's call answered.
pub(super) enum Answer {
    Chat(tollgate::LlmResponse),
    Embed(Vec<Vec<f32>>),
}

/// Writes the run's lines, one request at a time, and counts them.
pub(super) struct LineWriter {
    /// The model the run asked for (a line names the one that answered, if another).
    pub(super) model_id: String,
    pub(super) recorder: Arc<CliRecorder>,
    pub(super) out: Mutex<std::fs::File>,
    pub(super) tally: Arc<Mutex<Tally>>,
    /// The number of the next `req_…` id (an earlier run's continued).
    pub(super) next_id: AtomicU64,
}

impl LineWriter {
    /// Writes `item`'s line for `result`, from the call records its job left.
    pub(super) fn write(&self, item: &Item, result: Result<Answer, Error>, latency: Duration) {
        let records: Vec<CallRecord> = self.recorder.take(&item.custom_id);
        let mut usage = Usage::default();
        let mut attempts = 0;
        let mut cost: Option<f64> = None;
        let mut model = self.model_id.clone();
        for r in &records {
            usage = add(usage, r.usage);
            attempts += r.attempts;
            if let Some(c) = r.cost_usd {
                cost = Some(cost.unwrap_or(0.0) + c);
            }
            if r.outcome == Outcome::Success {
                model.clone_from(&r.model_id);
            }
        }
        let meta = Meta {
            model,
            attempts,
            usage,
            cost_usd: cost,
            latency_ms: latency.as_millis() as u64,
            line: item.line,
            via: None,
        };
        match result {
            Ok(answer) => self.emit(item, Ok(answer), meta),
            Err(e) => self.emit(item, Err(&e), meta),
        }
    }

    /// Writes `item`'s line for an answer (or error) read from provider batch
    /// `batch_id` (`None`: refused before it reached a batch), with what it was billed:
    /// its usage and that usage's cost at the batch price (a refused or cut-off answer is
    /// billed too).
    pub(super) fn write_batched(
        &self,
        item: &Item,
        result: Result<tollgate::LlmResponse, &Error>,
        (usage, cost_usd): (Usage, Option<f64>),
        batch_id: Option<&str>,
        latency: Duration,
    ) {
        let meta = Meta {
            model: self.model_id.clone(),
            attempts: 1,
            usage,
            cost_usd,
            latency_ms: latency.as_millis() as u64,
            line: item.line,
            via: batch_id.map(|id| format!("batch:{id}")),
        };
        self.emit(item, result.map(Answer::Chat), meta);
    }

    fn emit(&self, item: &Item, result: Result<Answer, &Error>, meta: Meta) {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request_id = format!("req_{:06}", n);
        let body = match &result {
            // The answer's own usage, as the gateway gives it; the `tollgate` object
            // sums every attempt's.
            Ok(Answer::Chat(r)) => Ok(openai_completion(&request_id, unix_now(), r.model(), r)),
            Ok(Answer::Embed(vectors)) => Ok(openai_embeddings(
                &meta.model,
                vectors.iter().map(|v| Value::from(v.as_slice())).collect(),
                meta.usage.total_input_tokens(),
            )),
            Err(e) => Err(ErrorPart {
                code: code(e).to_owned(),
                message: e.to_string(),
                retryable: retry_on_rerun(e),
            }),
        };
        let (response, error) = match body {
            Ok(body) => (
                Some(ResponsePart {
                    status_code: 200,
                    request_id: request_id.clone(),
                    body,
                }),
                None,
            ),
            Err(error) => (None, Some(error)),
        };
        let (usage, cost, attempts) = (meta.usage, meta.cost_usd, meta.attempts);
        let line = OutputLine {
            id: format!("batch_{request_id}"),
            custom_id: item.custom_id.clone(),
            response,
            error: error.clone(),
            tollgate: meta,
        };
        {
            let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
            match &error {
                None => tally.succeeded += 1,
                Some(e) => *tally.failed.entry(e.code.clone()).or_default() += 1,
            }
            tally.usage = add(tally.usage, usage);
            tally.cost_usd += cost.unwrap_or(0.0);
            tally.attempts += u64::from(attempts);
        }
        if let Ok(mut text) = serde_json::to_string(&line) {
            text.push('\n');
            let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                eprintln!(
                    "tollgate: cannot write the result of `{}`: {e}",
                    item.custom_id
                );
            }
        }
    }
}

/// Now in Unix seconds, a completion's `created`.
fn unix_now() -> u64 {
    clock::wall_now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The error's stable kind, as records name it.
fn code(e: &Error) -> &'static str {
    e.kind()
}

fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        cache_read_tokens: a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
        cache_write_1h_tokens: a.cache_write_1h_tokens + b.cache_write_1h_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
    }
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
