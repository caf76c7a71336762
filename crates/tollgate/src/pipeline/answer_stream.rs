//! The stream a chat call hands its reader: events pass through, and the call settles,
//! records and ends when the answer completes or breaks (see [`PipelineStream`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Sleep;

use super::answer::{Judgement, judge, refusal};
use super::attempt::{Answered, Prepared};
use super::call::CallState;
use super::record::Outcome;
use crate::clock;
use crate::error::{ConnectionCause, Error, ProviderError, Result};
use crate::limit::AccountingRule;
use crate::provider::Signals;
use crate::request::SamplingParams;
use crate::stream::{ResponseStream, StreamEvent};
use crate::usage::Usage;

/// The stream handed to the reader: events pass through; a failure after the first event
/// ends it with [`Error::StreamInterrupted`] (never re-sent, so no text twice), and so
/// does a gap of more than the model's idle timeout between events, or the call's
/// deadline; a refused answer ends it with [`Error::ProviderRefusal`] (or is the last
/// event, for a caller that takes refusals as answers); the completed response (refused
/// or not) settles the reservation and the spend cap at its usage.
pub(super) struct PipelineStream {
    /// The longest gap allowed between events.
    idle: Duration,
    /// Fires `idle` after the last event.
    idle_timer: Pin<Box<Sleep>>,
    /// The call's deadline and its timer, when the pipeline sets one.
    deadline: Option<(Duration, Pin<Box<Sleep>>)>,
    inner: ResponseStream,
    first: Option<StreamEvent>,
    /// An event already judged, handed to the reader as it is ([`Self::refused_at_once`]).
    ready: Option<StreamEvent>,
    prepared: Option<Prepared>,
    signals: Signals,
    call: CallState,
    rule: AccountingRule,
    /// The request's settings, which the answer is judged by.
    params: SamplingParams,
    /// The error a `ContextWindowExceeded` stop ends the stream with.
    overflow: Option<Error>,
    delivered: u64,
    done: bool,
    /// The usage the stream reported last (providers report it cumulatively).
    last_usage: Option<Usage>,
}

impl PipelineStream {
    /// The stream of an attempt that answered with its first event. `idle`: the longest
    /// gap allowed between events; `overflow`: the error a context-overflow stop ends it
    /// with; the call's deadline, when the pipeline sets one, bounds the whole stream.
    pub(super) fn new(
        mut call: CallState,
        answered: Answered<(ResponseStream, StreamEvent)>,
        idle: Duration,
        rule: AccountingRule,
        params: SamplingParams,
        overflow: Error,
    ) -> Self {
        call.time_to_first_token = Some(call.started().elapsed());
        let deadline = call.rt.config.call_deadline.map(|after| {
            let timer = Box::pin(tokio::time::sleep_until(call.started() + after));
            (after, timer)
        });
        let Answered {
            value: (inner, first),
            prepared,
            signals,
        } = answered;
        PipelineStream {
            idle,
            idle_timer: Box::pin(tokio::time::sleep(idle)),
            deadline,
            inner,
            first: Some(first),
            ready: None,
            prepared: Some(prepared),
            signals,
            call,
            rule,
            params,
            overflow: Some(overflow),
            delivered: 0,
            done: false,
            last_usage: None,
        }
    }

    fn on_event(&mut self, event: StreamEvent) -> Result<StreamEvent> {
        let StreamEvent::Completed(response) = &event else {
            if let StreamEvent::Usage(usage) = &event {
                self.last_usage = Some(*usage);
            }
            self.delivered += 1;
            return Ok(event);
        };
        self.done = true;
        self.call
            .responded(response.model(), response.stop_reason().as_str());
        if let Some(p) = self.prepared.take() {
            let outcome = Outcome::of_answer(response);
            self.call
                .succeed(p, &response.usage(), self.rule, &self.signals, outcome);
        }
        let outcome = match judge(response, &self.params, false) {
            Ok(Judgement::Accept | Judgement::CutOff) => Ok(()),
            // Settled at its usage above: the provider bills a refused answer.
            Ok(Judgement::Refused) => Err(refusal(response, self.delivered)),
            Ok(Judgement::WindowFull) => Err(self
                .overflow
                .take()
                .unwrap_or_else(Error::provider_context_overflow)),
            Ok(Judgement::MissesShape(errors)) => Err(Error::ShapeInvalid { errors }),
            Err(e) => Err(e),
        };
        self.call.finish(outcome.as_ref().map(|_| ()));
        outcome.map(|()| event)
    }

