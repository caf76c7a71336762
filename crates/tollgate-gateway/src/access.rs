//! The access log: one `tracing` event per request on target [`ACCESS_TARGET`], at INFO,
//! written when the request is done with (for a streamed answer, when its stream ends or
//! the client goes away): request id, method, route, status, model, key id and, from the
//! pipeline's records of the calls it made, the upstream status, attempts, queue wait,
//! upstream latency, tokens and cost. A field that does not apply (no model before a
//! 401, no call for `/health`) is left out.
//!
//! The per-call fields come from the records the `Models` gives its recorder: they are
//! there when [`GatewayMetrics`](crate::GatewayMetrics) is that recorder (or one it
//! forwards to), as `/metrics` needs too. A record is matched to its request through a
//! task-local the request's work (and its stream) runs in. Nothing is gathered when no
//! subscriber listens to the target at INFO, and the line holds no secret (key ids only).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::Method;
use futures::future::Either;
use futures::{Stream, StreamExt};
use tokio::time::Instant;
use tollgate::clock::now;
use tollgate::pipeline::{AttemptRecord, CallRecord, Outcome};

use crate::ids::RequestId;

/// The `tracing` target of the access log's events (one per request, at INFO).
pub const ACCESS_TARGET: &str = "tollgate::access";

tokio::task_local! {
    /// The access entry of the request whose work runs in this task, if logged.
    static CURRENT: Arc<Access>;
}

/// One request's access entry, filled in as the request goes and written when the last
/// handle on it drops.
#[derive(Debug)]
pub(crate) struct Access {
    request_id: RequestId,
    method: Method,
    started: Instant,
    facts: Mutex<Facts>,
}

/// What is learnt of a request after it arrives.
#[derive(Debug, Default)]
struct Facts {
    route: &'static str,
    status: Option<u16>,
    model: Option<String>,
    key: Option<String>,
    calls: u32,
    attempts: u32,
    upstream_status: Option<u16>,
    upstream_error: Option<String>,
    queue_wait: Duration,
    upstream_latency: Duration,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: Option<f64>,
}

impl Access {
    /// The entry of a request by `method` on `route`, or none when nothing listens to
    /// the access log (then nothing is gathered or formatted).
    pub(crate) fn start(
        request_id: &RequestId,
        method: &Method,
        route: &'static str,
    ) -> Option<Arc<Self>> {
        if !tracing::enabled!(target: ACCESS_TARGET, tracing::Level::INFO) {
            return None;
        }
        Some(Arc::new(Access {
            request_id: request_id.clone(),
            method: method.clone(),
            started: now(),
            facts: Mutex::new(Facts {
                route,
                ..Facts::default()
            }),
        }))
    }

    /// Runs `work` with `access` as the entry the pipeline's records go to.
    pub(crate) fn scoped<F: Future>(
        access: Option<&Arc<Self>>,
        work: F,
    ) -> impl Future<Output = F::Output> {
        match access {
            Some(access) => Either::Left(CURRENT.scope(access.clone(), work)),
            None => Either::Right(work),
        }
    }

    fn facts(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.facts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The route as its server span names it.
    pub(crate) fn route(&self, route: &'static str) {
        self.facts().route = route;
    }

    /// The status it was answered with.
    pub(crate) fn status(&self, status: u16) {
        self.facts().status = Some(status);
    }

    /// The catalog model it is for (or `unknown`).
    pub(crate) fn model(&self, model: &str) {
        self.facts().model = Some(model.to_owned());
    }

    /// The id of the virtual key it came with.
    pub(crate) fn key(&self, key: &str) {
        self.facts().key = Some(key.to_owned());
    }

    /// Adds a call's record to the request whose work runs in this task, if logged.
    pub(crate) fn note_call(record: &CallRecord) {
        let _ = CURRENT.try_with(|access| {
            let mut facts = access.facts();
            facts.calls += 1;
            facts.attempts += record.attempts;
            facts.queue_wait += record.queue_wait;
            facts.input_tokens += record.usage.total_input_tokens();
            facts.output_tokens += record.usage.output_tokens;
            if let Some(usd) = record.cost_usd {
                facts.cost_usd = Some(facts.cost_usd.unwrap_or(0.0) + usd);
            }
        });
    }

    /// Adds an attempt's record (its time upstream, and how the provider answered: 200
    /// for an answer, else the failure's status and kind) likewise.
    pub(crate) fn note_attempt(record: &AttemptRecord) {
        let _ = CURRENT.try_with(|access| {
            let mut facts = access.facts();
            facts.upstream_latency += record.latency;
            let (status, error) = match &record.outcome {
                Outcome::Success => (Some(200), None),
                Outcome::Failed { error, status } => (*status, Some(error.clone())),
            };
            facts.upstream_status = status;
            facts.upstream_error = error;
        });
    }
}

/// A stream read, and dropped, with a request's access entry as the records'
/// destination: a streamed call records when its stream ends, or when the client goes
/// away and the stream is dropped.
pub(crate) struct Within<S> {
    inner: Option<S>,
    access: Option<Arc<Access>>,
}

impl<S> Within<S> {
    /// `inner`, read within `access` (as it is when there is none).
    pub(crate) fn new(inner: S, access: Option<&Arc<Access>>) -> Self {
        Within {
            inner: Some(inner),
            access: access.cloned(),
        }
    }
}

impl<S: Stream + Unpin> Stream for Within<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match &this.access {
            Some(access) => CURRENT.sync_scope(access.clone(), || inner.poll_next_unpin(cx)),
            None => inner.poll_next_unpin(cx),
        }
    }
}

impl<S> Drop for Within<S> {
    fn drop(&mut self) {
        let inner = self.inner.take();
        if let Some(access) = self.access.take() {
            CURRENT.sync_scope(access, || drop(inner));
        }
    }
}

/// Whole milliseconds, as the log writes durations.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Drop for Access {
    fn drop(&mut self) {
        let duration = ms(now().saturating_duration_since(self.started));
        let facts = self.facts.get_mut().unwrap_or_else(PoisonError::into_inner);
        let called = facts.calls > 0;
        tracing::info!(
            target: ACCESS_TARGET,
            request_id = self.request_id.as_str(),
            method = self.method.as_str(),
            route = facts.route,
            status = facts.status,
            model = facts.model.as_deref(),
            key = facts.key.as_deref(),
            upstream_status = facts.upstream_status,
            upstream_error = facts.upstream_error.as_deref(),
            attempts = called.then_some(facts.attempts),
            queue_wait_ms = called.then(|| ms(facts.queue_wait)),
            upstream_latency_ms = called.then(|| ms(facts.upstream_latency)),
            input_tokens = called.then_some(facts.input_tokens),
            output_tokens = called.then_some(facts.output_tokens),
            cost_usd = facts.cost_usd,
            duration_ms = duration,
            "request"
        );
    }
}
