//! The attempt engine shared by every client kind: prepare (circuit, spend cap,
//! reservation), send, classify, retry or not, settle, record.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::{BreakerConfig, CircuitBreaker};
use super::job::{JobContext, SpendHold};
use super::record::{AttemptRecord, CallRecord, NoRecorder, Outcome, Recorder};
use super::retry::{Jitter, RetryPolicy};
use super::transport::Signals;
use crate::catalog::{ModelEntry, Price};
use crate::error::{Error, ProviderError, Result};
use crate::limit::{AccountingRule, Cost, Feedback, Reservation, SendMark, TokenBucketRateLimiter};
use crate::response::Usage;

/// The most times an answer that fails its declared shape is sent back for correction.
pub const MAX_CORRECTIONS: u32 = 2;

/// How every call is run.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Retries and back-off.
    pub retry: RetryPolicy,
    /// When circuits open.
    pub breaker: BreakerConfig,
    /// Deadline for one attempt, from send to the whole answer (streams: to the first
    /// event). Passing it is a [`ProviderError::Timeout`].
    pub attempt_timeout: Duration,
    /// Deadline for the whole call, retries and waits included (`None`: no limit). A
    /// retry that would end past it is not made; an attempt is cut at it.
    pub call_deadline: Option<Duration>,
    /// Deadline for connecting, handed to transports (see
    /// [`crate::ProviderContext::connect_timeout`]).
    pub connect_timeout: Duration,
    /// How many times an answer that fails its declared shape is sent back.
    pub max_corrections: u32,
    /// Where call and attempt records go.
    pub recorder: Arc<dyn Recorder>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            retry: RetryPolicy::default(),
            breaker: BreakerConfig::default(),
            attempt_timeout: Duration::from_secs(600),
            call_deadline: None,
            connect_timeout: Duration::from_secs(10),
            max_corrections: MAX_CORRECTIONS,
            recorder: Arc::new(NoRecorder),
        }
    }
}

/// Everything the pipeline keeps per catalog model, shared by all its clients.
#[derive(Debug)]
pub(crate) struct ModelRuntime {
    pub(crate) entry: ModelEntry,
    pub(crate) limiter: TokenBucketRateLimiter,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) config: Arc<PipelineConfig>,
}

impl ModelRuntime {
    pub(crate) fn new(entry: ModelEntry, config: Arc<PipelineConfig>) -> Self {
        ModelRuntime {
            limiter: TokenBucketRateLimiter::for_model(&entry),
            breaker: CircuitBreaker::new(entry.id.clone(), config.breaker.clone()),
            entry,
            config,
        }
    }
}

/// The worst a call can cost: every input token at the dearest input price (a cache
/// write can cost more than plain input), and the whole output limit.
pub(crate) fn worst_case_usd(price: Option<&Price>, cost: &Cost) -> f64 {
    price.map_or(0.0, |p| {
        let input = p
            .input
            .max(p.cache_write)
            .max(p.cache_write_1h.unwrap_or(0.0));
        (cost.input_tokens as f64 * input + cost.output_tokens as f64 * p.output) / 1_000_000.0
    })
}

static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

/// One attempt's holdings: the reservation and the spend hold.
pub(crate) struct Prepared {
    reservation: Reservation,
    /// When it was sent, for reading its answer's rate-limit headers as of then.
    mark: SendMark,
    hold: SpendHold,
    sent_at: Instant,
    worst_usd: f64,
}

/// One call's state across its attempts.
pub(crate) struct CallState {
    rt: Arc<ModelRuntime>,
    job: Option<JobContext>,
    operation: &'static str,
    call_id: u64,
    jitter: Jitter,
    started: Instant,
    attempts: u32,
    retries: u32,
    usage: Usage,
    cost_usd: f64,
    pub(crate) time_to_first_token: Option<Duration>,
    span: tracing::Span,
    finished: bool,
    /// In a fallback chain a 429 moves the call to another model instead of waiting.
    pub(crate) rate_limited_is_final: bool,
    /// Whether an attempt of this call has met a 429: its retries' 429s are no new
    /// signal for the throttle.
    rate_limited_before: bool,
}

