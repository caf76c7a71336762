//! What every client kind of one model shares: its runtime (the deployments with their
//! limiters, the breaker, the pipeline's config), and the choice of the deployment that
//! can serve a call soonest. A deployment's limiter alone knows whether it is paused.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::breaker::CircuitBreaker;
use super::config::PipelineConfig;
use super::server::Server;
use crate::catalog::{Catalog, ModelEntry};
use crate::error::Result;
use crate::limit::{Cost, LimiterBackend, Priority, Reservation, TryReserveError};
use crate::provider::{ChatTransport, DecisionTransport, EmbeddingsTransport};

/// Everything the pipeline keeps per catalog model, shared by all its clients.
#[derive(Debug)]
pub(crate) struct ModelRuntime {
    pub(crate) entry: ModelEntry,
    /// The catalog the model is in, to tell which names (aliases, patterns) are its.
    catalog: Arc<Catalog>,
    /// One per deployment (at least one), in catalog order.
    pub(crate) deployments: Vec<DeploymentRuntime>,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) config: Arc<PipelineConfig>,
    /// `gen_ai.provider.name`: the provider's name in the OpenTelemetry conventions.
    pub(crate) provider_name: &'static str,
    /// Its deployments' transports, built on first use.
    pub(crate) transports: Transports,
}

/// A model's transports of each client kind, one per deployment, built on first use from
/// the provider's clients and kept with the runtime (a reloaded catalog builds new
/// runtimes, so new options are read again): building one parses the model's options,
/// and a gateway asks for a client per request.
#[derive(Default)]
pub(crate) struct Transports {
    chat: OnceLock<Arc<[Arc<dyn ChatTransport>]>>,
    embeddings: OnceLock<Arc<[Arc<dyn EmbeddingsTransport>]>>,
    decision: OnceLock<Arc<[Arc<dyn DecisionTransport>]>>,
}

impl std::fmt::Debug for Transports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transports")
            .field("chat", &self.chat.get().map(|t| t.len()))
            .field("embeddings", &self.embeddings.get().map(|t| t.len()))
            .field("decision", &self.decision.get().map(|t| t.len()))
            .finish()
    }
}

/// The transports kept in `cell`, or built by `build` for each deployment and kept (a
/// failure is not kept: the next call tries again).
fn kept<T: ?Sized>(
    cell: &OnceLock<Arc<[Arc<T>]>>,
    deployments: &[DeploymentRuntime],
    build: impl Fn(&ModelEntry) -> Result<Arc<T>>,
) -> Result<Arc<[Arc<T>]>> {
    if let Some(built) = cell.get() {
        return Ok(built.clone());
    }
    let built: Arc<[Arc<T>]> = deployments
        .iter()
        .map(|d| build(&d.entry))
        .collect::<Result<Vec<_>>>()?
        .into();
    Ok(cell.get_or_init(|| built).clone())
}

/// One deployment: its buckets (whose limiter alone knows whether it is paused after a
/// 429) and where its calls go.
#[derive(Debug)]
pub(crate) struct DeploymentRuntime {
    /// `None` for a model without deployments.
    pub(crate) name: Option<String>,
    /// What the provider builds this deployment's transports from.
    pub(crate) entry: ModelEntry,
    pub(crate) limiter: Arc<dyn LimiterBackend>,
    /// Where its calls go (`server.address`, `server.port`), when the provider knows.
    pub(crate) server: Option<Server>,
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
        }
    }
}

