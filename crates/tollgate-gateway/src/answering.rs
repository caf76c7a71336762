//! A request's answer as every model route gives it: its server span, its labels (learnt
//! as the handler goes, bounded to catalog and key ids), the failure in its dialect (an
//! upstream or internal one masked, its detail logged under the request id), the end of
//! the shutdown grace, and the count of it in `/metrics`.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::Response;
use tracing::Instrument;

use crate::error::{Dialect, GatewayError};
use crate::ids::RequestId;
use crate::metrics::GatewayMetrics;
use crate::state::Gateway;

/// The [`Route`] `POST $path`, counted as `$label`.
macro_rules! post_route {
    ($label:literal, $path:literal) => {
        $crate::answering::Route {
            label: $label,
            span_name: concat!("POST ", $path),
            path: $path,
            method: "POST",
        }
    };
}
pub(crate) use post_route;

/// The [`Route`] `GET $path`, counted as `$label`.
macro_rules! get_route {
    ($label:literal, $path:literal) => {
        $crate::answering::Route {
            label: $label,
            span_name: concat!("GET ", $path),
            path: $path,
            method: "GET",
        }
    };
}
pub(crate) use get_route;

/// A route, as its metrics and its server span name it ([`post_route!`], [`get_route!`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    /// The `route` label of `tollgate_gateway_requests_total`.
    pub(crate) label: &'static str,
    /// The span's name, `POST <path>`.
    pub(crate) span_name: &'static str,
    /// The path, OpenTelemetry's `http.route`.
    pub(crate) path: &'static str,
    /// The method, OpenTelemetry's `http.request.method`.
    pub(crate) method: &'static str,
}

/// Runs a route's handler `run` on `request` in its server span, answers its failure in
/// `dialect` (an upstream or internal one with a stable message and the request id, its
/// detail logged), and counts the answer (and the request in flight meanwhile). When
/// the shutdown grace ends first, the request is answered 503 then (dropping `run`
/// cancels and settles its call).
pub(crate) async fn answered<F, Fut>(
    state: Gateway,
    route: Route,
    dialect: Dialect,
    request: Request,
    run: F,
) -> Response
where
    F: FnOnce(Gateway, HeaderMap, Body, Arc<Tags>) -> Fut,
    Fut: Future<Output = Result<Response, GatewayError>>,
{
    let (parts, body) = request.into_parts();
    let request_id = RequestId::of(&parts.extensions);
    let tags = Arc::new(Tags::start(&state.metrics, route, request_id));
    let span = tags.span.clone();
    let grace_over = state.grace_over();
    let work = run(state, parts.headers, body, tags.clone()).instrument(span);
    let result = tokio::select! {
        biased;
        result = work => result,
        () = grace_over => Err(GatewayError::ShuttingDown),
    };
    let response = match result {
        Ok(response) => response,
        Err(e) => tags.fail(e, dialect),
    };
    tags.finish(response)
}

/// One request's labels, learnt as its handler goes; counts the request when it is
/// answered, and keeps the in-flight gauge (a dropped request leaves it too). Its
/// server span (`gateway.request`, OpenTelemetry's HTTP server attributes) is the
/// parent of the pipeline's `gen_ai.call` span, so a trace shows the queue wait and the
/// upstream call inside the client's request.
#[derive(Debug)]
pub(crate) struct Tags {
    metrics: Arc<GatewayMetrics>,
    route: &'static str,
    request_id: RequestId,
    model: OnceLock<String>,
    key: OnceLock<String>,
    span: tracing::Span,
}

impl Tags {
    /// A request on `route` has arrived.
    fn start(metrics: &Arc<GatewayMetrics>, route: Route, request_id: RequestId) -> Self {
        metrics.in_flight.inc();
        let span = tracing::info_span!(
            target: "tollgate_gateway",
            "gateway.request",
            otel.name = route.span_name,
            otel.kind = "server",
            http.request.method = route.method,
            http.route = route.path,
            http.response.status_code = tracing::field::Empty,
            tollgate.gateway.key = tracing::field::Empty,
            tollgate.model_id = tracing::field::Empty,
        );
        Tags {
            metrics: metrics.clone(),
            route: route.label,
            request_id,
            model: OnceLock::new(),
            key: OnceLock::new(),
            span,
        }
    }

    /// The catalog model it asked for, once the catalog has it: a label comes only
    /// from catalog ids, so a flood of made-up names adds no series.
    pub(crate) fn model(&self, model: &str) {
        self.span.record("tollgate.model_id", model);
        let _ = self.model.set(model.to_owned());
    }

    /// It asked for a model the catalog does not have: counted under one `unknown`.
    pub(crate) fn unknown_model(&self) {
        let _ = self.model.set(UNKNOWN.to_owned());
    }

    /// The request's id (`x-request-id`, the client's or the gateway's).
    pub(crate) fn request_id(&self) -> &str {
        self.request_id.as_str()
    }

    /// The answer to failure `error` in `dialect`; an upstream or internal failure's
    /// detail goes to the log under the request id, as the client reads none of it.
    pub(crate) fn fail(&self, error: GatewayError, dialect: Dialect) -> Response {
        self.log(&error);
        error.into_response_for(dialect, Some(self.request_id()))
    }

    /// The error body of a stream that failed after its 200 with `error`, logged as
    /// [`Tags::fail`] logs it.
    pub(crate) fn stream_failed(
        &self,
        error: &GatewayError,
        dialect: Dialect,
    ) -> serde_json::Value {
        self.log(error);
        error.body_for(dialect, Some(self.request_id()))
    }

    fn log(&self, error: &GatewayError) {
        if error.is_masked() {
            tracing::warn!(
                target: "tollgate_gateway",
                request_id = self.request_id(),
                route = self.route,
                model = text_of(&self.model),
                key = text_of(&self.key),
                error = %error,
                "request failed upstream or inside the gateway"
            );
        }
    }

    /// The virtual key it came with (empty on an open gateway).
    pub(crate) fn key(&self, key: &str) {
        if !key.is_empty() {
            self.span.record("tollgate.gateway.key", key);
        }
        let _ = self.key.set(key.to_owned());
    }

    /// Counts the answer and hands it on.
    fn finish(&self, response: Response) -> Response {
        self.span.record(
            "http.response.status_code",
            i64::from(response.status().as_u16()),
        );
        self.metrics.request(
            self.route,
            text_of(&self.model),
            text_of(&self.key),
            response.status().as_u16(),
        );
        response
    }
}

/// The model label of a request for a model the catalog does not have.
pub(crate) const UNKNOWN: &str = "unknown";

/// What a label cell holds, or nothing.
fn text_of(cell: &OnceLock<String>) -> &str {
    cell.get().map_or("", String::as_str)
}

impl Drop for Tags {
    fn drop(&mut self) {
        self.metrics.in_flight.dec();
    }
}