impl CallState {
    pub(crate) fn new(
        rt: Arc<ModelRuntime>,
        job: Option<JobContext>,
        operation: &'static str,
    ) -> Self {
        let call_id = NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed);
        let salt = job.as_ref().map_or("", |j| j.id()).to_owned();
        let jitter = Jitter::new(rt.config.retry.jitter_seed, &salt, call_id);
        let span = tracing::info_span!(
            "gen_ai.call",
            otel.name = %format!("{operation} {}", rt.entry.name),
            gen_ai.operation.name = operation,
            gen_ai.provider.name = %rt.entry.provider,
            gen_ai.request.model = %rt.entry.name,
            tollgate.model_id = %rt.entry.id,
            tollgate.job_id = job.as_ref().map(|j| j.id()),
            gen_ai.request.max_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
            tollgate.attempts = tracing::field::Empty,
            tollgate.cost_usd = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        CallState {
            rt,
            job,
            operation,
            call_id,
            jitter,
            started: Instant::now(),
            attempts: 0,
            retries: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
            time_to_first_token: None,
            span,
            finished: false,
            rate_limited_is_final: false,
            rate_limited_before: false,
        }
    }

    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    pub(crate) fn entry(&self) -> &ModelEntry {
        &self.rt.entry
    }

    /// Checks the circuit, holds the worst case on the spend cap, reserves on the
    /// limiter. Nothing has been sent when this fails.
    pub(crate) async fn prepare(&mut self, cost: Cost) -> Result<Prepared> {
        // Fail fast while open; the probe slot is taken only once the bucket grants.
        self.rt.breaker.peek()?;
        let worst_usd = worst_case_usd(self.rt.entry.price.as_ref(), &cost);
        let mut hold = match self.job.as_ref().and_then(JobContext::spend_cap) {
            Some(cap) => cap.hold(worst_usd)?,
            None => SpendHold::none(),
        };
        let mut reservation = self.rt.limiter.reserve(cost).await?;
        let mark = self.rt.limiter.send_mark();
        // The circuit may have opened while we waited; dropping the reservation unsent
        // gives it back.
        self.rt.breaker.check()?;
        reservation.mark_sent();
        hold.mark_sent();
        self.attempts += 1;
        Ok(Prepared {
            reservation,
            mark,
            hold,
            sent_at: Instant::now(),
            worst_usd,
        })
    }

    fn apply_signals(&self, signals: &Signals, mark: SendMark) -> Option<bool> {
        let values = signals.take();
        for feedback in values.feedback(Some(mark)) {
            self.rt.limiter.feedback(feedback);
        }
        values.should_retry
    }

    /// An attempt answered: settle everything at what it used.
    pub(crate) fn succeed(
        &mut self,
        p: Prepared,
        usage: &Usage,
        rule: AccountingRule,
        signals: &Signals,
    ) {
        let cost = self
            .rt
            .entry
            .price
            .map_or(0.0, |price| price.cost_usd(usage));
        p.reservation.settle(usage, rule);
        p.hold.settle(cost);
        // After settling: the provider's "remaining" already counts this call.
        self.apply_signals(signals, p.mark);
        self.rt.limiter.feedback(Feedback::Success);
        self.rt.breaker.record(&Ok(()));
        self.add_usage(usage, cost);
        self.record_attempt(Outcome::Success, *usage, p.sent_at.elapsed(), None);
    }

    pub(crate) fn add_usage(&mut self, usage: &Usage, cost: f64) {
        self.usage.input_tokens += usage.input_tokens;
        self.usage.cache_read_tokens += usage.cache_read_tokens;
        self.usage.cache_write_tokens += usage.cache_write_tokens;
        self.usage.cache_write_1h_tokens += usage.cache_write_1h_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.cost_usd += cost;
    }

