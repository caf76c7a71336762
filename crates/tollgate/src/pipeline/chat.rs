//! The chat client `Models::chat` hands out: the pipeline around a provider's
//! [`ChatTransport`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::time::Sleep;
use tracing::Instrument;

use super::call::{CallState, Prepared};
use super::engine::ModelRuntime;
use super::job::JobContext;
use super::shape;
use super::telemetry;
use super::transport::{ChatTransport, Signals};
use crate::client::LlmClient;
use crate::clock;
use crate::conversation::{Message, Role};
use crate::error::{ConnectionCause, Error, ProviderError, Result};
use crate::limit::{AccountingRule, Cost, Reservation};
use crate::request::{LlmRequest, ResponseShape};
use crate::response::{LlmResponse, StopReason};
use crate::stream::{ResponseStream, StreamEvent};
use crate::usage::Usage;

/// A chat client for one catalog model, running every call through the pipeline.
#[derive(Debug)]
pub(crate) struct PipelineChat {
    pub(crate) rt: Arc<ModelRuntime>,
    /// The first deployment's transport (estimates and accounting).
    pub(crate) transport: Arc<dyn ChatTransport>,
    /// One per deployment of the model.
    pub(crate) transports: Vec<Arc<dyn ChatTransport>>,
    pub(crate) job: Option<JobContext>,
    /// Set for the members of a fallback chain: a 429 ends the attempt on this model.
    pub(crate) in_chain: bool,
}

impl PipelineChat {
    /// What a call of `request` would reserve on this model (for a chain picking one).
    pub(crate) fn probe_cost(&self, request: &LlmRequest) -> Result<Cost> {
        let (request, limit) = self.prepare_request(request)?;
        Ok(Cost::call(self.input_estimate(&request), limit))
    }

    /// Answers on this model, recording the call; the first attempt uses `reservation`
    /// when the call was routed here with one.
    pub(crate) async fn answer_recorded(
        &self,
        request: &LlmRequest,
        reservation: Option<(usize, Reservation)>,
    ) -> Result<LlmResponse> {
        let mut call = CallState::new(self.rt.clone(), self.job.clone(), "chat")
            .with_content(request)
            .with_reservation(reservation);
        call.rate_limited_is_final = self.in_chain;
        telemetry::record_request(call.span(), request);
        let span = call.span().clone();
        let result = self.answer(&mut call, request).instrument(span).await;
        call.finish(result.as_ref().map(|_| ()));
        result
    }

    /// Checks the request against the model and fills in the output limit.
    fn prepare_request(&self, request: &LlmRequest) -> Result<(LlmRequest, u64)> {
        let entry = &self.rt.entry;
        if request.model_id() != entry.id {
            return Err(Error::InvalidRequest {
                field: "model_id".into(),
                reason: format!(
                    "is `{}` but this client serves model `{}`; ask Models::chat for `{}`",
                    request.model_id(),
                    entry.id,
                    request.model_id()
                ),
            });
        }
        let ceiling = entry.max_output_tokens.unwrap_or(u64::MAX);
        let limit = entry
            .output_limit(request.sampling_params().max_output_tokens())
            .unwrap_or(ceiling);
        if limit > ceiling {
            return Err(Error::InvalidRequest {
                field: "sampling_params.max_output_tokens".into(),
                reason: format!(
                    "is {limit}, above model `{}`'s output ceiling of {ceiling}",
                    entry.id
                ),
            });
        }
        let request = if request.sampling_params().max_output_tokens() == Some(limit) {
            request.clone()
        } else {
            request.with_max_output_tokens(limit)?
        };
        Ok((request, limit))
    }

    /// The call's input estimate: counted once per call (a tokenizer's count of a long
    /// prompt takes milliseconds) and reused for the cost, the window check, a re-run's
    /// limit and an overflow's figures; the output limit is not part of it.
    fn input_estimate(&self, request: &LlmRequest) -> u64 {
        self.transport.estimate_input_tokens(request)
    }