    /// When the first event is the whole answer and it is refused (the reader has
    /// nothing yet), settles and judges it now: `Err` with the refusal for a caller that
    /// does not take refusals as answers, so the call fails before it has a stream (and a
    /// fallback chain may move on), else `Ok(true)` with the refused answer kept as the
    /// stream's one event. `Ok(false)`: the stream did not open with a refusal.
    pub(super) fn refused_at_once(&mut self) -> Result<bool> {
        let refused = matches!(
            &self.first,
            Some(StreamEvent::Completed(r)) if r.stop_reason().is_refusal()
        );
        if !refused {
            return Ok(false);
        }
        let Some(first) = self.first.take() else {
            return Ok(false);
        };
        self.ready = Some(self.on_event(first)?);
        Ok(true)
    }

    /// The stream broke with `cause`: the reader's last item. A refusal is never a
    /// break (codecs end a refused stream with its answer, judged in [`Self::on_event`]).
    fn broken(&mut self, cause: Error) -> Result<StreamEvent> {
        let cause = cause.with_provider(&self.call.entry().provider);
        self.done = true;
        // Close the connection now, not when the reader drops the stream.
        self.inner = ResponseStream::new(futures::stream::empty());
        if let Some(p) = self.prepared.take() {
            // Never retried: the reader already has part of the answer.
            self.call
                .fail_delivered(p, &cause, &self.signals, self.rule, self.last_usage);
        }
        let error = Error::StreamInterrupted {
            model_id: self.call.entry().id.clone(),
            delivered_events: self.delivered,
            cause: Box::new(cause),
        };
        self.call.finish(Err(&error));
        Err(error)
    }
}

impl Drop for PipelineStream {
    /// The reader dropped the stream before it completed (a gateway's client hung up):
    /// the upstream stream is dropped with it, which closes the connection and cancels
    /// the call; the attempt is concluded by the one verdict as `Cancelled` after
    /// delivery: never retried, its reservation's charge kept (the provider counted the
    /// request and what it generated), the spend cap settled at the worst case, and the
    /// usage reported so far recorded.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(p) = self.prepared.take() {
            self.call.fail_delivered(
                p,
                &Error::Cancelled,
                &self.signals,
                self.rule,
                self.last_usage,
            );
        }
        self.call.finish(Err(&Error::Cancelled));
    }
}

impl Stream for PipelineStream {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(ready) = this.ready.take() {
            return Poll::Ready(Some(Ok(ready)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(this.on_event(first)));
        }
        match this.inner.poll_next_unpin(cx) {
            Poll::Pending => {
                let deadline = match &mut this.deadline {
                    Some((after, timer)) => timer.as_mut().poll(cx).is_ready().then_some(*after),
                    None => None,
                };
                let expired = deadline.or_else(|| {
                    this.idle_timer
                        .as_mut()
                        .poll(cx)
                        .is_ready()
                        .then_some(this.idle)
                });
                match expired {
                    Some(after) => {
                        let cause = ProviderError::Timeout { after: Some(after) }.into();
                        Poll::Ready(Some(this.broken(cause)))
                    }
                    None => Poll::Pending,
                }
            }
            Poll::Ready(Some(Ok(event))) => {
                let next = clock::now() + this.idle;
                this.idle_timer.as_mut().reset(next);
                Poll::Ready(Some(this.on_event(event)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(this.broken(e))),
            Poll::Ready(None) => {
                let cause = ProviderError::Connection {
                    cause: ConnectionCause::ClosedEarly,
                    detail: "the stream ended without its completed response".into(),
                }
                .into();
                Poll::Ready(Some(this.broken(cause)))
            }
        }
    }
}