    /// An attempt failed: tell the limiter and breaker, release what was held, and
    /// decide whether to retry (`Some(wait)`) or give up (`None`).
    pub(crate) fn fail(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
    ) -> Option<Duration> {
        let (should_retry, latency) = self.release_failed(p, error, signals);
        let wait = self.retry_wait(error, should_retry);
        self.record_attempt(Outcome::of(error), Usage::default(), latency, wait);
        wait
    }

    /// A stream broke after its first event reached the reader: never retried. The
    /// provider did work (the reader has part of the answer), so the charge stays and the
    /// spend-cap hold settles at the worst case; the usage the stream had reported so far
    /// is recorded.
    pub(crate) fn fail_final(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
        usage: Option<Usage>,
    ) {
        self.observe_failure(error);
        self.apply_signals(signals, p.mark);
        let Prepared {
            reservation,
            hold,
            sent_at,
            worst_usd,
            ..
        } = p;
        drop(reservation);
        hold.settle(worst_usd);
        let usage = usage.unwrap_or_default();
        let cost = self
            .rt
            .entry
            .price
            .map_or(0.0, |price| price.cost_usd(&usage));
        self.add_usage(&usage, cost);
        self.record_attempt(Outcome::of(error), usage, sent_at.elapsed(), None);
    }

    /// Tells the throttle and the breaker what a failure says about the model.
    fn observe_failure(&mut self, error: &Error) {
        match error {
            Error::Provider(ProviderError::RateLimited { retry_after }) => {
                let retry_after = *retry_after;
                // One call refused again and again is one refusal of our rate.
                self.rt.limiter.feedback(if self.rate_limited_before {
                    Feedback::RateLimitedAgain { retry_after }
                } else {
                    Feedback::RateLimited { retry_after }
                });
                self.rate_limited_before = true;
            }
            Error::Provider(ProviderError::Overloaded { retry_after, .. }) => {
                self.rt.limiter.feedback(Feedback::Overloaded {
                    retry_after: *retry_after,
                });
            }
            _ => {}
        }
        self.rt.breaker.record(&Err(error));
    }

    fn release_failed(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
    ) -> (Option<bool>, Duration) {
        self.observe_failure(error);
        let Prepared {
            reservation,
            mark,
            hold,
            sent_at,
            worst_usd,
        } = p;
        match error {
            // Refused before any work: the tokens were not used (the request counts).
            Error::Provider(
                ProviderError::RateLimited { .. } | ProviderError::Overloaded { .. },
            )
            | Error::ProviderRequest(_)
            | Error::QuotaExhausted { .. }
            | Error::ProviderRefusal { .. } => {
                let cost = reservation.cost();
                reservation.settle_counted(Cost {
                    requests: cost.requests,
                    input_tokens: 0,
                    output_tokens: 0,
                });
                hold.settle(0.0);
            }
            // The provider may have done (and billed) the work: keep the charge.
            _ => {
                drop(reservation);
                hold.settle(worst_usd);
            }
        }
        let should_retry = self.apply_signals(signals, mark);
        (should_retry, sent_at.elapsed())
    }

    fn retry_wait(&mut self, error: &Error, should_retry: Option<bool>) -> Option<Duration> {
        let retryable = match should_retry {
            Some(false) => false,
            Some(true) => error.is_retryable() || matches!(error, Error::ProviderRequest(_)),
            None => error.is_retryable(),
        };
        let chain_moves_on = self.rate_limited_is_final
            && matches!(error, Error::Provider(ProviderError::RateLimited { .. }));
        if !retryable || chain_moves_on {
            return None;
        }
        let policy = &self.rt.config.retry;
        let retry_after = match error {
            Error::Provider(p) => p.retry_after(),
            _ => None,
        };
        // Checked before the budget: a wait we will not honour spends no retry.
        let wait = policy.delay(self.retries, retry_after, self.jitter.draw())?;
        // A retry that would start past the call's deadline is not made.
        if let Some(deadline) = self.rt.config.call_deadline
            && self.started.elapsed() + wait >= deadline
        {
            return None;
        }
        let budget = match &self.job {
            Some(job) => job.take_retry(),
            None => self.retries < policy.default_retries,
        };
        if !budget {
            return None;
        }
        self.retries += 1;
        Some(wait)
    }