    /// The output limit of the re-run of a cut-off answer: the ceiling, lowered to what
    /// the context window leaves after the input estimate.
    fn rerun_limit(&self, input: u64, ceiling: u64) -> u64 {
        match self.rt.entry.context_window {
            Some(window) => ceiling.min(window.saturating_sub(input)),
            None => ceiling,
        }
    }

    /// The call's input estimate plus `limit` must fit the catalog's `context_window`
    /// (when it sets one); checked before anything is reserved or sent.
    fn check_window(&self, input: u64, limit: u64) -> Result<()> {
        let needed = input.saturating_add(limit);
        match self.rt.entry.context_window {
            Some(window) if needed > window => Err(Error::ContextWindowExceeded {
                model_id: self.rt.entry.id.clone(),
                needed,
                window: Some(window),
            }),
            _ => Ok(()),
        }
    }

    /// A context overflow the provider reported (by code or stop reason), with the model,
    /// tollgate's estimate of the need and the catalog's window filled in.
    fn overflow(&self, input: u64, limit: u64) -> Error {
        Error::ContextWindowExceeded {
            model_id: self.rt.entry.id.clone(),
            needed: input.saturating_add(limit),
            window: self.rt.entry.context_window,
        }
    }

    /// Fills in a provider's context-overflow error; other errors pass through.
    fn name_overflow(&self, error: Error, input: u64, limit: u64) -> Error {
        match error {
            Error::ContextWindowExceeded { .. } => self.overflow(input, limit),
            other => other,
        }
    }

    async fn answer(&self, call: &mut CallState, request: &LlmRequest) -> Result<LlmResponse> {
        let (mut request, mut limit) = self.prepare_request(request)?;
        let input = self.input_estimate(&request);
        let ceiling = self.rt.entry.max_output_tokens.unwrap_or(limit);
        let rule = self.transport.accounting();
        let mut corrections = 0;
        let mut rerun_at_ceiling = false;
        loop {
            self.check_window(input, limit)?;
            call.set_max_tokens(limit);
            let send = |deployment: usize| {
                let (transport, request) = (self.transports[deployment].clone(), request.clone());
                async move {
                    let signals = Signals::default();
                    let result = transport.send(&request, &signals).await.map(|r| {
                        let usage = r.usage();
                        (r, usage)
                    });
                    (result, signals)
                }
            };
            let (response, _) = call
                .run(Cost::call(input, limit), rule, send)
                .await
                .map_err(|e| self.name_overflow(e, input, limit))?;
            call.responded(response.model(), stop_name(response.stop_reason()));
            match response.stop_reason() {
                // The window is full: a larger output limit cannot help, so no re-run.
                StopReason::ContextWindowExceeded => return Err(self.overflow(input, limit)),
                StopReason::MaxTokens
                    if limit < self.rerun_limit(input, ceiling) && !rerun_at_ceiling =>
                {
                    // Cut off below the ceiling: once more with the model's whole ceiling
                    // (or as much of it as the context window leaves room for).
                    rerun_at_ceiling = true;
                    limit = self.rerun_limit(input, ceiling);
                    request = request.with_max_output_tokens(limit)?;
                    continue;
                }
                StopReason::MaxTokens => {
                    return Err(Error::OutputTruncated {
                        model_id: self.rt.entry.id.clone(),
                        max_output_tokens: limit,
                    });
                }
                // Settled and costed above: the provider bills a refused answer.
                StopReason::Refusal | StopReason::ContentFilter => {
                    return Err(refusal(&response, 0));
                }
                _ => {}
            }
            if let Some(shape) = request.sampling_params().response_shape().cloned()
                && let Err(errors) = shape::check(&shape, &response.text())?
            {
                if corrections >= self.rt.config.max_corrections {
                    return Err(Error::ShapeInvalid { errors });
                }
                corrections += 1;
                request = request.with_appended([
                    Message {
                        role: Role::Assistant,
                        content: response.blocks().to_vec(),
                    },
                    Message::user(shape::correction(&shape, &errors)),
                ])?;
                continue;
            }
            return Ok(response);
        }
    }
}

