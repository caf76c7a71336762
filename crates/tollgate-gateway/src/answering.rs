//! A request's answer as every model route gives it, from the layer [`served`] puts on
//! the route (so a route cannot be served without it): its server span, its labels
//! (learnt as the handler goes, bounded to catalog and key ids), the failure in its
//! dialect (a handler's [`Failed`] answered again naming the request id, an upstream or
//! internal one masked, its detail logged under the request id), the end of the
//! shutdown grace, the `x-ratelimit-*` headers of the model and key it was for, and the
//! count of it in `/metrics`.

use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::HeaderMap;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use axum::routing::{MethodRouter, any, get, post};
use tracing::Instrument;

use crate::access::Access;
use crate::error::{Dialect, GatewayError};
use crate::failure::Failed;
use crate::ids::RequestId;
use crate::metrics::GatewayMetrics;
use crate::room;
use crate::state::Gateway;

/// A route, as its metrics and its server span name it, and the dialect it answers in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    /// The `route` label of `tollgate_gateway_requests_total`.
    label: &'static str,
    /// The path, OpenTelemetry's `http.route`.
    path: &'static str,
    /// The method it takes.
    method: Takes,
    /// The dialect its answers and failures are in.
    speaks: Speaks,
}

impl Route {
    /// `POST path`, counted as `label`, answering in `speaks`.
    pub(crate) const fn post(label: &'static str, path: &'static str, speaks: Speaks) -> Self {
        Route {
            label,
            path,
            method: Takes::Post,
            speaks,
        }
    }

    /// `GET path` (and `HEAD`), counted as `label`, answering in `speaks`.
    pub(crate) const fn get(label: &'static str, path: &'static str, speaks: Speaks) -> Self {
        Route {
            method: Takes::Get,
            ..Route::post(label, path, speaks)
        }
    }

    /// Every method on `path`, counted as `label`, answering in `speaks`; its span is
    /// named by the request's method.
    pub(crate) const fn any(label: &'static str, path: &'static str, speaks: Speaks) -> Self {
        Route {
            method: Takes::Any,
            ..Route::post(label, path, speaks)
        }
    }
}

/// The method a route takes.
#[derive(Debug, Clone, Copy)]
enum Takes {
    /// `POST`.
    Post,
    /// `GET` (and `HEAD`, which axum answers as `GET` without the body).
    Get,
    /// Every method.
    Any,
}

impl Takes {
    /// OpenTelemetry's `http.request.method` of a request by `method`: the route's own,
    /// or the request's when it takes every method.
    fn name(self, method: &axum::http::Method) -> &str {
        match self {
            Takes::Post => "POST",
            Takes::Get => "GET",
            Takes::Any => method.as_str(),
        }
    }
}

/// The dialect a route answers in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Speaks {
    /// OpenAI's.
    OpenAi,
    /// Anthropic's.
    Anthropic,
    /// Anthropic's when the request carries `anthropic-version` (as Anthropic's SDKs and
    /// Claude Code send), else OpenAI's.
    ByVersionHeader,
}

impl Speaks {
    /// The dialect of a request with `headers`.
    fn of(self, headers: &HeaderMap) -> Dialect {
        match self {
            Speaks::OpenAi => Dialect::OpenAi,
            Speaks::Anthropic => Dialect::Anthropic,
            Speaks::ByVersionHeader if headers.contains_key("anthropic-version") => {
                Dialect::Anthropic
            }
            Speaks::ByVersionHeader => Dialect::OpenAi,
        }
    }
}

/// `handler` served as `route` (by its method, or every method): under the layer that
/// gives each request its [`Tags`] (in the request's extensions, as `Arc<Tags>`), runs the
/// handler in its server span until the shutdown grace ends (then answering 503;
/// dropping the handler cancels and settles its call), answers a [`Failed`] response in
/// its dialect with the request id (an upstream or internal failure masked, its detail
/// logged), and counts the answer (and the request in flight meanwhile).
pub(crate) fn served<H, T>(
    state: &Arc<Gateway>,
    route: Route,
    handler: H,
) -> MethodRouter<Arc<Gateway>>
where
    H: Handler<T, Arc<Gateway>>,
    T: 'static,
{
    let layer = from_fn_with_state((state.clone(), route), answered);
    match route.method {
        // Only the route's method: another is the router's 405, counted as unmatched.
        Takes::Post => post(handler).route_layer(layer),
        Takes::Get => get(handler).route_layer(layer),
        // Every method (axum serves `any` as the method router's fallback).
        Takes::Any => any(handler).layer(layer),
    }
}