    /// Runs attempts of `send` until one answers or the failure is final.
    pub(crate) async fn run<T, F, Fut>(
        &mut self,
        cost: Cost,
        rule: AccountingRule,
        mut send: F,
    ) -> Result<(T, Usage)>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = (Result<(T, Usage)>, Signals)>,
    {
        loop {
            let prepared = self.prepare(cost).await?;
            let timeout = self.attempt_timeout();
            let (result, signals) = match tokio::time::timeout(timeout, send()).await {
                Ok(outcome) => outcome,
                Err(_) => (
                    Err(ProviderError::Timeout {
                        after: Some(timeout),
                    }
                    .into()),
                    Signals::default(),
                ),
            };
            match result {
                Ok((value, usage)) => {
                    self.succeed(prepared, &usage, rule, &signals);
                    return Ok((value, usage));
                }
                Err(error) => match self.fail(prepared, &error, &signals) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(error),
                },
            }
        }
    }

    fn record_attempt(
        &self,
        outcome: Outcome,
        usage: Usage,
        latency: Duration,
        retry_in: Option<Duration>,
    ) {
        if let Outcome::Failed { error, .. } = &outcome {
            tracing::debug!(parent: &self.span, attempt = self.attempts, error = %error, ?retry_in, "attempt failed");
        }
        self.rt.config.recorder.record_attempt(&AttemptRecord {
            call_id: self.call_id,
            attempt: self.attempts,
            model_id: self.rt.entry.id.clone(),
            outcome,
            usage,
            latency,
            retry_in,
        });
    }

    /// Records the call's end; called once.
    pub(crate) fn finish(&mut self, result: Result<(), &Error>, finish_reason: Option<&str>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let outcome = match result {
            Ok(_) => Outcome::Success,
            Err(e) => Outcome::of(e),
        };
        let priced = self.rt.entry.price.is_some();
        let span = &self.span;
        span.record("gen_ai.usage.input_tokens", self.usage.total_input_tokens());
        span.record("gen_ai.usage.output_tokens", self.usage.output_tokens);
        span.record(
            "gen_ai.usage.cache_read.input_tokens",
            self.usage.cache_read_tokens,
        );
        span.record(
            "gen_ai.usage.cache_creation.input_tokens",
            self.usage.cache_write_tokens + self.usage.cache_write_1h_tokens,
        );
        span.record("tollgate.attempts", self.attempts);
        if priced {
            span.record("tollgate.cost_usd", self.cost_usd);
        }
        if let Some(reason) = finish_reason {
            span.record("gen_ai.response.finish_reasons", reason);
        }
        if let Outcome::Failed { error, .. } = &outcome {
            span.record("error.type", error.as_str());
        }
        self.rt.config.recorder.record_call(&CallRecord {
            call_id: self.call_id,
            job_id: self.job.as_ref().map(|j| j.id().to_owned()),
            model_id: self.rt.entry.id.clone(),
            model_name: self.rt.entry.name.clone(),
            provider: self.rt.entry.provider.clone(),
            operation: self.operation.to_owned(),
            attempts: self.attempts,
            usage: self.usage,
            cost_usd: priced.then_some(self.cost_usd),
            latency: self.started.elapsed(),
            time_to_first_token: self.time_to_first_token,
            outcome,
        });
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
            self.finish(Err(&Error::Cancelled), None);
        }
    }
}