/// The refusal an answer that stopped with a refusal or a content filter stands for,
/// with its usage and the stream events delivered before it.
fn refusal(response: &LlmResponse, delivered_events: u64) -> Error {
    Error::ProviderRefusal {
        category: stop_name(response.stop_reason()).into(),
        explanation: response.text(),
        usage: response.usage(),
        delivered_events,
    }
}

fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ToolUse => "tool_use",
        StopReason::Refusal => "refusal",
        StopReason::ContentFilter => "content_filter",
        StopReason::ContextWindowExceeded => "context_window_exceeded",
    }
}

#[async_trait::async_trait]
impl LlmClient for PipelineChat {
    async fn single_response(&self, request: &LlmRequest) -> Result<LlmResponse> {
        self.answer_recorded(request, None).await
    }

    async fn stream_response(&self, request: &LlmRequest) -> Result<ResponseStream> {
        self.stream_routed(request, None).await
    }
}

impl PipelineChat {
    /// Opens a stream on this model; the first attempt uses `reservation` when the call
    /// was routed here with one.
    pub(crate) async fn stream_routed(
        &self,
        request: &LlmRequest,
        reservation: Option<(usize, Reservation)>,
    ) -> Result<ResponseStream> {
        let mut call = CallState::new(self.rt.clone(), self.job.clone(), "chat_stream")
            .with_content(request)
            .with_reservation(reservation);
        call.rate_limited_is_final = self.in_chain;
        telemetry::record_request(call.span(), request);
        let (request, limit) = match self.prepare_request(request) {
            Ok(prepared) => prepared,
            Err(e) => {
                call.finish(Err(&e));
                return Err(e);
            }
        };
        let input = self.input_estimate(&request);
        if let Err(e) = self.check_window(input, limit) {
            call.finish(Err(&e));
            return Err(e);
        }
        let cost = Cost::call(input, limit);
        call.set_max_tokens(limit);
        loop {
            let timeout = call.attempt_timeout();
            let prepared = match call.prepare(cost).await {
                Ok(p) => p,
                Err(e) => {
                    call.finish(Err(&e));
                    return Err(e);
                }
            };
            let signals = Signals::default();
            let idle = self.rt.entry.stream_idle_timeout();
            // Failures before the first event reaches the reader are retried like any
            // other: the attempt's deadline bounds the whole opening, the idle timeout the
            // wait for the first event once the answer has begun.
            let opened = tokio::time::timeout(
                timeout,
                async {
                    let transport = &self.transports[prepared.deployment];
                    let mut stream = transport.send_stream(&request, &signals).await?;
                    match tokio::time::timeout(idle, stream.next()).await {
                        Err(_) => Err(ProviderError::Timeout { after: Some(idle) }.into()),
                        Ok(Some(Ok(first))) => Ok((stream, first)),
                        Ok(Some(Err(e))) => Err(e),
                        Ok(None) => Err(crate::wire::malformed(
                            "the stream ended before its first event",
                            b"",
                        )),
                    }
                }
                .instrument(prepared.span.clone()),
            )
            .await
            .unwrap_or_else(|_| {
                Err(ProviderError::Timeout {
                    after: Some(timeout),
                }
                .into())
            });
            let opened = opened.map_err(|e: Error| e.with_provider(&call.entry().provider));
            match opened {
                Ok((inner, first)) => {
                    call.time_to_first_token = Some(call.started().elapsed());
                    let deadline = self.rt.config.call_deadline.map(|after| {
                        (
                            after,
                            Box::pin(tokio::time::sleep_until(call.started() + after)),
                        )
                    });
                    return Ok(ResponseStream::new(PipelineStream {
                        idle,
                        idle_timer: Box::pin(tokio::time::sleep(idle)),
                        deadline,
                        inner,
                        first: Some(first),
                        prepared: Some(prepared),
                        signals,
                        call,
                        rule: self.transport.accounting(),
                        shape: request.sampling_params().response_shape().cloned(),
                        overflow: Some(self.overflow(input, limit)),
                        delivered: 0,
                        done: false,
                        last_usage: None,
                    }));
                }
                Err(e) => match call.fail(prepared, &e, &signals, self.transport.accounting()) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => {
                        let e = self.name_overflow(e, input, limit);
                        call.finish(Err(&e));
                        return Err(e);
                    }
                },
            }
        }
    }
}

