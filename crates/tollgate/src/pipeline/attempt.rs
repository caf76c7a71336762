//! A call's attempts, in one loop for every operation (single answers, streams,
//! embeddings, decisions): prepare (circuit, spend cap, reservation), send, then on a
//! failure apply the [`super::verdict`] (tell the limiter and the breaker, settle the
//! holdings, record) and wait for the retry or give up.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::call::CallState;
use super::job::{JobContext, SpendHold};
use super::record::Outcome;
use super::telemetry;
use super::transport::Signals;
use super::verdict::{FailureContext, Retry, Settle, verdict};
use crate::catalog::Price;
use crate::clock;
use crate::error::{Error, ProviderError, Result};
use crate::limit::{AccountingRule, Cost, Feedback, Reservation, SendMark, TryReserveError};
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
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(error),
                },
            }
        }
    }

    /// [`CallState::attempt`] for a single answer: settles it at the usage it reports.
    pub(crate) async fn run<T, F, Fut>(
        &mut self,
        cost: Cost,
        rule: AccountingRule,
        send: F,
    ) -> Result<(T, Usage)>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = (Result<(T, Usage)>, Signals)>,
    {
        let answered = self.attempt(cost, rule, send).await?;
        let (value, usage) = answered.value;
        self.succeed(answered.prepared, &usage, rule, &answered.signals);
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

    /// The attempt's reservation on the job's own buckets, if it has any: bounded by the
    /// job's `max_wait` as the model's is (past it, the limiter's estimate as
    /// [`Error::WouldWait`]).
    async fn reserve_own(&self, cost: Cost) -> Result<Option<Reservation>> {
        let Some(job) = &self.job else {
            return Ok(None);
        };
        let Some(limiter) = job.limiter() else {
            return Ok(None);
        };
        let priority = job.priority();
        if let Some(max_wait) = job.max_wait()
            && let Some(reservation) = within(max_wait, limiter.try_reserve(cost, priority).await)?
        {
            return Ok(Some(reservation));
        }
        Ok(Some(limiter.reserve(cost, priority).await?))
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
        // A bounded job asks without waiting first; if the limiter's own estimate is
        // past the bound, the call fails now with that estimate, holding nothing.
        if let Some(max_wait) = self.job.as_ref().and_then(JobContext::max_wait)
            && let Some((i, reservation)) =
                within(max_wait, self.rt.try_reserve_any(cost, priority).await)?
        {
            return Ok((i, reservation, Vec::new()));
        }
        let (i, reservation) = self.rt.reserve_any(cost, priority).await?;
        Ok((i, reservation, Vec::new()))
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

    /// An attempt answered: settle everything at what it used.
    pub(crate) fn succeed(
        &mut self,
        p: Prepared,
        usage: &Usage,
        rule: AccountingRule,
        signals: &Signals,
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
        self.record_attempt(deployment, &p.span, Outcome::Success, *usage, latency, None);
    }

    /// An attempt failed before anything reached the reader: apply the verdict on
    /// `error` (the limiter and the breaker learn, the holdings settle, the attempt is
    /// recorded) and say how long to wait before the retry, or `None` to give up.
    pub(crate) fn fail(
        &mut self,
        p: Prepared,
        error: &Error,
        signals: &Signals,
        rule: AccountingRule,
    ) -> Option<Duration> {
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
    ) -> Option<Duration> {
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
        let wait = self.retry_wait(verdict.retry);
        if wait.is_some() {
            self.retry_reason = Some(verdict.kind);
        }
        let outcome = Outcome::of(error);
        self.record_attempt(deployment, &span, outcome, usage, sent_at.elapsed(), wait);
        wait
    }

    /// The wait before the retry the verdict allows, within the retry policy, the call's
    /// deadline and the retry budget (the job's, else the call's own).
    fn retry_wait(&mut self, retry: Retry) -> Option<Duration> {
        let floor = match retry {
            Retry::After(wait) => Some(wait),
            Retry::Now => Some(Duration::ZERO),
            Retry::Backoff => None,
            _ => return None,
        };
        let policy = &self.rt.config.retry;
        // Checked before the budget: a wait we will not honour spends no retry.
        let wait = policy.delay(self.retries, floor, self.jitter.draw())?;
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
}

/// A bounded wait's first ask, made without waiting: granted, `Some`; the limiter's
/// estimate past `bound`, [`Error::WouldWait`] with it (nothing reserved); within it,
/// `None` (go and wait).
fn within<T>(bound: Duration, tried: Result<T, TryReserveError>) -> Result<Option<T>> {
    match tried {
        Ok(granted) => Ok(Some(granted)),
        Err(TryReserveError::WouldWait { ready_in }) if ready_in > bound => {
            Err(Error::WouldWait { ready_in })
        }
        Err(TryReserveError::WouldWait { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

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
