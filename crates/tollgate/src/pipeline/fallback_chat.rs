//! A chat client over a model and its catalog fallbacks.
//!
//! Each call goes to the first candidate that can serve it now: not cooling after a 429,
//! circuit not open, bucket able to take the call at once; only the last remaining
//! candidate is waited for. A 429 puts its model in cooldown and moves the call on
//! (drawing on the retry budget). With [`FallbackOptions::on_refusal`], a refusal moves
//! the call to the next model too, and never back to the one that refused. With
//! [`FallbackOptions::on_context_overflow`], a call too large for a model's context window
//! moves to the next model with a larger one.

use std::time::Duration;

use super::chat::PipelineChat;
use crate::client::LlmClient;
use crate::error::{Error, ProviderError, Result};
use crate::limit::{FallbackChain, Reservation, TryReserveError};
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
}

#[derive(Debug)]
pub(crate) struct FallbackChat {
    pub(crate) members: Vec<PipelineChat>,
    pub(crate) chain: FallbackChain,
    pub(crate) options: FallbackOptions,
}

enum Next {
    /// Send on this candidate, with the reservation it was picked with (`None`: the last
    /// candidate left, whose queue the call joins).
    Go(usize, Option<(usize, Reservation)>),
    Wait(Duration),
}

impl FallbackChat {
    fn primary(&self) -> &str {
        &self.members[0].rt.entry.id
    }

    /// The candidate to try, honouring cooldowns, open circuits and what each bucket can
    /// serve now. A candidate that can serve now is picked *with* its reservation, which
    /// the call then uses: between the look and the send nobody can take it.
    async fn pick(&self, request: &LlmRequest, excluded: &[bool]) -> Result<Next> {
        let mut last_eligible = None;
        let mut first_error = None;
        let mut shortest_cooldown: Option<Duration> = None;
        for (i, member) in self.members.iter().enumerate() {
            if excluded[i] {
                continue;
            }
            let id = &member.rt.entry.id;
            if let Some(left) = self.chain.cooldown_remaining(id) {
                shortest_cooldown = Some(shortest_cooldown.map_or(left, |s| s.min(left)));
                continue;
            }
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
                Ok(granted) => return Ok(Next::Go(i, Some(granted))),
                Err(TryReserveError::TooLarge(e) | TryReserveError::Unavailable(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(TryReserveError::WouldWait { .. }) => last_eligible = Some(i),
            }
        }
        match (last_eligible, shortest_cooldown, first_error) {
            (Some(i), _, _) => Ok(Next::Go(i, None)),
            (None, Some(wait), _) => Ok(Next::Wait(wait)),
            (None, None, Some(e)) => Err(e),
            (None, None, None) => Err(Error::InvalidRequest {
                field: "fallbacks".into(),
                reason: format!(
                    "every model of `{}`'s chain has refused this request",
                    self.primary()
                ),
            }),
        }
    }

    fn check(&self, request: &LlmRequest) -> Result<()> {
        if request.model_id() == self.primary() {
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

    /// Runs `attempt` on candidates until one answers or the failure is final.
    async fn run<T, F, Fut>(&self, request: &LlmRequest, mut attempt: F) -> Result<T>
    where
        F: FnMut(usize, LlmRequest, Option<(usize, Reservation)>) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.check(request)?;
        let mut excluded = vec![false; self.members.len()];
        // Moving on after a 429 draws on the job's retry budget (or the call's own).
        let mut own_moves = self.members[0].rt.config.retry.default_retries;
        loop {
            let (i, reservation) = match self.pick(request, &excluded).await? {
                Next::Go(i, reservation) => (i, reservation),
                Next::Wait(wait) => {
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            let member = &self.members[i];
            let id = member.rt.entry.id.clone();
            match attempt(i, request.with_model_id(id.clone())?, reservation).await {
                Ok(value) => return Ok(value),
                Err(e @ Error::Provider(ProviderError::RateLimited { .. })) => {
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
                    let retry_after = match &e {
                        Error::Provider(p) => p.retry_after(),
                        _ => None,
                    };
                    self.chain.cooldown(&id, retry_after);
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
    async fn single_response(&self, request: &LlmRequest) -> Result<LlmResponse> {
        self.run(request, |i, r, reservation| async move {
            self.members[i].answer_recorded(&r, reservation).await
        })
        .await
    }

    async fn stream_response(&self, request: &LlmRequest) -> Result<ResponseStream> {
        self.run(request, |i, r, reservation| async move {
            self.members[i].stream_routed(&r, reservation).await
        })
        .await
    }
}
