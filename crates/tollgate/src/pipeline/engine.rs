//! What every client kind of one model shares: the [`PipelineConfig`], the model's
//! runtime (its deployments with their limiters and breakers, retry policy, recorder) and
//! the worst-case price of a call. The attempts themselves run in `call.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::clock;

use tokio::time::Instant;

use super::breaker::{BreakerConfig, CircuitBreaker};
use super::record::{NoRecorder, Recorder};
use super::retry::RetryPolicy;
use super::telemetry::Server;
use crate::catalog::{ModelEntry, Price};
use crate::error::Result;
use crate::limit::{Cost, LimiterBackend, Priority, Reservation, TryReserveError};

/// The most times an answer that fails its declared shape is sent back for correction.
pub const MAX_CORRECTIONS: u32 = 2;

/// How every call is run.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Retries and back-off.
    pub retry: RetryPolicy,
    /// When circuits open.
    pub breaker: BreakerConfig,
    /// Deadline for one attempt, from send to the whole answer (streams: to the first
    /// event). Passing it is a [`ProviderError::Timeout`](crate::ProviderError::Timeout).
    pub attempt_timeout: Duration,
    /// Deadline for the whole call, retries and waits included (`None`: no limit). A
    /// retry that would end past it is not made; an attempt is cut at it.
    pub call_deadline: Option<Duration>,
    /// Deadline for connecting, handed to transports (see
    /// [`crate::ProviderContext::connect_timeout`]).
    pub connect_timeout: Duration,
    /// How many times an answer that fails its declared shape is sent back.
    pub max_corrections: u32,
    /// Where call and attempt records go.
    pub recorder: Arc<dyn Recorder>,
    /// The OpenTelemetry metrics calls are measured with (`None`: not measured).
    #[cfg(feature = "otel")]
    pub metrics: Option<Arc<crate::otel::Metrics>>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            retry: RetryPolicy::default(),
            breaker: BreakerConfig::default(),
            attempt_timeout: Duration::from_secs(600),
            call_deadline: None,
            connect_timeout: Duration::from_secs(10),
            max_corrections: MAX_CORRECTIONS,
            recorder: Arc::new(NoRecorder),
            #[cfg(feature = "otel")]
            metrics: None,
        }
    }
}

/// Everything the pipeline keeps per catalog model, shared by all its clients.
#[derive(Debug)]
pub(crate) struct ModelRuntime {
    pub(crate) entry: ModelEntry,
    /// One per deployment (at least one), in catalog order.
    pub(crate) deployments: Vec<DeploymentRuntime>,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) config: Arc<PipelineConfig>,
    /// `gen_ai.provider.name`: the provider's name in the OpenTelemetry conventions.
    pub(crate) provider_name: &'static str,
}

/// One deployment's buckets and cooldown.
#[derive(Debug)]
pub(crate) struct DeploymentRuntime {
    /// `None` for a model without deployments.
    pub(crate) name: Option<String>,
    /// What the provider builds this deployment's transports from.
    pub(crate) entry: ModelEntry,
    pub(crate) limiter: Arc<dyn LimiterBackend>,
    /// Where its calls go (`server.address`, `server.port`), when the provider knows.
    pub(crate) server: Option<Server>,
    cooldown_until: std::sync::Mutex<Option<Instant>>,
}

impl DeploymentRuntime {
    pub(crate) fn new(
        name: Option<String>,
        entry: ModelEntry,
        limiter: Arc<dyn LimiterBackend>,
        server: Option<Server>,
    ) -> Self {
        DeploymentRuntime {
            name,
            entry,
            limiter,
            server,
            cooldown_until: std::sync::Mutex::new(None),
        }
    }

    /// When its cooldown ends, if it is cooling at `now`.
    pub(super) fn cooling(&self, now: Instant) -> Option<Instant> {
        let until = *self
            .cooldown_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        until.filter(|u| *u > now)
    }

    pub(super) fn cool(&self, until: Instant) {
        let mut slot = self
            .cooldown_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *slot = Some(slot.map_or(until, |u| u.max(until)));
    }
}

impl ModelRuntime {
    pub(crate) fn new(
        entry: ModelEntry,
        config: Arc<PipelineConfig>,
        deployments: Vec<DeploymentRuntime>,
        provider_name: &'static str,
    ) -> Self {
        assert!(
            !deployments.is_empty(),
            "a model has at least one deployment"
        );
        ModelRuntime {
            deployments,
            breaker: CircuitBreaker::new(entry.id.clone(), config.breaker.clone()),
            entry,
            config,
            provider_name,
        }
    }

