//! [`Gateway`]: what every route shares (the `Models`, the virtual keys, the caps).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::watch;
use tollgate::Models;
use tollgate::limit::{LimiterBackend, LimiterFactory};
use tollgate::pipeline::{RetryPolicy, SpendLedger};

use crate::keys::{Keys, KeysError};
use crate::metrics::GatewayMetrics;
use crate::quota::KeyQuotas;
use crate::reload::Reload;
use crate::timing::BodyTiming;

/// The default cap on a request body: 8 MiB, room for long conversations and a few
/// inline images, small enough that one client cannot exhaust memory.
pub const DEFAULT_BODY_LIMIT: usize = 8 * 1024 * 1024;

/// The gateway's shared state: cheap to clone (every route gets a clone).
#[derive(Debug, Clone)]
pub struct Gateway {
    pub(crate) models: Models,
    pub(crate) keys: Option<Arc<Keys>>,
    pub(crate) quotas: Arc<KeyQuotas>,
    pub(crate) metrics: Arc<GatewayMetrics>,
    pub(crate) body_limit: usize,
    pub(crate) body_timing: BodyTiming,
    pub(crate) retries: u32,
    draining: Arc<AtomicBool>,
    /// Turns true when shutdown starts: requests still queued are answered 503.
    queue_closed: Arc<watch::Sender<bool>>,
    /// Turns true when the shutdown grace ends: requests still in flight are answered
    /// 503 (a stream ends with an error event) before their connections close.
    grace_over: Arc<watch::Sender<bool>>,
    /// The live gateway it is served by, if any (for the admin reload route).
    pub(crate) live: Option<Weak<dyn Reload>>,
}

impl Gateway {
    /// A gateway over `models`, open (no keys), with the default body cap.
    pub fn new(models: Models) -> Self {
        Gateway {
            models,
            keys: None,
            quotas: Arc::default(),
            metrics: Arc::default(),
            body_limit: DEFAULT_BODY_LIMIT,
            body_timing: BodyTiming::DEFAULT,
            retries: RetryPolicy::default().default_retries,
            draining: Arc::default(),
            queue_closed: Arc::new(watch::Sender::new(false)),
            grace_over: Arc::new(watch::Sender::new(false)),
            live: None,
        }
    }

    /// Accepts only these virtual keys (without, the gateway is open to any caller).
    /// Their `rpm`/`tpm` caps are buckets in this process and their daily budgets are
    /// counted in it (forgotten by a restart); to keep budgets across restarts, or share
    /// caps and budgets among replicas, use [`Gateway::with_keys_on`].
    ///
    /// Fails, naming the key, when the keys do not fit the models' catalog
    /// ([`Keys::check_against`]: a model the catalog lacks, a budget over an unpriced
    /// model).
    pub fn with_keys(mut self, keys: Keys) -> Result<Self, KeysError> {
        keys.check_against(self.models.catalog())?;
        self.quotas = Arc::new(KeyQuotas::in_process(&keys));
        self.keys = Some(Arc::new(keys));
        Ok(self)
    }

    /// [`Gateway::with_keys`], the keys' `rpm`/`tpm` buckets built by `factory` and
    /// their daily budgets' accounts in `ledger`: the models' factory and a ledger on the
    /// same Redis (`tollgate_redis::RedisLimiters` and its `spend()`) share both among
    /// every gateway on it; a [`FileSpendLedger`](crate::FileSpendLedger) (with
    /// [`InProcessLimiters`](tollgate::limit::InProcessLimiters)) keeps the budgets
    /// across restarts of one gateway. Fails as [`Gateway::with_keys`] does, and when the
    /// factory cannot build a key's buckets ([`KeysError::Limiter`]).
    pub fn with_keys_on(
        mut self,
        keys: Keys,
        factory: Arc<dyn LimiterFactory>,
        ledger: Option<Arc<dyn SpendLedger>>,
    ) -> Result<Self, KeysError> {
        keys.check_against(self.models.catalog())?;
        self.quotas = Arc::new(KeyQuotas::build(&keys, factory, ledger)?);
        self.keys = Some(Arc::new(keys));
        Ok(self)
    }