impl ModelRuntime {
    pub(crate) fn new(
        entry: ModelEntry,
        catalog: Arc<Catalog>,
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
            catalog,
            config,
            provider_name,
            transports: Transports::default(),
        }
    }

    /// Its deployments' chat transports, built by `build` on first use.
    pub(crate) fn chat_transports(
        &self,
        build: impl Fn(&ModelEntry) -> Result<Arc<dyn ChatTransport>>,
    ) -> Result<Arc<[Arc<dyn ChatTransport>]>> {
        kept(&self.transports.chat, &self.deployments, build)
    }

    /// Its deployments' embeddings transports, built by `build` on first use.
    pub(crate) fn embeddings_transports(
        &self,
        build: impl Fn(&ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>>,
    ) -> Result<Arc<[Arc<dyn EmbeddingsTransport>]>> {
        kept(&self.transports.embeddings, &self.deployments, build)
    }

    /// Its deployments' decision transports, built by `build` on first use.
    pub(crate) fn decision_transports(
        &self,
        build: impl Fn(&ModelEntry) -> Result<Arc<dyn DecisionTransport>>,
    ) -> Result<Arc<[Arc<dyn DecisionTransport>]>> {
        kept(&self.transports.decision, &self.deployments, build)
    }

    /// Whether the name `model_id` a request carries resolves to this model: its id, or
    /// an alias or pattern of it that the catalog resolves to no other model.
    pub(crate) fn answers_to(&self, model_id: &str) -> bool {
        model_id == self.entry.id
            || self
                .catalog
                .model(model_id)
                .is_some_and(|entry| entry.id == self.entry.id)
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

    /// One look at every deployment: reserves `cost` now on the first that can serve
    /// it, else says which one could soonest (a deployment paused after a 429 says so
    /// through its limiter's wait).
    async fn scan(&self, cost: Cost, priority: Priority) -> Scan {
        let mut soonest: Option<(Duration, usize)> = None;
        let mut cannot = None;
        for (i, d) in self.deployments.iter().enumerate() {
            match d.limiter.try_reserve(cost, priority).await {
                Ok(r) => return Scan::Granted(i, r),
                Err(TryReserveError::WouldWait { ready_in }) => {
                    if soonest.is_none_or(|(s, _)| ready_in < s) {
                        soonest = Some((ready_in, i));
                    }
                }
                // This deployment cannot serve it (ever, or while its backend is down).
                Err(e @ (TryReserveError::TooLarge(_) | TryReserveError::Unavailable(_))) => {
                    cannot.get_or_insert(e);
                }
            }
        }
        match (soonest, cannot) {
            (Some((ready_in, i)), _) => Scan::Soonest(i, ready_in),
            (None, Some(e)) => Scan::Cannot(e),
            // No deployment at all (`ModelRuntime::new` refuses that): the first answers.
            (None, None) => Scan::Soonest(0, Duration::ZERO),
        }
    }

    /// Reserves `cost` now on the first deployment that can serve it, or says how soon the
    /// soonest could (without waiting).
    pub(crate) async fn try_reserve_any(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> std::result::Result<(usize, Reservation), TryReserveError> {
        match self.scan(cost, priority).await {
            Scan::Granted(i, r) => Ok((i, r)),
            Scan::Soonest(_, ready_in) => Err(TryReserveError::WouldWait { ready_in }),
            Scan::Cannot(e) => Err(e),
        }
    }

    /// Reserves `cost` on the deployment that can serve it soonest, waiting there
    /// (holding nothing) when none can now.
    pub(crate) async fn reserve_any(
        &self,
        cost: Cost,
        priority: Priority,
    ) -> Result<(usize, Reservation)> {
        if self.deployments.len() == 1 {
            return Ok((0, self.limiter().reserve(cost, priority).await?));
        }
        match self.scan(cost, priority).await {
            Scan::Granted(i, r) => Ok((i, r)),
            Scan::Soonest(i, _) => Ok((
                i,
                self.deployments[i].limiter.reserve(cost, priority).await?,
            )),
            Scan::Cannot(e) => Err(e.into()),
        }
    }
}

/// What one look at a model's deployments found.
enum Scan {
    /// Reserved now on deployment `.0`.
    Granted(usize, Reservation),
    /// None can now; deployment `.0` could soonest, in `.1`.
    Soonest(usize, Duration),
    /// No deployment can serve it: the cost can never fit, or the limiter is unavailable.
    Cannot(TryReserveError),
}
