//! Fallback chains: several models that can serve the same call, each with its own
//! limiter.
//!
//! A candidate whose bucket cannot serve *now* is skipped at once; when none can, the
//! chain's [`FallbackWait`] rule says who is waited for: the one that could soonest (the
//! later one on a tie; the default), or only the last remaining one (PicoClaw's rule).
//! A 429 is told to the candidate's limiter
//! ([`FallbackChain::rate_limited`]), which pauses for the `retry-after` (or empties its
//! requests bucket when there is none): the limiter is the one place that knows a model
//! is paused. So a chain never waits on a busy model while a later one is free, and never
//! sends to a model before the wait its 429 asked for.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{
    Cost, Feedback, LimiterBackend, Priority, Reservation, TokenBucketRateLimiter, TryReserveError,
};
use crate::catalog::{Catalog, FallbackWait};
use crate::error::{Error, Result};

/// The candidate a chain waits for when none can serve now, gathered as the candidates
/// are tried in order (shared by [`FallbackChain`] and the fallback chat client).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiter {
    rule: FallbackWait,
    chosen: Option<(Duration, usize)>,
}

impl Waiter {
    /// No candidate seen yet, choosing by `rule`.
    pub(crate) fn new(rule: FallbackWait) -> Self {
        Waiter { rule, chosen: None }
    }

    /// Candidate `i` could serve in `ready_in`. Under [`FallbackWait::Soonest`] the
    /// soonest is kept, ties going to the later candidate (the preferred ones are the
    /// busiest); under [`FallbackWait::Last`] the last one seen is.
    pub(crate) fn could_serve(&mut self, i: usize, ready_in: Duration) {
        let keep = match self.rule {
            FallbackWait::Soonest => self.chosen.is_none_or(|(s, _)| ready_in <= s),
            FallbackWait::Last => true,
        };
        if keep {
            self.chosen = Some((ready_in, i));
        }
    }

    /// The candidate to wait for, `None` when none could ever serve.
    pub(crate) fn chosen(self) -> Option<usize> {
        self.chosen.map(|(_, i)| i)
    }
}

/// What a chain granted: which candidate, and its reservation.
#[derive(Debug)]
pub struct FallbackGrant {
    /// The catalog model id that will serve the call.
    pub model_id: String,
    /// Its position in the chain (0 = the preferred model).
    pub position: usize,
    /// The reservation on that model.
    pub reservation: Reservation,
}

struct Candidate {
    model_id: String,
    limiter: Arc<dyn LimiterBackend>,
}

/// An ordered list of models for one call.
#[derive(Clone)]
pub struct FallbackChain {
    candidates: Arc<Vec<Candidate>>,
    wait: FallbackWait,
}

impl fmt::Debug for FallbackChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackChain")
            .field(
                "models",
                &self
                    .candidates
                    .iter()
                    .map(|c| &c.model_id)
                    .collect::<Vec<_>>(),
            )
            .field("wait", &self.wait)
            .finish()
    }
}

impl FallbackChain {
    /// A chain over `(model_id, limiter)` pairs, preferred first, waiting by the default
    /// rule ([`FallbackWait::Soonest`]).
    pub fn new(candidates: Vec<(String, Arc<dyn LimiterBackend>)>) -> Self {
        FallbackChain {
            candidates: Arc::new(
                candidates
                    .into_iter()
                    .map(|(model_id, limiter)| Candidate { model_id, limiter })
                    .collect(),
            ),
            wait: FallbackWait::default(),
        }
    }

    /// This chain, choosing by `wait` whom to wait for when no candidate can serve now.
    pub fn with_wait(mut self, wait: FallbackWait) -> Self {
        self.wait = wait;
        self
    }

    /// The rule that picks whom to wait for when no candidate can serve now.
    pub fn wait(&self) -> FallbackWait {
        self.wait
    }

    /// The chain the catalog gives `model_id`: the model, then its `fallbacks` in order,
    /// each on its limiter in `limiters`, waiting by the model's `fallback_wait`.
    pub fn from_catalog(
        catalog: &Catalog,
        model_id: &str,
        limiters: &HashMap<String, Arc<dyn LimiterBackend>>,
    ) -> Result<Self> {
        let entry = catalog.get(model_id)?;
        let ids = std::iter::once(entry.id.clone()).chain(entry.fallbacks.iter().cloned());
        let mut candidates = Vec::new();
        for id in ids {
            let limiter = limiters.get(&id).cloned().unwrap_or_else(|| {
                let limiter = match catalog.model(&id) {
                    Some(m) => TokenBucketRateLimiter::for_model(m),
                    None => TokenBucketRateLimiter::new(super::LimiterConfig::new(
                        id.clone(),
                        Default::default(),
                    )),
                };
                Arc::new(limiter) as Arc<dyn LimiterBackend>
            });
            candidates.push((id, limiter));
        }
        Ok(Self::new(candidates).with_wait(entry.fallback_wait))
    }

    /// The model ids, preferred first.
    pub fn models(&self) -> Vec<&str> {
        self.candidates
            .iter()
            .map(|c| c.model_id.as_str())
            .collect()
    }

    /// Tells `model_id`'s limiter that the provider answered 429: it pauses for
    /// `retry_after` (capped), or empties its requests bucket when none was sent, so the
    /// chain serves from the others meanwhile. (A call made through [`crate::Models`]
    /// does this itself.)
    pub fn rate_limited(&self, model_id: &str, retry_after: Option<Duration>) {
        if let Some(c) = self.candidates.iter().find(|c| c.model_id == model_id) {
            c.limiter.feedback(Feedback::RateLimited { retry_after });
        }
    }

    /// Reserves `cost` on the first candidate that can serve it now; when none can, on
    /// the one the chain's [`FallbackWait`] picks (the one that could soonest, the later
    /// on a tie; or the last that could ever serve), waiting in its queue. Fails with the first candidate's
    /// `TooLargeForBucket` when no candidate's bucket can ever hold the cost.
    pub async fn reserve(&self, cost: Cost) -> Result<FallbackGrant> {
        self.reserve_with(cost, Priority::Default).await
    }

    /// [`FallbackChain::reserve`] at a priority class.
    pub async fn reserve_with(&self, cost: Cost, priority: Priority) -> Result<FallbackGrant> {
        let mut too_large = None;
        let mut waiter = Waiter::new(self.wait);
        for (i, c) in self.candidates.iter().enumerate() {
            match c.limiter.try_reserve(cost, priority).await {
                Ok(reservation) => return Ok(self.grant(i, reservation)),
                Err(TryReserveError::TooLarge(e) | TryReserveError::Unavailable(e)) => {
                    too_large.get_or_insert(e);
                }
                Err(TryReserveError::WouldWait { ready_in }) => waiter.could_serve(i, ready_in),
            }
        }
        // Nobody can serve now: the rule's candidate waits (in its FIFO queue).
        match waiter.chosen() {
            Some(i) => {
                let reservation = self.candidates[i].limiter.reserve(cost, priority).await?;
                Ok(self.grant(i, reservation))
            }
            None => Err(too_large.unwrap_or_else(|| Error::InvalidRequest {
                field: "fallbacks".into(),
                reason: "the chain has no models".into(),
            })),
        }
    }

    fn grant(&self, i: usize, reservation: Reservation) -> FallbackGrant {
        FallbackGrant {
            model_id: self.candidates[i].model_id.clone(),
            position: i,
            reservation,
        }
    }
}

#[cfg(test)]
#[path = "fallback_tests.rs"]
mod tests;