    /// This gateway with `models` and `keys` (`None`: open to any caller) for the
    /// requests to come, everything else shared with it (metrics, body limits, the
    /// shutdown state): what a live reload swaps in (see [`LiveGateway`](crate::LiveGateway)),
    /// while requests in flight finish on this one. A key whose caps and budget are
    /// unchanged keeps its buckets and today's spend; new or changed ones get new ones,
    /// on the factory and ledger this gateway's keys were given. Give `models` as
    /// [`Models::reloaded`] makes them, so that models whose limits did not change keep
    /// their limiters. Fails as [`Gateway::with_keys_on`] does, naming the key, and this
    /// gateway is untouched.
    pub fn reloaded(&self, models: Models, keys: Option<Keys>) -> Result<Gateway, KeysError> {
        let mut next = self.clone();
        next.models = models;
        match keys {
            Some(keys) => {
                keys.check_against(next.models.catalog())?;
                next.quotas = Arc::new(self.quotas.reloaded(&keys)?);
                next.keys = Some(Arc::new(keys));
            }
            None => {
                next.quotas = Arc::default();
                next.keys = None;
            }
        }
        Ok(next)
    }

    /// This gateway, served by `live`.
    pub(crate) fn with_live(mut self, live: Weak<dyn Reload>) -> Self {
        self.live = Some(live);
        self
    }

    /// The virtual keys it accepts (`None`: it is open).
    pub fn keys(&self) -> Option<&Keys> {
        self.keys.as_deref()
    }

    /// Counts into `metrics` (served at `GET /metrics`). Give the same metrics to the
    /// `Models` behind the gateway as its recorder (or inside one that forwards to it)
    /// for the per-call figures: queue waits, tokens, cost, upstream 429s and 5xx.
    pub fn with_metrics(mut self, metrics: Arc<GatewayMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The gateway's metrics.
    pub fn metrics(&self) -> &Arc<GatewayMetrics> {
        &self.metrics
    }

    /// Caps request bodies at `bytes` (larger ones are answered 413).
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How long a request body may take to arrive ([`BodyTiming`]; default 10 s plus a
    /// second per 16 KiB received). A slower body is answered 408 and its connection
    /// closed.
    pub fn with_body_timing(mut self, timing: BodyTiming) -> Self {
        self.body_timing = timing;
        self
    }

    /// Upstream retries each request may make (default: the pipeline's default).
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Every limiter a request may reserve on: each model's (and deployment's), then each
    /// key's own.
    pub(crate) fn limiters(&self) -> impl Iterator<Item = &Arc<dyn LimiterBackend>> {
        let models = self.models.catalog().models();
        models
            .filter_map(|m| self.models.limiters(&m.id).ok())
            .flatten()
            .chain(self.quotas.limiters())
    }

    /// The `Models` every request goes through.
    pub fn models(&self) -> &Models {
        &self.models
    }

    /// Whether the gateway runs open (no keys configured).
    pub fn is_open(&self) -> bool {
        self.keys.is_none()
    }

    /// Marks the gateway as shutting down: `/ready` answers 503 from now on, so a load
    /// balancer stops sending it new requests; requests still queued on a limiter (and
    /// any that arrive) are answered 503 with `retry-after` at once, nothing sent, while
    /// those already sent finish.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.queue_closed.send_replace(true);
    }

    /// What each request's job watches to leave the queue when shutdown starts.
    pub(crate) fn queue_closed(&self) -> watch::Receiver<bool> {
        self.queue_closed.subscribe()
    }

    /// Ends the shutdown grace: every request still in flight is answered 503 with
    /// `retry-after` now (a stream ends with an error event), instead of having its
    /// connection closed with no answer. [`crate::serve_with`] calls it when the grace
    /// passes; an embedding program calls it when its own grace ends.
    pub fn end_grace(&self) {
        self.start_draining();
        self.grace_over.send_replace(true);
    }

    /// Completes once [`Gateway::end_grace`] was called.
    pub(crate) fn grace_over(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut over = self.grace_over.subscribe();
        async move {
            // An error means the gateway is gone, and so is the request.
            let _ = over.wait_for(|over| *over).await;
        }
    }

    /// Whether [`Gateway::start_draining`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}
