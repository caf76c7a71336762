//! `tollgate run --via batch`: the run's requests through the provider's batch API, at
//! its batch price, paced by its queue limits, resumable.
//!
//! Each request is encoded first: one the batch API cannot carry (a stream, a setting it
//! refuses) gets its error line before anything is uploaded. The rest are grouped into
//! batches within the API's caps (requests, bytes) and the model's enqueued-token limit,
//! and each batch, before it is submitted, holds its input tokens (and one pending batch)
//! on the model's queue ledger ([`tollgate::limit::QueueLedger`]: this process's, or
//! Redis's with `--redis`), given back when it ends; one that does not fit waits for a
//! batch to end. A batch the provider fails for its queue limit is submitted again later.
//!
//! What is submitted is kept in `<output>.batches.json` ([`state`]) before and after each
//! submission, so Ctrl-C, a crash or a restart followed by the same command picks the
//! batches up: nothing is submitted twice, what finished is collected, and a request whose
//! batch expired or was cancelled is written as `batch_unfinished` (sent again by the
//! next re-run). `--cancel` cancels the batches in flight and collects what they finished.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use tollgate::catalog::Price;
use tollgate::clock;
use tollgate::limit::{QueueAnswer, QueueCaps, QueueLedger};
use tollgate::pipeline::judge_answer;
use tollgate::provider::batch::{BatchPhase, BatchTransport};
use tollgate::{Error, LlmResponse, SpendCap, Usage};

use super::interrupts::{StopLevel, reached};
use super::lines::LineWriter;
use crate::input::{Body, Item};

mod chunk;
pub(crate) mod state;

use chunk::{Chunk, chunk};

use state::{Slot, State};

/// How long a batch's queue hold lasts if its run never comes back to give it back:
/// past the providers' 24-hour completion window.
const HOLD_TTL: Duration = Duration::from_secs(26 * 3600);

/// What a `--via batch` run needs besides its requests.
pub(crate) struct BatchRun {
    pub(crate) transport: Arc<dyn BatchTransport>,
    pub(crate) ledger: Arc<dyn QueueLedger>,
    /// The queue the holds count against: `<provider>:<credential>:<model name>`.
    pub(crate) account: String,
    pub(crate) caps: QueueCaps,
    /// The catalog's `batch.max_requests` / `max_bytes`, under the API's own caps.
    pub(crate) max_requests: Option<u64>,
    pub(crate) max_bytes: Option<u64>,
    /// The batch price, and the live one (for the comparison).
    pub(crate) price: Option<Price>,
    pub(crate) live_price: Option<Price>,
    pub(crate) poll_every: Duration,
    pub(crate) state_path: std::path::PathBuf,
    pub(crate) model_id: String,
    /// `--cancel`: cancel what is in flight, submit nothing.
    pub(crate) cancel: bool,
    /// `--max-cost`: each batch holds its worst case (every request at its output
    /// limit, at the batch price) before it is submitted, and settles at what its
    /// answers cost.
    pub(crate) cap: Option<SpendCap>,
    /// The catalog's output limits, for that worst case.
    pub(crate) default_output_tokens: Option<u64>,
}

impl BatchRun {
    /// What `request` costs at most through the batch API.
    fn worst_usd(&self, request: &tollgate::LlmRequest, input_tokens: u64) -> f64 {
        let output = request
            .sampling_params()
            .max_output_tokens()
            .or(self.default_output_tokens)
            .unwrap_or(0);
        let usage = tollgate::Usage {
            input_tokens,
            output_tokens: output,
            ..tollgate::Usage::default()
        };
        self.price.as_ref().map_or(0.0, |p| p.cost_usd(&usage))
    }
}

