//! Fallback chains: several models that can serve the same call, each with its own
//! limiter and a cooldown after a 429.
//!
//! A candidate in cooldown is skipped; a candidate whose bucket cannot serve *now* is
//! skipped at once; only the last remaining candidate waits. So a chain never waits on a
//! busy model while a later one is free, and never sends to a model that just said 429.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock;

use tokio::time::Instant;

use super::{Cost, LimiterBackend, Priority, Reservation, TokenBucketRateLimiter, TryReserveError};
use crate::catalog::Catalog;
use crate::error::{Error, Result};

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
    cooldown_until: Mutex<Option<Instant>>,
}

/// An ordered list of models for one call.
#[derive(Clone)]
pub struct FallbackChain {
    candidates: Arc<Vec<Candidate>>,
    default_cooldown: Duration,
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
            .field("default_cooldown", &self.default_cooldown)
            .finish()
    }
}

/// The cooldown after a 429 without `retry-after`.
pub const DEFAULT_FALLBACK_COOLDOWN: Duration = Duration::from_secs(30);

impl FallbackChain {
    /// A chain over `(model_id, limiter)` pairs, preferred first.
    pub fn new(candidates: Vec<(String, Arc<dyn LimiterBackend>)>) -> Self {
        FallbackChain {
            candidates: Arc::new(
                candidates
                    .into_iter()
                    .map(|(model_id, limiter)| Candidate {
                        model_id,
                        limiter,
                        cooldown_until: Mutex::new(None),
                    })
                    .collect(),
            ),
            default_cooldown: DEFAULT_FALLBACK_COOLDOWN,
        }
    }

    /// The chain the catalog gives `model_id`: the model, then its `fallbacks` in order,
    /// each on its limiter in `limiters`.
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
        Ok(Self::new(candidates))
    }

    /// Sets the cooldown used after a 429 that has no `retry-after`.
    pub fn with_default_cooldown(mut self, cooldown: Duration) -> Self {
        self.default_cooldown = cooldown;
        self
    }

    /// The model ids, preferred first.
    pub fn models(&self) -> Vec<&str> {
        self.candidates
            .iter()
            .map(|c| c.model_id.as_str())
            .collect()
    }

    /// Puts `model_id` in cooldown after a 429: for `retry_after`, or the default.
    pub fn cooldown(&self, model_id: &str, retry_after: Option<Duration>) {
        if let Some(c) = self.candidates.iter().find(|c| c.model_id == model_id) {
            let until = clock::now() + retry_after.unwrap_or(self.default_cooldown);
            let mut slot = c.cooldown_until.lock().unwrap_or_else(|e| e.into_inner());
            *slot = Some(slot.map_or(until, |u| u.max(until)));
        }
    }

    /// How long `model_id` stays in cooldown, if it is cooling now.
    pub fn cooldown_remaining(&self, model_id: &str) -> Option<Duration> {
        let now = clock::now();
        self.candidates
            .iter()
            .find(|c| c.model_id == model_id)
            .and_then(|c| c.cooling(now))
            .map(|u| u - now)
    }

    /// Whether `model_id` is in cooldown now.
    pub fn in_cooldown(&self, model_id: &str) -> bool {
        self.candidates
            .iter()
            .any(|c| c.model_id == model_id && c.cooling(clock::now()).is_some())
    }

    /// Reserves `cost` on the first candidate that can serve it now; only the last
    /// candidate not in cooldown waits. When every candidate is cooling, waits for the
    /// first cooldown to end. Fails with the first candidate's `TooLargeForBucket` when
    /// no candidate's bucket can ever hold the cost.
    pub async fn reserve(&self, cost: Cost) -> Result<FallbackGrant> {
        self.reserve_with(cost, Priority::Default).await
    }

    /// [`FallbackChain::reserve`] at a priority class.
    pub async fn reserve_with(&self, cost: Cost, priority: Priority) -> Result<FallbackGrant> {
        loop {
            let now = clock::now();
            let mut too_large = None;
            let mut busy = Vec::new();
            for (i, c) in self.candidates.iter().enumerate() {
                if c.cooling(now).is_some() {
                    continue;
                }
                match c.limiter.try_reserve(cost, priority).await {
                    Ok(reservation) => return Ok(self.grant(i, reservation)),
                    Err(TryReserveError::TooLarge(e) | TryReserveError::Unavailable(e)) => {
                        too_large.get_or_insert(e);
                    }
                    Err(TryReserveError::WouldWait { .. }) => busy.push(i),
                }
            }
            // Nobody can serve now: the last busy candidate waits (in its FIFO queue).
            if let Some(&i) = busy.last() {
                let reservation = self.candidates[i].limiter.reserve(cost, priority).await?;
                return Ok(self.grant(i, reservation));
            }
            // Everyone open can never fit; wait for a cooling candidate, if there is one.
            match self.candidates.iter().filter_map(|c| c.cooling(now)).min() {
                Some(until) => tokio::time::sleep_until(until).await,
                None => {
                    return Err(too_large.unwrap_or_else(|| Error::InvalidRequest {
                        field: "fallbacks".into(),
                        reason: "the chain has no models".into(),
                    }));
                }
            }
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

impl Candidate {
    /// When this candidate's cooldown ends, if it is cooling at `now`.
    fn cooling(&self, now: Instant) -> Option<Instant> {
        let until = *self
            .cooldown_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        until.filter(|u| *u > now)
    }
}
