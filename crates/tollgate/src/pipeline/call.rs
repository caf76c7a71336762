//! One call's attempts: prepare (circuit, spend cap, reservation), send, classify, retry
//! or not, settle, record. [`CallState`] carries the call across its attempts.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock;

use tokio::time::Instant;
use tracing::Instrument;

use super::job::{JobContext, SpendHold};
use super::record::{AttemptRecord, CallRecord, Outcome};
use super::retry::Jitter;
use super::telemetry;
use super::transport::Signals;
use crate::catalog::ModelEntry;
use crate::error::{ConnectionCause, Error, ProviderError, Result};
use crate::limit::{
    AccountingRule, Cost, DEFAULT_FALLBACK_COOLDOWN, Feedback, Reservation, SendMark,
};
use crate::usage::Usage;

use super::engine::{ModelRuntime, worst_case_usd};

/// Resources an admission took with a reservation, held for one attempt.
type Guards = Vec<Box<dyn std::any::Any + Send>>;

static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

/// One attempt's holdings: the reservation and the spend hold.
pub(crate) struct Prepared {
    /// The deployment the attempt goes to (index into the model's deployments).
    pub(crate) deployment: usize,
    reservation: Reservation,
    /// When it was sent, for reading its answer's rate-limit headers as of then.
    mark: Option<SendMark>,
    hold: SpendHold,
    sent_at: Instant,
    worst_usd: f64,
    /// The attempt's span, a child of the call's.
    pub(crate) span: tracing::Span,
    /// Other resources an [`crate::limit::Admission`] took with the reservation, held
    /// until the attempt ends.
    _guards: Guards,
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
    /// A reservation made before the call (the one a fallback chain picked the model
    /// with): the first attempt uses it instead of reserving again.
    pregranted: Option<(usize, Reservation)>,
    /// Whether an attempt of this call has met a 429: its retries' 429s are no new
    /// signal for the throttle.
    rate_limited_before: bool,
    /// The error kind of the attempt the next attempt retries.
    retry_reason: Option<&'static str>,
    /// Time the call's attempts waited for their reservations.
    queue_wait: Duration,
    /// The model the provider said answered (chat).
    response_model: Option<String>,
    /// Why the last answer stopped (tollgate's stop reason name).
    finish_reason: Option<&'static str>,
    /// The output limit of the last request sent (chat).
    max_tokens: Option<u64>,
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
            rate_limited_is_final: false,
            pregranted: None,
            rate_limited_before: false,
            retry_reason: None,
            queue_wait: Duration::ZERO,
            response_model: None,
            finish_reason: None,
            max_tokens: None,
        }
    }

    /// Salts the retry jitter with what the call sends, so that with
    /// [`super::RetryPolicy::jitter_seed`] set its retry times are the same on every run
    /// (whatever order concurrent calls were made in).
    pub(crate) fn with_content<H: std::hash::Hash + ?Sized>(mut self, content: &H) -> Self {
        self.jitter = Jitter::new(
            self.rt.config.retry.jitter_seed,
            self.job.as_ref().map_or("", |j| j.id()),
            &self.rt.entry.id,
            super::retry::content_hash(content),
        );
        self
    }

    /// Makes the first attempt use `reservation` on deployment `.0` (taken when the call
    /// was routed here).
    pub(crate) fn with_reservation(mut self, reservation: Option<(usize, Reservation)>) -> Self {
        self.pregranted = reservation;
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
    /// budget; a job's budget stays shared.
    pub(crate) fn next_request(&mut self) {
        self.retries = 0;
    }

    /// Checks the circuit, checks the spend cap, reserves on the limiter, then holds the
    /// worst case on the cap (waiters hold nothing). Nothing has been sent when this
    /// fails. Opens the attempt's span, which
    /// covers the wait for the reservation.
    pub(crate) async fn prepare(&mut self, cost: Cost) -> Result<Prepared> {
        let span = telemetry::attempt_span(&self.span, self.attempts + 1, self.retry_reason);
        match self.prepare_in(cost, &span).instrument(span.clone()).await {
            Ok(prepared) => {
                self.retry_reason = None;
                Ok(prepared)
            }
            Err(e) => {
                telemetry::record_attempt_end(
                    &span,
                    &Usage::default(),
                    Some((telemetry::error_type(&e), None)),
                    None,
                );
                Err(e)
            }
        }
    }

    async fn prepare_in(&mut self, cost: Cost, span: &tracing::Span) -> Result<Prepared> {
        // Fail fast while open; the probe slot is taken only once the bucket grants.
        self.rt.breaker.peek()?;
        let worst_usd = worst_case_usd(self.rt.entry.price.as_ref(), &cost);
        let cap = self.job.as_ref().and_then(JobContext::spend_cap).cloned();
        // A call that could not fit even if every call in flight spent nothing fails
        // now, without queueing; one that could waits holding nothing on the cap, so that
        // waiters never make a sibling fail (the hold is taken once granted, below).
        if let Some(cap) = &cap {
            cap.check_fits_unheld(worst_usd)?;
        }
        let queued_at = clock::now();
        let (deployment, mut reservation, guards) = self.reserve(cost).await?;
        let queue_wait = queued_at.elapsed();
        self.queue_wait += queue_wait;
        telemetry::record_grant(span, &self.rt, deployment, queue_wait, cost);
        telemetry::measure_grant(&self.rt, deployment, queue_wait).await;
        let mark = Some(SendMark::now());
        // The worst case is held before anything is sent: refused, the reservation is
        // dropped unsent and given back.
        let mut hold = match &cap {
            Some(cap) => cap.hold(worst_usd)?,
            None => SpendHold::none(),
        };
        // The circuit may have opened while we waited; dropping the reservation and the
        // hold unsent gives both back.
        self.rt.breaker.check()?;
        reservation.mark_sent();
        hold.mark_sent();
        self.attempts += 1;
        Ok(Prepared {
            deployment,
            reservation,
            mark,
            hold,
            sent_at: clock::now(),
            worst_usd,
            span: span.clone(),
            _guards: guards,
        })
    }

    /// The attempt's deployment and reservation: the one the call was routed with, else
    /// a grant the job waited for, else through the job's admission, else on the
    /// deployment that can serve soonest, at the job's priority.
    async fn reserve(&mut self, cost: Cost) -> Result<(usize, Reservation, Guards)> {
        if let Some((i, mut reservation)) = self.pregranted.take() {
            reservation.resize(cost);
            return Ok((i, reservation, Vec::new()));
        }
        let priority = self
            .job
            .as_ref()
            .map(JobContext::priority)
            .unwrap_or_default();
        if let Some(job) = &self.job {
            for (i, d) in self.rt.deployments.iter().enumerate() {
                let id = d.limiter.model_id();
                if let Some(grant) = job.take_admitted(id) {
                    let (mut reservation, guards) = grant.into_parts();
                    reservation.resize(cost);
                    return Ok((i, reservation, guards));
                }
                if let Some(admission) = job.admission_for(id) {
                    let admission = admission.clone();
                    let (reservation, guards) =
                        admission.admit_with(cost, priority).await?.into_parts();
                    let i = self.rt.deployment_of(admission.model_id()).unwrap_or(i);
                    return Ok((i, reservation, guards));
                }
            }
        }
        let (i, reservation) = self.rt.reserve_any(cost, priority).await?;
        Ok((i, reservation, Vec::new()))
    }

    fn apply_signals(
        &self,
        deployment: usize,
        signals: &Signals,
        mark: Option<SendMark>,
    ) -> Option<bool> {
        let values = signals.take();
        let limiter = &self.rt.deployments[deployment].limiter;
        for feedback in values.feedback(mark) {
            limiter.feedback(feedback);
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
        let deployment = p.deployment;
        let p_mark = p.mark;
        p.reservation.settle(usage, rule);
        p.hold.settle(cost);
        // After settling: the provider's "remaining" already counts this call.
        self.apply_signals(deployment, signals, p_mark);
        self.rt.deployments[deployment]
            .limiter
            .feedback(Feedback::Success);
        self.rt.breaker.record(&Ok(()));
        self.add_usage(usage, cost);
        self.record_attempt(
            deployment,
            &p.span,
            Outcome::Success,
            *usage,
            p.sent_at.elapsed(),
            None,
        );
    }

    pub(crate) fn add_usage(&mut self, usage: &Usage, cost: f64) {
        self.usage.input_tokens += usage.input_tokens;
        self.usage.cache_read_tokens += usage.cache_read_tokens;
        self.usage.cache_write_tokens += usage.cache_write_tokens;
        self.usage.cache_write_1h_tokens += usage.cache_write_1h_tokens;
        self.usage.output_tokens += usage.output_tokens;
        self.cost_usd += cost;
    }

    /// An attempt failed: tell the limiter and breaker, release what was held (a
    /// refusal settles at the usage the provider billed, by `rule`), and decide whether
    /// to retry (`Some(wait)`) or give up (`None`).
    pub(crate) fn fail(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
        rule: AccountingRule,
    ) -> Option<Duration> {
        let deployment = p.deployment;
        let span = p.span.clone();
        let (should_retry, latency) = self.release_failed(p, error, signals, rule);
        let billed = billed_usage(error);
        if let Some(usage) = &billed {
            let cost = self.price_of(usage);
            self.add_usage(usage, cost);
        }
        let wait = self.retry_wait(error, should_retry);
        if wait.is_some() {
            self.retry_reason = Some(telemetry::error_type(error));
        }
        self.record_attempt(
            deployment,
            &span,
            Outcome::of(error),
            billed.unwrap_or_default(),
            latency,
            wait,
        );
        wait
    }

    /// What `usage` costs at the model's catalog price (0 when unpriced).
    fn price_of(&self, usage: &Usage) -> f64 {
        self.rt
            .entry
            .price
            .map_or(0.0, |price| price.cost_usd(usage))
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
        let deployment = p.deployment;
        self.observe_failure(deployment, error);
        self.apply_signals(deployment, signals, p.mark);
        let Prepared {
            reservation,
            hold,
            sent_at,
            worst_usd,
            span,
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
        self.record_attempt(
            deployment,
            &span,
            Outcome::of(error),
            usage,
            sent_at.elapsed(),
            None,
        );
    }

    /// Tells the throttle and the breaker what a failure says about the model; a 429
    /// on one of several deployments also cools that deployment, so that the next
    /// attempts go to the others.
    fn observe_failure(&mut self, deployment: usize, error: &Error) {
        let d = &self.rt.deployments[deployment];
        match error {
            Error::Provider(ProviderError::RateLimited { retry_after }) => {
                let retry_after = *retry_after;
                telemetry::measure_rate_limited(&self.rt, deployment);
                // One call refused again and again is one refusal of our rate.
                d.limiter.feedback(if self.rate_limited_before {
                    Feedback::RateLimitedAgain { retry_after }
                } else {
                    Feedback::RateLimited { retry_after }
                });
                self.rate_limited_before = true;
                if self.rt.deployments.len() > 1 {
                    d.cool(clock::now() + retry_after.unwrap_or(DEFAULT_FALLBACK_COOLDOWN));
                }
            }
            Error::Provider(ProviderError::Overloaded { retry_after, .. }) => {
                d.limiter.feedback(Feedback::Overloaded {
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
        rule: AccountingRule,
    ) -> (Option<bool>, Duration) {
        let deployment = p.deployment;
        self.observe_failure(deployment, error);
        let Prepared {
            reservation,
            hold,
            sent_at,
            worst_usd,
            mark,
            ..
        } = p;
        match error {
            // The provider answered with a refusal and bills it: settle at its usage.
            Error::ProviderRefusal { usage, .. } => {
                let cost = self.price_of(usage);
                reservation.settle(usage, rule);
                hold.settle(cost);
            }
            // Refused before any work (or never reached the provider): the tokens were
            // not used (the request counts).
            Error::Provider(
                ProviderError::RateLimited { .. }
                | ProviderError::Overloaded { .. }
                | ProviderError::Connection {
                    cause: ConnectionCause::Refused | ConnectionCause::Dns | ConnectionCause::Tls,
                    ..
                },
            )
            | Error::ProviderRequest(_)
            | Error::QuotaExhausted { .. }
            | Error::ContextWindowExceeded { .. } => {
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
        let should_retry = self.apply_signals(deployment, signals, mark);
        (should_retry, sent_at.elapsed())
    }

    /// Whether the model has more than one deployment and one of them is not cooling
    /// (the one that just refused is).
    fn another_deployment_open(&self) -> bool {
        let now = clock::now();
        self.rt.deployments.len() > 1
            && self.rt.deployments.iter().any(|d| d.cooling(now).is_none())
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
            // A 429's wait is the refusing deployment's: while another deployment of the
            // model is not cooling, the retry goes there without waiting it out.
            Error::Provider(ProviderError::RateLimited { .. })
                if self.another_deployment_open() =>
            {
                None
            }
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
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = (Result<(T, Usage)>, Signals)>,
    {
        loop {
            let prepared = self.prepare(cost).await?;
            let timeout = self.attempt_timeout();
            let attempt = send(prepared.deployment).instrument(prepared.span.clone());
            let (result, signals) = match tokio::time::timeout(timeout, attempt).await {
                Ok(outcome) => outcome,
                Err(_) => (
                    Err(ProviderError::Timeout {
                        after: Some(timeout),
                    }
                    .into()),
                    Signals::default(),
                ),
            };
            // The provider key comes from the catalog, never from a codec.
            let result = result.map_err(|e| e.with_provider(&self.entry().provider));
            match result {
                Ok((value, usage)) => {
                    self.succeed(prepared, &usage, rule, &signals);
                    return Ok((value, usage));
                }
                Err(error) => match self.fail(prepared, &error, &signals, rule) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(error),
                },
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record_attempt(
        &self,
        deployment: usize,
        span: &tracing::Span,
        outcome: Outcome,
        usage: Usage,
        latency: Duration,
        retry_in: Option<Duration>,
    ) {
        let failed = match &outcome {
            Outcome::Failed { error, status } => {
                tracing::debug!(parent: span, attempt = self.attempts, error = %error, ?retry_in, "attempt failed");
                let kind = if error == "other" {
                    "_OTHER"
                } else {
                    error.as_str()
                };
                Some((kind, *status))
            }
            Outcome::Success => None,
        };
        telemetry::record_attempt_end(span, &usage, failed, retry_in);
        self.rt.config.recorder.record_attempt(&AttemptRecord {
            call_id: self.call_id,
            attempt: self.attempts,
            model_id: self.rt.entry.id.clone(),
            deployment: self.rt.deployments[deployment].name.clone(),
            outcome,
            usage,
            latency,
            retry_in,
        });
    }

    /// Records the call's end; called once.
    pub(crate) fn finish(&mut self, result: Result<(), &Error>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let outcome = match result {
            Ok(_) => Outcome::Success,
            Err(e) => Outcome::of(e),
        };
        let error_type = result.err().map(telemetry::error_type);
        let priced = self.rt.entry.price.is_some();
        let span = &self.span;
        telemetry::record_usage(span, &self.usage);
        span.record("tollgate.attempts", i64::from(self.attempts));
        span.record("tollgate.queue_wait", self.queue_wait.as_secs_f64());
        if priced {
            span.record("tollgate.cost_usd", self.cost_usd);
        }
        if let Some(limit) = self.max_tokens {
            span.record("gen_ai.request.max_tokens", telemetry::int(limit));
        }
        if let Some(model) = &self.response_model {
            span.record("gen_ai.response.model", model.as_str());
        }
        if let Some(ttfc) = self.time_to_first_token {
            span.record("gen_ai.response.time_to_first_chunk", ttfc.as_secs_f64());
        }
        // A generation cut short (a stream broken after its first event) ended with
        // `error`, as the conventions ask.
        let reason = match (self.finish_reason, result) {
            (Some(reason), _) => Some(reason),
            (None, Err(Error::StreamInterrupted { .. })) => Some("error"),
            (None, _) => None,
        };
        if let Some(reason) = reason {
            telemetry::record_strings(span, "gen_ai.response.finish_reasons", &[reason]);
        }
        if let Some(kind) = error_type {
            span.record("error.type", kind);
            span.record("otel.status_code", "error");
        }
        telemetry::measure_call(
            &self.rt,
            self.operation,
            self.response_model.as_deref(),
            error_type,
            self.started.elapsed(),
            &self.usage,
        );
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

/// The usage a failure was billed with: a refusal's.
fn billed_usage(error: &Error) -> Option<Usage> {
    match error {
        Error::ProviderRefusal { usage, .. } => Some(*usage),
        _ => None,
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