/// What the batch part of a run did, for the summary.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct BatchTally {
    /// Requests whose line was written from a batch (answers and errors).
    pub(crate) requests: u64,
    /// Requests refused before upload (a stream, an encoding error, too large).
    pub(crate) refused: u64,
    /// Batches submitted by this run.
    pub(crate) submitted: u64,
    /// Batches collected by this run (its own and an earlier run's).
    pub(crate) collected: u64,
    /// Batches still at the provider when the run stopped.
    pub(crate) in_flight: u64,
    /// Requests not sent (Ctrl-C, `--cancel`).
    pub(crate) not_sent: u64,
    /// Their cost at the batch price, and what the same usage costs live.
    pub(crate) cost_usd: f64,
    pub(crate) live_cost_usd: f64,
}

/// Sends `items` through the provider's batch API; every request ends with its line in
/// `lines` unless the run is stopped first (then the state file keeps what is in
/// flight).
pub(crate) async fn run_batches(
    run: &BatchRun,
    items: Vec<Item>,
    lines: &LineWriter,
    mut stop: StopLevel,
    bar: &ProgressBar,
) -> Result<BatchTally, String> {
    let started = clock::now();
    let mut tally = BatchTally::default();
    let mut state = State::load(&run.state_path, &run.model_id)?;
    let mut by_id: HashMap<String, Item> = items
        .into_iter()
        .map(|i| (i.custom_id.clone(), i))
        .collect();

    // The earlier run's batches: find the ones whose submission was not recorded, hold
    // the queue for the others again, and cancel them on `--cancel`.
    let mut slots: Vec<Slot> = Vec::new();
    for mut slot in std::mem::take(&mut state.batches) {
        if slot.handle.is_none() {
            slot.handle = run.transport.find(&slot.label).await.map_err(|e| {
                format!(
                    "cannot look for batch `{}` at the provider: {e}",
                    slot.label
                )
            })?;
        }
        if slot.handle.is_none() {
            // Never reached the provider: its requests are sent again below.
            let _ = run.ledger.release(&run.account, &slot.label).await;
            continue;
        }
        run.ledger
            .adopt(&run.account, &slot.label, slot.tokens, HOLD_TTL)
            .await
            .map_err(|e| e.to_string())?;
        slots.push(slot);
    }
    state.batches = slots;
    state.save(&run.state_path)?;
    let held = state.held_ids();
    if run.cancel {
        for slot in &mut state.batches {
            if let Some(handle) = &slot.handle {
                match run.transport.cancel(handle).await {
                    Ok(()) => slot.cancel_sent = true,
                    Err(e) => eprintln!("tollgate: cannot cancel batch `{}`: {e}", handle.id),
                }
            }
        }
        state.save(&run.state_path)?;
    }

    // The new requests: refused now if the batch API cannot carry them, else grouped.
    let mut fresh: Vec<&Item> = by_id
        .values()
        .filter(|i| !held.contains(&i.custom_id))
        .collect();
    fresh.sort_by_key(|i| i.line);
    let mut queue: VecDeque<Chunk> = VecDeque::new();
    if run.cancel {
        tally.not_sent = fresh.len() as u64;
    } else {
        let (chunks, refused) = chunk(run, &fresh);
        for (id, error) in refused {
            if let Some(item) = by_id.remove(&id) {
                lines.write_batched(
                    &item,
                    Err(&error),
                    (Usage::default(), None),
                    None,
                    started.elapsed(),
                );
                bar.inc(1);
                tally.refused += 1;
            }
        }
        queue.extend(chunks);
    }

    // This run's spend holds, by batch label, settled when each batch is collected.
    let mut holds: HashMap<String, tollgate::pipeline::SpendHold> = HashMap::new();
    let mut label_seq = 0u64;
    let run_tag = run_tag();
    // After a submission the provider refused for now (a 429, a 5xx): not before its
    // `retry-after` (else the next poll).
    let mut not_before: Option<tokio::time::Instant> = None;
    loop {
        if *stop.borrow() >= 1 {
            break;
        }
        // Submit what the queue limits admit now.
        while let Some(next) = queue.front() {
            if not_before.is_some_and(|t| clock::now() < t) {
                break;
            }
            label_seq += 1;
            let label = format!("tollgate-{run_tag}-{label_seq}");
            let caps = run.caps;
            let answer = run
                .ledger
                .hold(&run.account, &label, next.tokens, caps, HOLD_TTL)
                .await
                .map_err(|e| e.to_string())?;
            if let QueueAnswer::Full { .. } = answer {
                // Wait for a pending batch (this run's or another's) to end.
                break;
            }
            let Some(chunk) = queue.pop_front() else {
                break;
            };
            // `--max-cost`: the batch's worst case must fit what the run has left.
            let spend = match &run.cap {
                None => None,
                Some(cap) => match cap.reserve(chunk.worst_usd).await {
                    Ok(hold) => Some(hold),
                    Err(e) => {
                        let _ = run.ledger.release(&run.account, &label).await;
                        let unsent = Unsent {
                            lines,
                            bar,
                            started,
                        };
                        unsent.fail(&chunk.ids, &e, &mut by_id, &mut tally);
                        continue;
                    }
                },
            };
            state.batches.push(Slot {
                label: label.clone(),
                ids: chunk.ids.clone(),
                tokens: chunk.tokens,
                handle: None,
                phase: None,
                counts: Default::default(),
                cancel_sent: false,
            });
            state.save(&run.state_path)?;
            match run.transport.submit(&chunk.lines, &label).await {
                Ok(handle) => {
                    if let Some(mut hold) = spend {
                        hold.mark_sent();
                        holds.insert(label.clone(), hold);
                    }
                    if let Some(slot) = state.batches.iter_mut().find(|s| s.label == label) {
                        slot.handle = Some(handle);
                        slot.phase = Some(BatchPhase::Queued);
                    }
                    state.save(&run.state_path)?;
                    tally.submitted += 1;
                }
                Err(e) => {
                    state.batches.retain(|s| s.label != label);
                    state.save(&run.state_path)?;
                    let _ = run.ledger.release(&run.account, &label).await;
                    if let Error::Provider(p) = &e {
                        // A 429 (too many batches queued), a 5xx: submit it later, not
                        // before the provider's `retry-after`.
                        eprintln!("tollgate: submitting a batch failed ({e}); trying again later");
                        not_before = Some(clock::now() + p.retry_after().unwrap_or(run.poll_every));
                        queue.push_front(chunk);
                        break;
                    }
                    let unsent = Unsent {
                        lines,
                        bar,
                        started,
                    };
                    unsent.fail(&chunk.ids, &e, &mut by_id, &mut tally);
                }
            }
        }
        if state.batches.is_empty() && queue.is_empty() {
            break;
        }
        bar.set_message(phases(&state, queue.len()));
        tokio::select! {
            biased;
            _ = reached(&mut stop, 1) => break,
            () = tokio::time::sleep(run.poll_every) => {}
        }
        // Poll every pending batch; collect the ended ones.
        let mut ended = Vec::new();
        for slot in state.batches.iter_mut() {
            let Some(handle) = slot.handle.clone() else {
                continue;
            };
            match run.transport.status(&handle).await {
                Ok(status) => {
                    slot.phase = Some(status.phase);
                    slot.counts = status.counts;
                    if status.phase == BatchPhase::Ended {
                        ended.push((slot.label.clone(), status.failure));
                    }
                }
                // A 5xx, a timeout: polled again next time.
                Err(e) if e.is_retryable() => {
                    eprintln!("tollgate: cannot poll batch `{}`: {e}", handle.id);
                }
                // The provider does not know the batch, or refuses the key: polling again
                // would not change that. Stop, keeping the state for the user to decide.
                Err(e) => {
                    let id = handle.id.clone();
                    state.save(&run.state_path)?;
                    return Err(format!(
                        "cannot poll batch `{id}`: {e}; the run's batches are kept in `{}` \
                         (fix the key or catalog and run again; if the batch is gone at the \
                         provider, remove it from that file and run again to send its requests)",
                        run.state_path.display()
                    ));
                }
            }
        }
        for (label, failure) in ended {
            let Some(pos) = state.batches.iter().position(|s| s.label == label) else {
                continue;
            };
            let slot = state.batches[pos].clone();
            let Some(handle) = slot.handle.clone() else {
                continue;
            };
            let cost_before = tally.cost_usd;
            match failure {
                Some(e) if e.is_retryable() => {
                    // Failed as a whole for a reason that passes (its queue limit): the
                    // same requests go again as a new batch.
                    eprintln!(
                        "tollgate: batch `{}` failed ({e}); submitting its requests again",
                        handle.id
                    );
                    let again: Vec<&Item> =
                        slot.ids.iter().filter_map(|id| by_id.get(id)).collect();
                    // With no other batch of this run pending, the queue did not take this
                    // one alone (the estimate was under the provider's count): it goes
                    // again in halves, and a single request that still does not fit ends
                    // with the error (a re-run sends it again), so the run always ends.
                    let alone = state
                        .batches
                        .iter()
                        .all(|s| s.label == label || s.handle.is_none());
                    if alone && again.len() == 1 {
                        let id = again[0].custom_id.clone();
                        let item = by_id.remove(&id);
                        if let Some(item) = item {
                            write_one(run, lines, &item, Err(e), &handle.id, started, &mut tally);
                            bar.inc(1);
                        }
                        state.batches.remove(pos);
                        state.save(&run.state_path)?;
                        let _ = run.ledger.release(&run.account, &label).await;
                        if let Some(hold) = holds.remove(&label) {
                            hold.settle(0.0);
                        }
                        tally.collected += 1;
                        continue;
                    }
                    let halves: Vec<&[&Item]> = if alone {
                        let (a, b) = again.split_at(again.len() / 2);
                        vec![a, b]
                    } else {
                        vec![&again[..]]
                    };
                    let mut chunks = Vec::new();
                    let mut refused = Vec::new();
                    for half in halves {
                        let (c, r) = chunk(run, half);
                        chunks.extend(c);
                        refused.extend(r);
                    }
                    for c in chunks.into_iter().rev() {
                        queue.push_front(c);
                    }
                    for (id, error) in refused {
                        if let Some(item) = by_id.remove(&id) {
                            write_one(
                                run,
                                lines,
                                &item,
                                Err(error),
                                &handle.id,
                                started,
                                &mut tally,
                            );
                            bar.inc(1);
                        }
                    }
                }
                Some(e) => {
                    for id in &slot.ids {
                        if let Some(item) = by_id.remove(id) {
                            lines.write_batched(
                                &item,
                                Err(&e),
                                (Usage::default(), None),
                                Some(&handle.id),
                                started.elapsed(),
                            );
                            bar.inc(1);
                            tally.requests += 1;
                        }
                    }
                }
                None => match run.transport.results(&handle).await {
                    Ok(outcomes) => {
                        for outcome in outcomes {
                            let Some(item) = by_id.remove(&outcome.custom_id) else {
                                continue;
                            };
                            write_one(
                                run,
                                lines,
                                &item,
                                outcome.result,
                                &handle.id,
                                started,
                                &mut tally,
                            );
                            bar.inc(1);
                        }
                        let how = if slot.cancel_sent {
                            "was cancelled"
                        } else {
                            "expired"
                        };
                        for id in &slot.ids {
                            if let Some(item) = by_id.remove(id) {
                                let e = Error::BatchLineUnfinished {
                                    batch_id: handle.id.clone(),
                                    how: how.into(),
                                };
                                write_one(
                                    run,
                                    lines,
                                    &item,
                                    Err(e),
                                    &handle.id,
                                    started,
                                    &mut tally,
                                );
                                bar.inc(1);
                            }
                        }
                    }
                    Err(e) => {
                        // Collected on the next poll (or the next run).
                        eprintln!(
                            "tollgate: cannot read the results of batch `{}`: {e}",
                            handle.id
                        );
                        continue;
                    }
                },
            }
            // What the batch's answers cost settles its spend hold (an earlier run's
            // batch, held by none, is counted as spent now).
            let spent = tally.cost_usd - cost_before;
            match (holds.remove(&label), &run.cap) {
                (Some(hold), _) => hold.settle(spent),
                (None, Some(cap)) => {
                    if let Ok(mut hold) = cap.hold(0.0) {
                        hold.mark_sent();
                        hold.settle(spent);
                    }
                }
                (None, None) => {}
            }
            state.batches.remove(pos);
            state.save(&run.state_path)?;
            let _ = run.ledger.release(&run.account, &label).await;
            tally.collected += 1;
        }
    }
    tally.in_flight = state.batches.len() as u64;
    tally.not_sent += queue.iter().map(|c| c.ids.len() as u64).sum::<u64>();
    state.save(&run.state_path)?;
    Ok(tally)
}

