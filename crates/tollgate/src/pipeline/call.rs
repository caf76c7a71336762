//! One call: [`CallState`] carries it across its attempts (what it has spent, used and
//! waited, its retry budget and span). The attempts themselves are `attempt.rs`'s; how a
//! call ends is recorded by `finish.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::job::JobContext;
use super::retry::Jitter;
use super::runtime::ModelRuntime;
use super::telemetry;
use crate::catalog::ModelEntry;
use crate::clock;
use crate::error::Error;
use crate::limit::Reservation;
use crate::usage::Usage;

static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

/// A bounded call's one deadline ([`JobContext::with_max_wait`]): when it started plus
/// the bound, pushed later by the time its attempts spend with the provider, so that it
/// bounds the call's waiting alone, all of it together: on every bucket, in the queue,
/// before each retry. The calls of one fallback chain share it (the clones are one).
#[derive(Debug, Clone)]
pub(crate) struct Deadline(Arc<Mutex<Instant>>);

impl Deadline {
    /// The deadline of a call of `job` starting now; `None` when the job is unbounded (or
    /// its bound is too far to be an instant: as good as none).
    pub(crate) fn for_job(job: Option<&JobContext>) -> Option<Self> {
        let bound = job?.max_wait()?;
        let at = clock::now().checked_add(bound)?;
        Some(Deadline(Arc::new(Mutex::new(at))))
    }

    /// The instant past which the call may not wait.
    pub(crate) fn at(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Time spent with the provider is not waiting: the deadline moves by it.
    pub(super) fn extend(&self, by: Duration) {
        let mut at = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(later) = at.checked_add(by) {
            *at = later;
        }
    }
}

/// One call's state across its attempts.
pub(crate) struct CallState {
    pub(super) rt: Arc<ModelRuntime>,
    pub(super) job: Option<JobContext>,
    pub(super) operation: &'static str,
    pub(super) call_id: u64,
    pub(super) jitter: Jitter,
    pub(super) started: Instant,
    pub(super) attempts: u32,
    pub(super) retries: u32,
    pub(super) usage: Usage,
    pub(super) cost_usd: f64,
    pub(crate) time_to_first_token: Option<Duration>,
    pub(super) span: tracing::Span,
    pub(super) finished: bool,
    /// In a fallback chain a 429 moves the call to another model instead of waiting.
    pub(crate) in_chain: bool,
    /// A reservation made before the call (the one a fallback chain picked the model
    /// with): the first attempt uses it instead of reserving again.
    pub(super) pregranted: Option<(usize, Reservation)>,
    /// Whether an attempt of this call has met a 429: its retries' 429s are no new
    /// signal for the throttle.
    pub(super) rate_limited_before: bool,
    /// The error kind of the attempt the next attempt retries.
    pub(super) retry_reason: Option<&'static str>,
    /// Time the call's attempts waited for their reservations.
    pub(super) queue_wait: Duration,
    /// The bound on the call's waiting, if its job has one.
    pub(super) deadline: Option<Deadline>,
    /// The model the provider said answered (chat).
    pub(super) response_model: Option<String>,
    /// Why the last answer stopped (tollgate's stop reason name).
    pub(super) finish_reason: Option<&'static str>,
    /// The output limit of the last request sent (chat).
    pub(super) max_tokens: Option<u64>,
}

impl CallState {
    pub(crate) fn new(
        rt: Arc<ModelRuntime>,
        job: Option<JobContext>,
        operation: &'static str,
    ) -> Self {
        let call_id = NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed);
        let jitter = Jitter::new(
            rt.config.retry.jitter_seed,
            job.as_ref().map_or("", |j| j.id()),
            &rt.entry.id,
            0,
        );
        let span = telemetry::call_span(&rt, job.as_ref().map(|j| j.id()), operation);
        let deadline = Deadline::for_job(job.as_ref());
        CallState {
            rt,
            job,
            operation,
            call_id,
            jitter,
            started: clock::now(),
            attempts: 0,
            retries: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
            time_to_first_token: None,
            span,
            finished: false,
            in_chain: false,
            pregranted: None,
            rate_limited_before: false,
            retry_reason: None,
            queue_wait: Duration::ZERO,
            deadline,
            response_model: None,
            finish_reason: None,
            max_tokens: None,
        }
    }

