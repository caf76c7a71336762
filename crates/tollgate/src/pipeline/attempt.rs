//! A call's attempts, in one loop for every operation (single answers, streams,
//! embeddings, decisions): prepare (circuit, spend cap, reservation), send, then on a
//! failure apply the [`super::verdict`] (tell the limiter and the breaker, settle the
//! holdings, record) and wait for the retry or give up.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::call::{CallState, Deadline};
use super::job::{JobContext, SpendHold};
use super::record::Outcome;
use super::telemetry;
use super::verdict::{FailureContext, Retry, Settle, verdict};
use crate::catalog::Price;
use crate::clock;
use crate::error::{Error, ProviderError, Result};
use crate::limit::{
    AccountingRule, Admission, AdmissionGrant, Cost, Feedback, Priority, Reservation, SendMark,
    TryReserveError,
};
use crate::provider::Signals;
use crate::usage::Usage;

/// Resources an admission took with a reservation, held for one attempt.
type Guards = Vec<Box<dyn std::any::Any + Send>>;

/// One attempt's holdings: the reservation, the one on the job's own buckets and the
/// spend hold.
pub(crate) struct Prepared {
    /// The deployment the attempt goes to (index into the model's deployments).
    pub(crate) deployment: usize,
    reservation: Reservation,
    /// On the job's own buckets ([`JobContext::with_limiter`]), settled like the model's.
    own: Option<Reservation>,
    /// When it was sent, for reading its answer's rate-limit headers as of then.
    mark: SendMark,
    hold: SpendHold,
    sent_at: Instant,
    worst_usd: f64,
    /// The attempt's span, a child of the call's.
    span: tracing::Span,
    /// Other resources an [`crate::limit::Admission`] took with the reservation, held
    /// until the attempt ends.
    _guards: Guards,
}

/// A stream's events reached the reader before it failed, with the usage it had
/// reported so far.
struct Delivered(Option<Usage>);

/// An attempt that answered: what it returned, its holdings (settled once its usage is
/// known) and what the answer's headers said.
pub(crate) struct Answered<T> {
    pub(crate) value: T,
    pub(crate) prepared: Prepared,
    pub(crate) signals: Signals,
}

impl CallState {
    /// Runs attempts of `send` (given the deployment to send to) until one answers or the
    /// failure is final. The answer's holdings are handed back unsettled: a stream settles
    /// them when it completes.
    pub(crate) async fn attempt<T, F, Fut>(
        &mut self,
        cost: Cost,
        rule: AccountingRule,
        mut send: F,
    ) -> Result<Answered<T>>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = (Result<T>, Signals)>,
    {
        loop {
            let prepared = self.prepare(cost).await?;
            let timeout = self.attempt_timeout();
            let attempt = send(prepared.deployment).instrument(prepared.span.clone());
            let (result, signals) =
                tokio::time::timeout(timeout, attempt)
                    .await
                    .unwrap_or_else(|_| {
                        let after = Some(timeout);
                        (
                            Err(ProviderError::Timeout { after }.into()),
                            Signals::default(),
                        )
                    });
            // The bound is on waiting: the time the provider took does not count.
            if let Some(deadline) = &self.deadline {
                deadline.extend(prepared.sent_at.elapsed());
            }
            // The provider key comes from the catalog, never from a codec.
            match result.map_err(|e| e.with_provider(&self.rt.entry.provider)) {
                Ok(value) => {
                    return Ok(Answered {
                        value,
                        prepared,
                        signals,
                    });
                }
                Err(error) => match self.fail(prepared, &error, &signals, rule) {
                    Next::Retry(wait) => tokio::time::sleep(wait).await,
                    Next::GiveUp => return Err(error),
                    // Known now: answered at once, not after sleeping towards the bound.
                    Next::PastDeadline(ready_in) => return Err(Error::WouldWait { ready_in }),
                },
            }
        }
    }

    /// [`CallState::attempt`] for a single answer: settles it at the usage it reports;
    /// `outcome` says how the attempt is recorded (a refused answer as a refusal).
    pub(crate) async fn run<T, F, Fut>(
        &mut self,
        cost: Cost,
        rule: AccountingRule,
        send: F,
        outcome: fn(&T) -> Outcome,
    ) -> Result<(T, Usage)>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = (Result<(T, Usage)>, Signals)>,
    {
        let answered = self.attempt(cost, rule, send).await?;
        let (value, usage) = answered.value;
        let outcome = outcome(&value);
        self.succeed(answered.prepared, &usage, rule, &answered.signals, outcome);
        Ok((value, usage))
    }

