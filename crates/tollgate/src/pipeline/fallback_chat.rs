//! A chat client over a model and its catalog fallbacks.
//!
//! Each call goes to the first candidate that can serve it now: circuit not open, bucket
//! able to take the call at once (a model paused after a 429 cannot); when none can, the
//! one the chain's [`FallbackWait`] rule picks is waited for (by default the one that
//! could soonest; or only the last remaining one). A 429 moves the call on, as its verdict says
//! (drawing on the retry budget), and pauses that model's limiter for its `retry-after`. With [`FallbackOptions::on_refusal`], a refusal moves
//! the call to the next model too, and never back to the one that refused. With
//! [`FallbackOptions::on_context_overflow`], a call too large for a model's context window
//! moves to the next model with a larger one.

use super::call::Deadline;
use super::chat::{OpenedStream, PipelineChat};
use super::verdict::{FailureContext, verdict};
use crate::catalog::FallbackWait;
use crate::client::{LlmClient, TokenCount};
use crate::error::{Error, Result};
use crate::limit::{Reservation, TryReserveError, Waiter};
use crate::request::LlmRequest;
use crate::response::LlmResponse;
use crate::stream::ResponseStream;

/// How a fallback chat client behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FallbackOptions {
    /// Move to the next model when a model refuses (off by default: a refusal is usually
    /// about the request, and another model may answer what the first declined).
    pub on_refusal: bool,
    /// Move a call that does not fit a model's context window
    /// ([`Error::ContextWindowExceeded`], found before sending or reported by the
    /// provider) to the next model whose `context_window` is larger, skipping models whose
    /// window is not (off by default: a longer window is often a dearer model). When the
    /// overflowing model declares no window, any model that declares one is tried; a
    /// model that declares none is never a target.
    pub on_context_overflow: bool,
    /// Which candidate waits when none can serve a call now: `None` (the default) takes
    /// the first model's catalog `fallback_wait` (itself [`FallbackWait::Soonest`] unless
    /// set); `Some` overrides it for this client. Candidates excluded by the options above
    /// or with an open circuit never count as remaining.
    pub wait: Option<FallbackWait>,
}

#[derive(Debug)]
pub(crate) struct FallbackChat {
    pub(crate) members: Vec<PipelineChat>,
    pub(crate) options: FallbackOptions,
}

/// A candidate to send on, with the reservation it was picked with (`None`: none could
/// serve now, and the call joins this one's queue).
type Pick = (usize, Option<(usize, Reservation)>);

/// What a chain member's failure is judged in: a 429 moves the call on.
const IN_CHAIN: FailureContext = FailureContext {
    rate_limited_before: false,
    should_retry: None,
    in_chain: true,
    several_deployments: false,
    delivered: false,
};

impl FallbackChat {
    fn primary(&self) -> &str {
        &self.members[0].rt.entry.id
    }