/// Where the lines of requests that no batch carried go.
struct Unsent<'a> {
    lines: &'a LineWriter,
    bar: &'a ProgressBar,
    started: tokio::time::Instant,
}

impl Unsent<'_> {
    /// Writes `error` as the line of each of `ids` still to write: never sent, so
    /// nothing billed.
    fn fail(
        &self,
        ids: &[String],
        error: &Error,
        by_id: &mut HashMap<String, Item>,
        tally: &mut BatchTally,
    ) {
        for id in ids {
            if let Some(item) = by_id.remove(id) {
                let billed = (Usage::default(), None);
                let latency = self.started.elapsed();
                self.lines
                    .write_batched(&item, Err(error), billed, None, latency);
                self.bar.inc(1);
                tally.requests += 1;
            }
        }
    }
}

/// Writes one request's line from its batch answer, costed at the batch price. The
/// answer is judged as a live call's is ([`judge_answer`]): a refusal, a cut-off, a missed
/// response shape is that typed failure, billed at the answer's usage.
fn write_one(
    run: &BatchRun,
    lines: &LineWriter,
    item: &Item,
    result: tollgate::Result<LlmResponse>,
    batch_id: &str,
    started: tokio::time::Instant,
    tally: &mut BatchTally,
) {
    let usage = result.as_ref().map(|r| r.usage()).unwrap_or_default();
    let result = match (result, &item.body) {
        (Ok(response), Body::Chat(request)) => {
            let params = request.sampling_params();
            let limit = params
                .max_output_tokens()
                .or(run.default_output_tokens)
                .unwrap_or(0);
            judge_answer(&response, params, &run.model_id, limit).map(|()| response)
        }
        (other, _) => other,
    };
    let cost = run.price.as_ref().map(|p| p.cost_usd(&usage));
    tally.cost_usd += cost.unwrap_or(0.0);
    tally.live_cost_usd += run.live_price.as_ref().map_or(0.0, |p| p.cost_usd(&usage));
    tally.requests += 1;
    let billed = (usage, cost);
    match result {
        Ok(response) => lines.write_batched(
            item,
            Ok(response),
            billed,
            Some(batch_id),
            started.elapsed(),
        ),
        Err(e) => lines.write_batched(item, Err(&e), billed, Some(batch_id), started.elapsed()),
    }
}

/// The progress bar's message: the batches by phase, and those waiting for the queue.
fn phases(state: &State, waiting: usize) -> String {
    let count = |p: BatchPhase| state.batches.iter().filter(|s| s.phase == Some(p)).count();
    let mut text = format!(
        "batches: {} queued, {} running",
        count(BatchPhase::Queued),
        count(BatchPhase::Running)
    );
    let cancelling = count(BatchPhase::Cancelling);
    if cancelling > 0 {
        text.push_str(&format!(", {cancelling} cancelling"));
    }
    if waiting > 0 {
        text.push_str(&format!(", {waiting} waiting for the queue limit"));
    }
    text
}

/// A tag that makes this run's batch labels its own.
fn run_tag() -> String {
    let nanos = clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}", nanos, std::process::id())
}

#[cfg(test)]
mod fake_api;
#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