/// The stream handed to the reader: events pass through; a failure after the first event
/// ends it with [`Error::StreamInterrupted`] (never re-sent, so no text twice), and so
/// does a gap of more than the model's idle timeout between events, or the call's
/// deadline; a refusal ends it with [`Error::ProviderRefusal`]; the completed response
/// (or the refusal) settles the reservation and the spend cap at its usage.
struct PipelineStream {
    /// The longest gap allowed between events.
    idle: Duration,
    /// Fires `idle` after the last event.
    idle_timer: Pin<Box<Sleep>>,
    /// The call's deadline and its timer, when the pipeline sets one.
    deadline: Option<(Duration, Pin<Box<Sleep>>)>,
    inner: ResponseStream,
    first: Option<StreamEvent>,
    prepared: Option<Prepared>,
    signals: Signals,
    call: CallState,
    rule: AccountingRule,
    shape: Option<ResponseShape>,
    /// The error a `ContextWindowExceeded` stop ends the stream with.
    overflow: Option<Error>,
    delivered: u64,
    done: bool,
    /// The usage the stream reported last (providers report it cumulatively).
    last_usage: Option<Usage>,
}

impl PipelineStream {
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
            .responded(response.model(), stop_name(response.stop_reason()));
        if let Some(p) = self.prepared.take() {
            self.call
                .succeed(p, &response.usage(), self.rule, &self.signals);
        }
        let outcome = match &self.shape {
            // Settled at its usage above: the provider bills a refused answer.
            _ if matches!(
                response.stop_reason(),
                StopReason::Refusal | StopReason::ContentFilter
            ) =>
            {
                Err(refusal(response, self.delivered))
            }
            _ if response.stop_reason() == StopReason::ContextWindowExceeded => Err(self
                .overflow
                .take()
                .unwrap_or_else(Error::provider_context_overflow)),
            Some(shape) => match shape::check(shape, &response.text()) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(errors)) => Err(Error::ShapeInvalid { errors }),
                Err(e) => Err(e),
            },
            None => Ok(()),
        };
        self.call.finish(outcome.as_ref().map(|_| ()));
        outcome.map(|()| event)
    }

    fn interrupted(&mut self, cause: Error) -> Error {
        let cause = cause.with_provider(&self.call.entry().provider);
        self.done = true;
        // Close the connection now, not when the reader drops the stream.
        self.inner = ResponseStream::new(futures::stream::empty());
        if let Error::ProviderRefusal {
            category,
            explanation,
            usage,
            ..
        } = cause
        {
            // A refusal is the answer, not a break: settled and costed at its usage.
            let error = Error::ProviderRefusal {
                category,
                explanation,
                usage,
                delivered_events: self.delivered,
            };
            if let Some(p) = self.prepared.take() {
                self.call.fail(p, &error, &self.signals, self.rule);
            }
            self.call.finish(Err(&error));
            return error;
        }
        if let Some(p) = self.prepared.take() {
            // Never retried: the reader already has part of the answer.
            self.call
                .fail_final(p, &cause, &self.signals, self.last_usage);
        }
        let error = Error::StreamInterrupted {
            model_id: self.call.entry().id.clone(),
            delivered_events: self.delivered,
            cause: Box::new(cause),
        };
        self.call.finish(Err(&error));
        error
    }
}

impl Stream for PipelineStream {
    type Item = Result<StreamEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
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
                        Poll::Ready(Some(Err(this.interrupted(cause))))
                    }
                    None => Poll::Pending,
                }
            }
            Poll::Ready(Some(Ok(event))) => {
                let next = clock::now() + this.idle;
                this.idle_timer.as_mut().reset(next);
                Poll::Ready(Some(this.on_event(event)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(this.interrupted(e)))),
            Poll::Ready(None) => {
                let cause = ProviderError::Connection {
                    cause: ConnectionCause::ClosedEarly,
                    detail: "the stream ended without its completed response".into(),
                }
                .into();
                Poll::Ready(Some(Err(this.interrupted(cause))))
            }
        }
    }
}