    /// Salts the retry jitter with what the call sends, so that with
    /// [`super::RetryPolicy::jitter_seed`] set its retry times are the same on every run
    /// (whatever order concurrent calls were made in).
    pub(crate) fn with_content<H: std::hash::Hash + ?Sized>(mut self, content: &H) -> Self {
        let seed = self.rt.config.retry.jitter_seed;
        // Without a seed the base is random anyway: hashing the whole request (a
        // 100k-token prompt, byte by byte, on the runtime) would buy nothing.
        let content = if seed.is_some() {
            super::retry::content_hash(content)
        } else {
            0
        };
        self.jitter = Jitter::new(
            seed,
            self.job.as_ref().map_or("", |j| j.id()),
            &self.rt.entry.id,
            content,
        );
        self
    }

    /// Makes the first attempt use `reservation` on deployment `.0` (taken when the call
    /// was routed here).
    pub(crate) fn with_reservation(mut self, reservation: Option<(usize, Reservation)>) -> Self {
        self.pregranted = reservation;
        self
    }

    /// Makes the call wait within `deadline` (a fallback chain's, shared by the calls it
    /// makes) instead of a deadline of its own; `None` keeps its own.
    pub(crate) fn with_deadline(mut self, deadline: Option<Deadline>) -> Self {
        if deadline.is_some() {
            self.deadline = deadline;
        }
        self
    }

    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The output limit the next request is sent with (`gen_ai.request.max_tokens`).
    pub(crate) fn set_max_tokens(&mut self, limit: u64) {
        self.max_tokens = Some(limit);
    }

    /// An answer arrived: the model the provider says answered, and why it stopped
    /// (recorded on the call span when the call finishes; the last answer's win).
    pub(crate) fn responded(&mut self, model: &str, finish_reason: &'static str) {
        self.response_model = Some(model.to_owned());
        self.finish_reason = Some(finish_reason);
    }

    pub(crate) fn entry(&self) -> &ModelEntry {
        &self.rt.entry
    }

    /// Starts the next HTTP request of a call that sends several (embeddings batches,
    /// decision questions): without a job, each request has the policy's own retry
    /// budget; a job's budget stays shared. Each such request has the job's whole bound
    /// on waiting, from when it begins.
    pub(crate) fn next_request(&mut self) {
        self.retries = 0;
        self.deadline = Deadline::for_job(self.job.as_ref());
    }

    /// Adds an attempt's usage and what it cost to the call's.
    pub(super) fn add_usage(&mut self, usage: &Usage, cost: f64) {
        self.usage.input_tokens += usage.input_tokens;
        self.usage.cache_read_tokens += usage.cache_read_tokens;
        self.usage.cache_write_tokens += usage.cache_write_tokens;
        self.usage.cache_write_1h_tokens += usage.cache_write_1h_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.cost_usd += cost;
    }

    /// What `usage` costs at the model's catalog price (0 when unpriced).
    pub(super) fn price_of(&self, usage: &Usage) -> f64 {
        self.rt
            .entry
            .price
            .map_or(0.0, |price| price.cost_usd(usage))
    }

    /// This attempt's deadline: the per-attempt timeout, cut to what is left of the
    /// call's deadline.
    pub(crate) fn attempt_timeout(&self) -> Duration {
        let per_attempt = self.rt.config.attempt_timeout;
        match self.rt.config.call_deadline {
            Some(deadline) => per_attempt.min(deadline.saturating_sub(self.started.elapsed())),
            None => per_attempt,
        }
    }

    pub(crate) fn started(&self) -> Instant {
        self.started
    }
}

impl Drop for CallState {
    fn drop(&mut self) {
        // A call dropped before it finished was cancelled by its caller.
        if !self.finished {
            self.finish(Err(&Error::Cancelled));
        }
    }
}