    /// Checks the circuit, checks the spend cap, reserves on the limiter, then holds the
    /// worst case on the cap (waiters hold nothing). Nothing has been sent when this
    /// fails. Opens the attempt's span, which covers the wait for the reservation.
    async fn prepare(&mut self, cost: Cost) -> Result<Prepared> {
        let span = telemetry::attempt_span(&self.span, self.attempts + 1, self.retry_reason);
        match self.prepare_in(cost, &span).instrument(span.clone()).await {
            Ok(prepared) => {
                self.retry_reason = None;
                Ok(prepared)
            }
            Err(e) => {
                let failed = Some((e.kind(), None));
                telemetry::record_attempt_end(&span, &Usage::default(), failed, None);
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
        let job = self.job.clone();
        let reserved = async {
            // The job's own buckets first: waiting there holds nothing of the model's.
            let own = self.reserve_own(cost).await?;
            let (deployment, reservation, guards) = self.reserve(cost).await?;
            Ok::<_, Error>((own, deployment, reservation, guards))
        };
        // A closed queue (shutting down) ends the wait; what it held is dropped unsent.
        let (mut own, deployment, mut reservation, guards) = match &job {
            Some(job) => tokio::select! {
                biased;
                () = job.queue_closed() => return Err(Error::QueueClosed),
                r = reserved => r?,
            },
            None => reserved.await?,
        };
        let queue_wait = queued_at.elapsed();
        self.queue_wait += queue_wait;
        telemetry::record_grant(span, &self.rt, deployment, queue_wait, cost);
        telemetry::measure_grant(&self.rt, deployment, queue_wait).await;
        let mark = SendMark::now();
        // The worst case is held before anything is sent: refused, the reservation is
        // dropped unsent and given back.
        let mut hold = match &cap {
            Some(cap) => cap.reserve(worst_usd).await?,
            None => SpendHold::none(),
        };
        // The circuit may have opened while we waited; dropping the reservation and the
        // hold unsent gives both back.
        self.rt.breaker.check()?;
        reservation.mark_sent();
        if let Some(own) = &mut own {
            own.mark_sent();
        }
        hold.mark_sent();
        self.attempts += 1;
        Ok(Prepared {
            deployment,
            reservation,
            own,
            mark,
            hold,
            sent_at: clock::now(),
            worst_usd,
            span: span.clone(),
            _guards: guards,
        })
    }

    /// The attempt's reservation on the job's own buckets, if it has any, within the
    /// call's deadline as the model's is ([`until_deadline`]).
    async fn reserve_own(&self, cost: Cost) -> Result<Option<Reservation>> {
        let Some(job) = &self.job else {
            return Ok(None);
        };
        let Some(limiter) = job.limiter() else {
            return Ok(None);
        };
        let priority = job.priority();
        let Some(deadline) = self.deadline_at() else {
            return Ok(Some(limiter.reserve(cost, priority).await?));
        };
        let tried = limiter.try_reserve(cost, priority).await;
        let wait = limiter.reserve(cost, priority);
        let again = || limiter.try_reserve(cost, priority);
        until_deadline(deadline, tried, wait, again).await.map(Some)
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
                        self.admit(&admission, cost, priority).await?.into_parts();
                    let i = self.rt.deployment_of(admission.model_id()).unwrap_or(i);
                    return Ok((i, reservation, guards));
                }
            }
        }
        let Some(deadline) = self.deadline_at() else {
            let (i, reservation) = self.rt.reserve_any(cost, priority).await?;
            return Ok((i, reservation, Vec::new()));
        };
        let tried = self.rt.try_reserve_any(cost, priority).await;
        let wait = self.rt.reserve_any(cost, priority);
        let again = || self.rt.try_reserve_any(cost, priority);
        let (i, reservation) = until_deadline(deadline, tried, wait, again).await?;
        Ok((i, reservation, Vec::new()))
    }

    /// Admits through `admission`, within the call's deadline: its other resources give
    /// no estimate, so the wait is cut at the deadline (leaving both queues), and the
    /// answer is its limiter's fresh estimate, or no wait at all when the limiter could
    /// serve now (the resources were what it waited for: a lower bound).
    async fn admit(
        &self,
        admission: &Admission,
        cost: Cost,
        priority: Priority,
    ) -> Result<AdmissionGrant> {
        let admitted = admission.admit_with(cost, priority);
        let Some(deadline) = self.deadline_at() else {
            return admitted.await;
        };
        if let Ok(grant) = tokio::time::timeout_at(deadline, admitted).await {
            return grant;
        }
        match admission.limiter().try_reserve(cost, priority).await {
            // Dropped unsent: given back.
            Ok(_) => Err(Error::WouldWait {
                ready_in: Duration::ZERO,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// When the call's waiting must end, if its job bounds it.
    fn deadline_at(&self) -> Option<Instant> {
        self.deadline.as_ref().map(Deadline::at)
    }

    /// Tells the deployment's limiter what the answer's rate-limit headers said, as of
    /// when its request was sent; returns the provider's word on retrying, if any.
    fn apply_signals(&self, deployment: usize, signals: &Signals, mark: SendMark) -> Option<bool> {
        let values = signals.take();
        let limiter = &self.rt.deployments[deployment].limiter;
        for feedback in values.feedback(Some(mark)) {
            limiter.feedback(feedback);
        }
        values.should_retry
    }

    /// An attempt answered: settle everything at what it used, and record it as
    /// `outcome` (an answer the model refused is still an answer to the limiter and the
    /// breaker, but its record says refusal).
    pub(crate) fn succeed(
        &mut self,
        p: Prepared,
        usage: &Usage,
        rule: AccountingRule,
        signals: &Signals,
        outcome: Outcome,
    ) {
        let cost = self.price_of(usage);
        let deployment = p.deployment;
        p.reservation.settle(usage, rule);
        if let Some(own) = p.own {
            own.settle(usage, rule);
        }
        p.hold.settle(cost);
        // After settling: the provider's "remaining" already counts this call.
        self.apply_signals(deployment, signals, p.mark);
        let limiter = &self.rt.deployments[deployment].limiter;
        limiter.feedback(Feedback::Success);
        self.rt.breaker.record(&Ok(()));
        self.add_usage(usage, cost);
        let latency = p.sent_at.elapsed();
        self.record_attempt(deployment, &p.span, outcome, *usage, latency, None);
    }

    /// An attempt failed before anything reached the reader: apply the verdict on
    /// `error` (the limiter and the breaker learn, the holdings settle, the attempt is
    /// recorded) and say what comes next.
    pub(crate) fn fail(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
        rule: AccountingRule,
    ) -> Next {
        self.conclude(p, error, signals, rule, None)
    }

    /// A stream failed after its first events reached the reader: the same, but never
    /// retried (no text is delivered twice); `usage` is what it had reported so far.
    pub(crate) fn fail_delivered(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
        rule: AccountingRule,
        usage: Option<Usage>,
    ) {
        self.conclude(p, error, signals, rule, Some(Delivered(usage)));
    }

    fn conclude(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
        rule: AccountingRule,
        delivered: Option<Delivered>,
    ) -> Next {
        let values = signals.take();
        let context = FailureContext {
            rate_limited_before: self.rate_limited_before,
            should_retry: values.should_retry,
            in_chain: self.in_chain,
            several_deployments: self.rt.deployments.len() > 1,
            delivered: delivered.is_some(),
        };
        let verdict = verdict(error, &context);
        let Prepared {
            deployment,
            reservation,
            own,
            mark,
            hold,
            sent_at,
            worst_usd,
            span,
            ..
        } = p;
        let limiter = &self.rt.deployments[deployment].limiter;
        if let Some(feedback) = verdict.feedback {
            if let Feedback::RateLimited { .. } | Feedback::RateLimitedAgain { .. } = feedback {
                telemetry::measure_rate_limited(&self.rt, deployment);
                self.rate_limited_before = true;
            }
            limiter.feedback(feedback);
        }
        self.rt.breaker.observe(Some(verdict.health));
        let usage = match verdict.settle {
            Settle::AtUsage(usage) => {
                let cost = self.price_of(&usage);
                reservation.settle(&usage, rule);
                if let Some(own) = own {
                    own.settle(&usage, rule);
                }
                hold.settle(cost);
                usage
            }
            Settle::KeepRequest => {
                let requests = reservation.cost().requests;
                let counted = Cost {
                    requests,
                    ..Cost::default()
                };
                reservation.settle_counted(counted);
                if let Some(own) = own {
                    own.settle_counted(counted);
                }
                hold.settle(0.0);
                Usage::default()
            }
            // The provider may have done (and billed) the work: the charge stays.
            _ => {
                drop((reservation, own));
                hold.settle(worst_usd);
                delivered.and_then(|d| d.0).unwrap_or_default()
            }
        };
        // After settling, as for a success; a report carried by a refusal counts too.
        for feedback in values.feedback(Some(mark)) {
            limiter.feedback(feedback);
        }
        let cost = self.price_of(&usage);
        self.add_usage(&usage, cost);
        let next = self.retry_wait(verdict.retry);
        let wait = match next {
            Next::Retry(wait) => {
                self.retry_reason = Some(verdict.kind);
                Some(wait)
            }
            Next::GiveUp | Next::PastDeadline(_) => None,
        };
        let outcome = Outcome::of(error);
        self.record_attempt(deployment, &span, outcome, usage, sent_at.elapsed(), wait);
        next
    }

    /// The wait before the retry the verdict allows, within the retry policy, the call's
    /// deadline and the retry budget (the job's, else the call's own); a retry that would
    /// start past the bound on waiting is not waited for.
    fn retry_wait(&mut self, retry: Retry) -> Next {
        let floor = match retry {
            Retry::After(wait) => Some(wait),
            Retry::Now => Some(Duration::ZERO),
            Retry::Backoff => None,
            _ => return Next::GiveUp,
        };
        let policy = &self.rt.config.retry;
        // Checked before the budget: a wait we will not honour spends no retry.
        let Some(wait) = policy.delay(self.retries, floor, self.jitter.draw()) else {
            return Next::GiveUp;
        };
        // A retry that would start past the call's deadline is not made.
        if let Some(deadline) = self.rt.config.call_deadline
            && self.started.elapsed() + wait >= deadline
        {
            return Next::GiveUp;
        }
        let past_bound = self.deadline_at().is_some_and(|d| clock::now() + wait > d);
        if past_bound {
            // Only a retry that would be made is one the caller is told to wait for.
            let would_retry = match &self.job {
                Some(job) => job.retries_left() > 0,
                None => self.retries < policy.default_retries,
            };
            return if would_retry {
                Next::PastDeadline(wait)
            } else {
                Next::GiveUp
            };
        }
        let budget = match &self.job {
            Some(job) => job.take_retry(),
            None => self.retries < policy.default_retries,
        };
        if !budget {
            return Next::GiveUp;
        }
        self.retries += 1;
        Next::Retry(wait)
    }
}

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Retry after this wait.
    Retry(Duration),
    /// Give up: the attempt's error is the call's.
    GiveUp,
    /// The retry would start past the call's bound on waiting: the call fails now with
    /// [`Error::WouldWait`], this wait being how long until it could be made.
    PastDeadline(Duration),
}

/// A bounded wait on one limiter (or a model's deployments). `tried` is its answer when
/// asked without waiting: granted, taken; an estimate that ends past `deadline`,
/// [`Error::WouldWait`] with it at once, holding nothing. Else the call queues (`wait`)
/// until the deadline at most, even when the grant is pushed back meanwhile (a pause
/// after another call's 429, a lower learned limit): at the deadline the waiter is
/// dropped, which gives its place back, and the limiter's fresh estimate (`again`, asked
/// without waiting) is the answer; a grant due just then is taken.
async fn until_deadline<T, W, A, F>(
    deadline: Instant,
    tried: TryResult<T>,
    wait: W,
    again: A,
) -> Result<T>
where
    W: Future<Output = Result<T>>,
    A: FnOnce() -> F,
    F: Future<Output = TryResult<T>>,
{
    let ready_in = match tried {
        Ok(granted) => return Ok(granted),
        Err(TryReserveError::WouldWait { ready_in }) => ready_in,
        Err(e) => return Err(e.into()),
    };
    if clock::now() + ready_in > deadline {
        return Err(Error::WouldWait { ready_in });
    }
    match tokio::time::timeout_at(deadline, wait).await {
        Ok(granted) => granted,
        Err(_) => Ok(again().await?),
    }
}

/// What a limiter asked without waiting answers.
type TryResult<T> = std::result::Result<T, TryReserveError>;

/// The worst a call can cost: every input token at the dearest input price (a cache
/// write can cost more than plain input), and the whole output limit.
fn worst_case_usd(price: Option<&Price>, cost: &Cost) -> f64 {
    price.map_or(0.0, |p| {
        let input = p
            .input
            .max(p.cache_write)
            .max(p.cache_write_1h.unwrap_or(0.0));
        (cost.input_tokens as f64 * input + cost.output_tokens as f64 * p.output) / 1_000_000.0
    })
}

#[cfg(test)]
#[path = "attempt_tests.rs"]
mod tests;