    /// The candidate to try, honouring open circuits and what each bucket can serve now
    /// (a model paused after a 429 says so through its limiter's wait). A candidate that
    /// can serve now is picked *with* its reservation, which the call then uses: between
    /// the look and the send nobody can take it. When none can, the one the wait rule
    /// names is picked, and the call joins its queue.
    async fn pick(&self, request: &LlmRequest, excluded: &[bool]) -> Result<Pick> {
        let rule = self
            .options
            .wait
            .unwrap_or(self.members[0].rt.entry.fallback_wait);
        let mut waiter = Waiter::new(rule);
        let mut first_error = None;
        for (i, member) in self.members.iter().enumerate() {
            if excluded[i] {
                continue;
            }
            let id = &member.rt.entry.id;
            if let Err(e) = member.rt.breaker.peek() {
                first_error.get_or_insert(e);
                continue;
            }
            let cost = member.probe_cost(&request.with_model_id(id.clone())?)?;
            let priority = member
                .job
                .as_ref()
                .map(crate::JobContext::priority)
                .unwrap_or_default();
            match member.rt.try_reserve_any(cost, priority).await {
                Ok(granted) => return Ok((i, Some(granted))),
                Err(TryReserveError::TooLarge(e) | TryReserveError::Unavailable(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(TryReserveError::WouldWait { ready_in }) => waiter.could_serve(i, ready_in),
            }
        }
        match (waiter.chosen(), first_error) {
            (Some(i), _) => Ok((i, None)),
            (None, Some(e)) => Err(e),
            (None, None) => Err(Error::InvalidRequest {
                field: "fallbacks".into(),
                reason: format!(
                    "every model of `{}`'s chain has refused this request",
                    self.primary()
                ),
            }),
        }
    }

    fn check(&self, request: &LlmRequest) -> Result<()> {
        if self.members[0].rt.answers_to(request.model_id()) {
            Ok(())
        } else {
            Err(Error::InvalidRequest {
                field: "model_id".into(),
                reason: format!(
                    "is `{}` but this client serves the chain of `{}`",
                    request.model_id(),
                    self.primary()
                ),
            })
        }
    }

    /// Runs `attempt` on candidates until one answers or the failure is final; `refused`
    /// tells an answer that is a refusal (one a caller that takes refusals as answers
    /// gets), which moves the call on like a refusal error when `on_refusal` is set.
    async fn run<T, F, Fut>(
        &self,
        request: &LlmRequest,
        refused: fn(&T) -> bool,
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut(usize, LlmRequest, Option<(usize, Reservation)>) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.check(request)?;
        let mut excluded = vec![false; self.members.len()];
        // Moving on after a 429 draws on the job's retry budget (or the call's own).
        let mut own_moves = self.members[0].rt.config.retry.default_retries;
        loop {
            let (i, reservation) = self.pick(request, &excluded).await?;
            let member = &self.members[i];
            let id = member.rt.entry.id.clone();
            match attempt(i, request.with_model_id(id.clone())?, reservation).await {
                Ok(value) if self.options.on_refusal && refused(&value) => {
                    excluded[i] = true;
                    if excluded.iter().all(|x| *x) {
                        return Ok(value);
                    }
                }
                Ok(value) => return Ok(value),
                // The member's limiter has been told (it pauses for the `retry-after`).
                Err(e) if verdict(&e, &IN_CHAIN).next_model => {
                    let allowed = match &member.job {
                        Some(job) => job.take_retry(),
                        None => own_moves
                            .checked_sub(1)
                            .map(|left| own_moves = left)
                            .is_some(),
                    };
                    if !allowed {
                        return Err(e);
                    }
                }
                Err(e @ Error::ProviderRefusal { .. }) if self.options.on_refusal => {
                    excluded[i] = true;
                    if excluded.iter().all(|x| *x) {
                        return Err(e);
                    }
                }
                Err(e @ Error::ContextWindowExceeded { .. })
                    if self.options.on_context_overflow =>
                {
                    let window = member.rt.entry.context_window;
                    for (j, other) in self.members.iter().enumerate() {
                        let larger = match (other.rt.entry.context_window, window) {
                            (Some(w), Some(failed)) => w > failed,
                            (Some(_), None) => true,
                            (None, _) => false,
                        };
                        excluded[j] |= !larger;
                    }
                    if excluded.iter().all(|x| *x) {
                        return Err(e);
                    }
                }
                Err(Error::CircuitOpen { .. }) => {} // skipped by `pick` from now on
                Err(e) => return Err(e),
            }
        }
    }
}

#[async_trait::async_trait]
impl LlmClient for FallbackChat {
    // The calls a chain makes for one request wait within one deadline, from its start.
    async fn single_response(&self, request: &LlmRequest) -> Result<LlmResponse> {
        let deadline = Deadline::for_job(self.members[0].job.as_ref());
        let refused = |r: &LlmResponse| r.stop_reason().is_refusal();
        self.run(request, refused, |i, r, reservation| {
            let deadline = deadline.clone();
            async move {
                self.members[i]
                    .answer_recorded(&r, reservation, deadline)
                    .await
            }
        })
        .await
    }

    /// The first member's count: the chain answers on it whenever it can.
    async fn count_input_tokens(&self, request: &LlmRequest) -> Result<TokenCount> {
        self.members[0].count_input_tokens(request).await
    }

    async fn stream_response(&self, request: &LlmRequest) -> Result<ResponseStream> {
        let deadline = Deadline::for_job(self.members[0].job.as_ref());
        let refused = |opened: &OpenedStream| opened.refused;
        let opened = self
            .run(request, refused, |i, r, reservation| {
                let deadline = deadline.clone();
                async move {
                    self.members[i]
                        .stream_routed(&r, reservation, deadline)
                        .await
                }
            })
            .await?;
        Ok(opened.stream)
    }
}

#[cfg(test)]
#[path = "fallback_chat_tests.rs"]
mod tests;
