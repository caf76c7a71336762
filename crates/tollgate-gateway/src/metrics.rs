//! `GET /metrics`: the gateway's counters in the Prometheus (OpenMetrics) text format,
//! through the Prometheus project's own client crate.
//!
//! Two sources feed it. The routes count each request by route, model, key and status.
//! The pipeline's records feed the rest: [`GatewayMetrics`] is a [`Recorder`], so a
//! `Models` built with it as (or within) its recorder adds per model and key the calls,
//! the time they queued on the limiters (a histogram), tokens, cost, and the upstream
//! 429s and 5xx its attempts met. Queue depth is read from every model's limiter at
//! scrape time. The same records fill in the access log's per-call fields of the
//! request they were made for.

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tollgate::pipeline::{AttemptRecord, CallRecord, Outcome, Recorder};

use crate::quota::today;
use crate::spent_today::SpentToday;

/// The content type of `GET /metrics`.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    model: String,
    key: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelKey {
    model: String,
    key: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    model: String,
    key: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    key: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    model: String,
    key: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimiterLabels {
    limiter: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Queue waits from 1 ms to about 65 s, doubling.
fn wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The gateway's metrics. Share one between the gateway
/// ([`Gateway::with_metrics`](crate::Gateway::with_metrics)) and the `Models` behind it
/// (as its recorder, or inside one that forwards to it).
#[derive(Debug)]
pub struct GatewayMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    pub(crate) in_flight: Gauge,
    calls: Family<CallLabels, Counter>,
    queue_wait: HistogramFamily<ModelKey>,
    tokens: Family<TokenLabels, Counter>,
    cost: Family<ModelKey, Counter<f64, AtomicU64>>,
    upstream: Family<UpstreamLabels, Counter>,
    queued: Family<LimiterLabels, Gauge>,
    /// Today's spend by key and model, for `GET /v1/tollgate/key`.
    pub(crate) spent_today: SpentToday,
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl GatewayMetrics {
    /// Empty counters, registered under the `tollgate_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tollgate");
        let requests = Family::<RequestLabels, Counter>::default();
        let in_flight = Gauge::default();
        let calls = Family::<CallLabels, Counter>::default();
        let queue_wait = HistogramFamily::<ModelKey>::new_with_constructor(wait_histogram);
        let tokens = Family::<TokenLabels, Counter>::default();
        let cost = Family::<ModelKey, Counter<f64, AtomicU64>>::default();
        let upstream = Family::<UpstreamLabels, Counter>::default();
        let queued = Family::<LimiterLabels, Gauge>::default();
        registry.register(
            "gateway_requests",
            "Requests answered by the gateway, by route, model, key and status",
            requests.clone(),
        );
        registry.register(
            "gateway_in_flight",
            "Requests the gateway is working on (queued or sent)",
            in_flight.clone(),
        );
        registry.register(
            "calls",
            "Calls through the pipeline, by model, key and outcome (success or error kind)",
            calls.clone(),
        );
        registry.register(
            "queue_wait_seconds",
            "How long each call waited for its reservations on the limiters",
            queue_wait.clone(),
        );
        registry.register(
            "tokens",
            "Tokens the providers reported, by model, key and kind",
            tokens.clone(),
        );
        registry.register(
            "cost_usd",
            "Cost of the calls in USD, from the catalog's prices",
            cost.clone(),
        );
        registry.register(
            "upstream_errors",
            "Attempts the provider answered with 429 or a 5xx",
            upstream.clone(),
        );
        registry.register(
            "limiter_queued",
            "Requests waiting on each limiter now (models, deployments and keys)",
            queued.clone(),
        );
        GatewayMetrics {
            registry,
            requests,
            in_flight,
            calls,
            queue_wait,
            tokens,
            cost,
            upstream,
            queued,
            spent_today: SpentToday::default(),
        }
    }

    /// Counts one answered request.
    pub(crate) fn request(&self, route: &'static str, model: &str, key: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route,
                model: model.to_owned(),
                key: key.to_owned(),
                status,
            })
            .inc();
    }

    /// Sets the queue depth of `limiter` (read from its snapshot at scrape time).
    pub(crate) fn set_queued(&self, limiter: &str, queued: usize) {
        self.queued
            .get_or_create(&LimiterLabels {
                limiter: limiter.to_owned(),
            })
            .set(i64::try_from(queued).unwrap_or(i64::MAX));
    }

    /// The metrics as OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if encode(&mut text, &self.registry).is_err() {
            // Writing to a String cannot fail; say so rather than serve half a page.
            text.clear();
            let _ = writeln!(text, "# EOF");
        }
        text
    }
}

/// The key label of a record: `key:<id>` gives `<id>`; any other job (an open gateway's
/// `gateway`, a program's own) and a call outside any job give `""`, as the request
/// counter labels an open gateway's requests.
fn key_of(job_id: Option<&String>) -> String {
    job_id
        .and_then(|job| job.strip_prefix("key:"))
        .unwrap_or_default()
        .to_owned()
}

impl Recorder for GatewayMetrics {
    fn record_call(&self, record: &CallRecord) {
        crate::access::Access::note_call(record);
        let model = record.model_id.clone();
        let key = key_of(record.job_id.as_ref());
        let outcome = match &record.outcome {
            Outcome::Success => "success".to_owned(),
            Outcome::Failed { error, .. } => error.clone(),
        };
        self.calls
            .get_or_create(&CallLabels {
                model: model.clone(),
                key: key.clone(),
                outcome,
            })
            .inc();
        let mk = ModelKey { model, key };
        self.queue_wait
            .get_or_create(&mk)
            .observe(record.queue_wait.as_secs_f64());
        if let Some(usd) = record.cost_usd {
            self.cost.get_or_create(&mk).inc_by(usd);
            if !mk.key.is_empty() {
                self.spent_today.add(today(), &mk.key, &mk.model, usd);
            }
        }
        let usage = &record.usage;
        for (kind, n) in [
            ("input", usage.input_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("output", usage.output_tokens),
        ] {
            if n > 0 {
                self.tokens
                    .get_or_create(&TokenLabels {
                        model: mk.model.clone(),
                        key: mk.key.clone(),
                        kind,
                    })
                    .inc_by(n);
            }
        }
    }

    fn record_attempt(&self, record: &AttemptRecord) {
        crate::access::Access::note_attempt(record);
        let status = match &record.outcome {
            Outcome::Failed {
                status: Some(429), ..
            } => "429",
            Outcome::Failed {
                status: Some(500..=599),
                ..
            } => "5xx",
            _ => return,
        };
        self.upstream
            .get_or_create(&UpstreamLabels {
                model: record.model_id.clone(),
                key: key_of(record.job_id.as_ref()),
                status,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn key_label_is_the_virtual_keys_id_and_empty_for_any_other_job() {
        let job = |s: &str| Some(s.to_owned());
        assert_eq!(super::key_of(job("key:nb").as_ref()), "nb");
        assert_eq!(super::key_of(job("gateway").as_ref()), "");
        assert_eq!(super::key_of(None), "");
    }
}
