//! The chat client `Models::chat` hands out: the pipeline around a provider's
//! [`ChatTransport`].

use std::sync::Arc;

use futures::StreamExt;
use tracing::Instrument;

use super::answer::{Judgement, judge, refusal};
use super::answer_stream::PipelineStream;
use super::attempt::Answered;
use super::call::{CallState, Deadline};
use super::job::JobContext;
use super::record::Outcome;
use super::runtime::ModelRuntime;
use super::shape;
use super::telemetry;
use crate::client::{LlmClient, TokenCount, TokenCounter};
use crate::conversation::{Message, Role};
use crate::error::{Error, ProviderError, Result};
use crate::limit::{Cost, Reservation};
use crate::provider::{ChatTransport, Signals, TokenCounting};
use crate::request::LlmRequest;
use crate::response::LlmResponse;
use crate::stream::{ResponseStream, StreamEvent};

/// A chat client for one catalog model, running every call through the pipeline.
#[derive(Debug)]
pub(crate) struct PipelineChat {
    pub(crate) rt: Arc<ModelRuntime>,
    /// The first deployment's transport (estimates and accounting).
    pub(crate) transport: Arc<dyn ChatTransport>,
    /// One per deployment of the model.
    pub(crate) transports: Arc<[Arc<dyn ChatTransport>]>,
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
    /// when the call was routed here with one, and it waits within `deadline` when it
    /// was routed with one (else its own, if its job is bounded).
    pub(crate) async fn answer_recorded(
        &self,
        request: &LlmRequest,
        reservation: Option<(usize, Reservation)>,
        deadline: Option<Deadline>,
    ) -> Result<LlmResponse> {
        let mut call = CallState::new(self.rt.clone(), self.job.clone(), "chat")
            .with_content(request)
            .with_reservation(reservation)
            .with_deadline(deadline);
        call.in_chain = self.in_chain;
        telemetry::record_request(call.span(), request);
        let span = call.span().clone();
        let result = self.answer(&mut call, request).instrument(span).await;
        call.finish(result.as_ref().map(|_| ()));
        result
    }