/// The layer of [`served`].
async fn answered(
    State((state, route)): State<(Arc<Gateway>, Route)>,
    mut request: Request,
    next: Next,
) -> Response {
    let request_id = RequestId::of(request.extensions());
    let dialect = route.speaks.of(request.headers());
    let method = route.method.name(request.method()).to_owned();
    let access = request.extensions().get::<Arc<Access>>().cloned();
    let tags = Arc::new(Tags::start(
        &state.metrics,
        route,
        &method,
        dialect,
        request_id,
        access,
    ));
    request.extensions_mut().insert(tags.clone());
    let grace_over = state.grace_over();
    let work = next.run(request).instrument(tags.span.clone());
    let response = tokio::select! {
        biased;
        response = work => response,
        () = grace_over => tags.fail(&GatewayError::ShuttingDown, dialect),
    };
    let mut response = match response.extensions().get::<Failed>().cloned() {
        Some(Failed(error, dialect)) => tags.fail(&error, dialect),
        None => response,
    };
    if let Some(model) = tags.catalog_model() {
        let rooms = room::for_request(&state, model, text_of(&tags.key)).await;
        room::write(response.headers_mut(), &rooms);
    }
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
    dialect: Dialect,
    model: OnceLock<String>,
    key: OnceLock<String>,
    span: tracing::Span,
    /// The request's access-log entry, when the access log is on.
    access: Option<Arc<Access>>,
}

impl Tags {
    /// A request on `route` by `method` has arrived, to be answered in `dialect`.
    fn start(
        metrics: &Arc<GatewayMetrics>,
        route: Route,
        method: &str,
        dialect: Dialect,
        request_id: RequestId,
        access: Option<Arc<Access>>,
    ) -> Self {
        metrics.in_flight.inc();
        if let Some(access) = &access {
            access.route(route.path);
        }
        let span = tracing::info_span!(
            target: "tollgate_gateway",
            "gateway.request",
            otel.name = tracing::field::Empty,
            otel.kind = "server",
            http.request.method = method,
            http.route = route.path,
            http.response.status_code = tracing::field::Empty,
            tollgate.gateway.key = tracing::field::Empty,
            tollgate.model_id = tracing::field::Empty,
        );
        // Named only when something listens: the name is built per request.
        if !span.is_disabled() {
            span.record("otel.name", format!("{method} {}", route.path).as_str());
        }
        Tags {
            metrics: metrics.clone(),
            route: route.label,
            request_id,
            dialect,
            model: OnceLock::new(),
            key: OnceLock::new(),
            span,
            access,
        }
    }

    /// The catalog model it asked for, once the catalog has it: a label comes only
    /// from catalog ids, so a flood of made-up names adds no series.
    pub(crate) fn model(&self, model: &str) {
        self.span.record("tollgate.model_id", model);
        if let Some(access) = &self.access {
            access.model(model);
        }
        let _ = self.model.set(model.to_owned());
    }

    /// It asked for a model the catalog does not have: counted under one `unknown`.
    pub(crate) fn unknown_model(&self) {
        if let Some(access) = &self.access {
            access.model(UNKNOWN);
        }
        let _ = self.model.set(UNKNOWN.to_owned());
    }

    /// The catalog model it asked for, once known (not one the catalog lacks).
    fn catalog_model(&self) -> Option<&str> {
        self.model
            .get()
            .map(String::as_str)
            .filter(|m| *m != UNKNOWN && !m.is_empty())
    }

    /// The request's access-log entry, when the access log is on: a stream's polling
    /// runs with it, so the records of the call it carries reach it.
    pub(crate) fn access(&self) -> Option<&Arc<Access>> {
        self.access.as_ref()
    }

    /// The dialect the request is answered in.
    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The request's id (`x-request-id`, the client's or the gateway's).
    pub(crate) fn request_id(&self) -> &str {
        self.request_id.as_str()
    }

    /// The answer to failure `error` in `dialect`; an upstream or internal failure's
    /// detail goes to the log under the request id, as the client reads none of it.
    pub(crate) fn fail(&self, error: &GatewayError, dialect: Dialect) -> Response {
        self.log(error);
        error.response_for(dialect, Some(self.request_id()))
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
            if let Some(access) = &self.access {
                access.key(key);
            }
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