    /// The attributes every metric about deployment `deployment` carries.
    #[cfg(feature = "otel")]
    pub(crate) fn model_attributes(&self, deployment: usize) -> crate::otel::ModelAttributes<'_> {
        let d = &self.deployments[deployment];
        crate::otel::ModelAttributes {
            provider_name: self.provider_name,
            request_model: &self.entry.name,
            model_id: &self.entry.id,
            deployment: d.name.as_deref(),
            server: d.server.as_ref().map(|s| (s.address.as_str(), s.port)),
        }
    }

    /// The deployment whose buckets are `limiter_id`.
    pub(super) fn deployment_of(&self, limiter_id: &str) -> Option<usize> {
        self.deployments
            .iter()
            .position(|d| d.limiter.model_id() == limiter_id)
    }

    /// The first deployment's buckets (the model's only ones when it has one).
    pub(crate) fn limiter(&self) -> &Arc<dyn LimiterBackend> {
        &self.deployments[0].limiter
    }

    /// One look at every deployment: reserves `cost` now on the first not cooling that
    /// can serve it, else says which one could soonest.
    async fn scan(&self, cost: Cost, priority: Priority) -> Scan {
        let now = clock::now();
        let mut soonest: Option<(Duration, usize)> = None;
        let mut cooling: Option<Instant> = None;
        let mut too_large = None;
        for (i, d) in self.deployments.iter().enumerate() {
            if let Some(until) = d.cooling(now) {
                cooling = Some(cooling.map_or(until, |c| c.min(until)));
                continue;
            }
            match d.limiter.try_reserve(cost, priority).await {
                Ok(r) => return Scan::Granted(i, r),
                Err(TryReserveError::WouldWait { ready_in }) => {
                    if soonest.is_none_or(|(s, _)| ready_in < s) {
                        soonest = Some((ready_in, i));
                    }
                }
                // This deployment cannot serve it (ever, or while its backend is down).
                Err(e @ (TryReserveError::TooLarge(_) | TryReserveError::Unavailable(_))) => {
                    too_large.get_or_insert(e);
                }
            }
        }
        match (soonest, cooling, too_large) {
            (Some((ready_in, i)), _, _) => Scan::Soonest(i, ready_in),
            (None, Some(until), _) => Scan::Cooling(until.saturating_duration_since(now), until),
            (None, None, Some(e)) => Scan::TooLarge(e),
            // Every deployment exists and was looked at: one of the above applies.
            (None, None, None) => Scan::Cooling(Duration::ZERO, now),
        }
    }

    /// Reserves `cost` now on the first deployment not cooling that can serve it, or
    /// says how soon the soonest could (without waiting).
    pub(crate) async fn try_reserve_any(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> std::result::Result<(usize, Reservation), TryReserveError> {
        match self.scan(cost, priority).await {
            Scan::Granted(i, r) => Ok((i, r)),
            Scan::Soonest(_, ready_in) | Scan::Cooling(ready_in, _) => {
                Err(TryReserveError::WouldWait { ready_in })
            }
            Scan::TooLarge(e) => Err(e),
        }
    }

    /// Reserves `cost` on the deployment that can serve it soonest, waiting there
    /// (holding nothing) when none can now; deployments in cooldown are skipped.
    pub(crate) async fn reserve_any(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<(usize, Reservation)> {
        if self.deployments.len() == 1 {
            return Ok((0, self.limiter().reserve(cost, priority).await?));
        }
        loop {
            match self.scan(cost, priority).await {
                Scan::Granted(i, r) => return Ok((i, r)),
                Scan::Soonest(i, _) => {
                    let r = self.deployments[i].limiter.reserve(cost, priority).await?;
                    return Ok((i, r));
                }
                Scan::Cooling(_, until) => tokio::time::sleep_until(until).await,
                Scan::TooLarge(e) => return Err(e.into()),
            }
        }
    }
}

/// What one look at a model's deployments found.
enum Scan {
    /// Reserved now on deployment `.0`.
    Granted(usize, Reservation),
    /// None can now; deployment `.0` could soonest, in `.1`.
    Soonest(usize, Duration),
    /// Every open one is cooling; the first cooldown ends in `.0`, at `.1`.
    Cooling(Duration, Instant),
    /// No deployment can serve it: the cost can never fit, or the limiter is unavailable.
    TooLarge(TryReserveError),
}

/// The worst a call can cost: every input token at the dearest input price (a cache
/// write can cost more than plain input), and the whole output limit.
pub(crate) fn worst_case_usd(price: Option<&Price>, cost: &Cost) -> f64 {
    price.map_or(0.0, |p| {
        let input = p
            .input
            .max(p.cache_write)
            .max(p.cache_write_1h.unwrap_or(0.0));
        (cost.input_tokens as f64 * input + cost.output_tokens as f64 * p.output) / 1_000_000.0
    })
}