    /// Checks that the request is for this client's model: its id, or an alias or
    /// pattern's name the catalog resolves to it.
    fn check_model(&self, request: &LlmRequest) -> Result<()> {
        let entry = &self.rt.entry;
        if !self.rt.answers_to(request.model_id()) {
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
        Ok(())
    }

    /// Checks the request against the model and fills in the output limit; a request
    /// naming the model by an alias or pattern goes on under the model's catalog id.
    fn prepare_request(&self, request: &LlmRequest) -> Result<(LlmRequest, u64)> {
        self.check_model(request)?;
        let entry = &self.rt.entry;
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
        let request = if request.model_id() == entry.id {
            request.clone()
        } else {
            request.with_model_id(entry.id.clone())?
        };
        let request = if request.sampling_params().max_output_tokens() == Some(limit) {
            request
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
                .run(Cost::call(input, limit), rule, send, |r| {
                    Outcome::of_answer(r)
                })
                .await
                .map_err(|e| self.name_overflow(e, input, limit))?;
            call.responded(response.model(), response.stop_reason().as_str());
            match judge(&response, request.sampling_params(), true)? {
                Judgement::Accept => {}
                // A larger output limit cannot help, so no re-run.
                Judgement::WindowFull => return Err(self.overflow(input, limit)),
                Judgement::CutOff
                    if limit < self.rerun_limit(input, ceiling) && !rerun_at_ceiling =>
                {
                    // Cut off below the ceiling: once more with the model's whole ceiling
                    // (or as much of it as the context window leaves room for).
                    rerun_at_ceiling = true;
                    limit = self.rerun_limit(input, ceiling);
                    request = request.with_max_output_tokens(limit)?;
                    continue;
                }
                Judgement::CutOff => {
                    return Err(Error::OutputTruncated {
                        model_id: self.rt.entry.id.clone(),
                        max_output_tokens: limit,
                    });
                }
                // Settled and costed above: the provider bills a refused answer.
                Judgement::Refused => return Err(refusal(&response, 0)),
                Judgement::MissesShape(errors) => {
                    let Some(shape) = request.sampling_params().response_shape().cloned() else {
                        return Err(Error::ShapeInvalid { errors });
                    };
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
            }
            return Ok(response);
        }
    }
}

#[async_trait::async_trait]
impl LlmClient for PipelineChat {
    async fn single_response(&self, request: &LlmRequest) -> Result<LlmResponse> {
        self.answer_recorded(request, None, None).await
    }

    async fn stream_response(&self, request: &LlmRequest) -> Result<ResponseStream> {
        Ok(self.stream_routed(request, None, None).await?.stream)
    }

    /// The first deployment's counter (one send with its credential, no reservation, no
    /// retry), else the input estimate; in a `tollgate.count_tokens` span.
    async fn count_input_tokens(&self, request: &LlmRequest) -> Result<TokenCount> {
        self.check_model(request)?;
        let span = telemetry::count_span(&self.rt);
        let counted = match self
            .transport
            .count_input_tokens(request)
            .instrument(span.clone())
            .await
        {
            TokenCounting::Counted(input_tokens) => TokenCount {
                input_tokens,
                counted_by: TokenCounter::Provider,
            },
            TokenCounting::Unsupported => TokenCount {
                input_tokens: self.input_estimate(request),
                counted_by: TokenCounter::Estimate,
            },
            TokenCounting::Failed(e) => {
                telemetry::record_count(&span, Err(&e));
                return Err(e);
            }
        };
        telemetry::record_count(&span, Ok(&counted));
        Ok(counted)
    }
}

/// A stream a call opened, and whether its answer was refused at once (its one event is
/// the refused answer, for a caller that takes refusals as answers): a fallback chain
/// with `on_refusal` moves on from it.
pub(crate) struct OpenedStream {
    /// The reader's stream.
    pub(crate) stream: ResponseStream,
    /// The answer was refused before anything else was streamed.
    pub(crate) refused: bool,
}

impl PipelineChat {
    /// Opens a stream on this model; the first attempt uses `reservation` (and waits
    /// within `deadline`) when the call was routed here with one. Failures before the
    /// first event reaches the reader are retried like any other, through the same
    /// attempt loop as single answers.
    pub(crate) async fn stream_routed(
        &self,
        request: &LlmRequest,
        reservation: Option<(usize, Reservation)>,
        deadline: Option<Deadline>,
    ) -> Result<OpenedStream> {
        let mut call = CallState::new(self.rt.clone(), self.job.clone(), "chat_stream")
            .with_content(request)
            .with_reservation(reservation)
            .with_deadline(deadline);
        call.in_chain = self.in_chain;
        telemetry::record_request(call.span(), request);
        let opened = self.open_stream(&mut call, request).await;
        match opened {
            Ok((answered, request, input, limit)) => {
                let params = request.sampling_params().clone();
                let idle = self.rt.entry.stream_idle_timeout();
                let overflow = self.overflow(input, limit);
                let rule = self.transport.accounting();
                let mut stream = PipelineStream::new(call, answered, idle, rule, params, overflow);
                let refused = stream.refused_at_once()?;
                let provider = self.rt.entry.provider.clone();
                Ok(OpenedStream {
                    stream: ResponseStream::new(stream).with_provider(provider),
                    refused,
                })
            }
            Err(e) => {
                call.finish(Err(&e));
                Err(e)
            }
        }
    }

    /// Runs attempts until one's stream yields its first event: the attempt's deadline
    /// bounds the whole opening, the idle timeout the wait for the first event once the
    /// answer has begun.
    async fn open_stream(
        &self,
        call: &mut CallState,
        request: &LlmRequest,
    ) -> Result<(
        Answered<(ResponseStream, StreamEvent)>,
        LlmRequest,
        u64,
        u64,
    )> {
        let (request, limit) = self.prepare_request(request)?;
        let input = self.input_estimate(&request);
        self.check_window(input, limit)?;
        call.set_max_tokens(limit);
        let idle = self.rt.entry.stream_idle_timeout();
        let send = |deployment: usize| {
            let (transport, request) = (self.transports[deployment].clone(), request.clone());
            async move {
                let signals = Signals::default();
                let first = async {
                    let mut stream = transport.send_stream(&request, &signals).await?;
                    match tokio::time::timeout(idle, stream.next()).await {
                        Err(_) => Err(ProviderError::Timeout { after: Some(idle) }.into()),
                        Ok(Some(Ok(first))) => Ok((stream, first)),
                        Ok(Some(Err(e))) => Err(e),
                        Ok(None) => Err(crate::provider::malformed(
                            "the stream ended before its first event",
                            b"",
                        )),
                    }
                };
                (first.await, signals)
            }
        };
        let answered = call
            .attempt(Cost::call(input, limit), self.transport.accounting(), send)
            .await
            .map_err(|e| self.name_overflow(e, input, limit))?;
        Ok((answered, request, input, limit))
    }
}
