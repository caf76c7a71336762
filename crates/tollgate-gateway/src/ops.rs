//! Operations: `/health`, `/ready`, `/metrics`, the `/` probe and the `x-request-id` on
//! every answer.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::access::Access;
use crate::ids::{self, RequestId};
use crate::state::Gateway;

/// The header that carries a request's id, the client's or a generated one.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// `GET /health`: the process answers.
pub(crate) async fn health() -> &'static str {
    "ok"
}

/// `GET /` and `HEAD /`: an empty 200, for the clients that probe the base URL before
/// using it (Claude Code sends `HEAD /`).
pub(crate) async fn root() -> StatusCode {
    StatusCode::OK
}

/// `GET /metrics`: every counter in the OpenMetrics text format (the queue depths read
/// from the limiters now).
pub(crate) async fn metrics(State(state): State<Arc<Gateway>>) -> Response {
    refresh_queues(&state).await;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::METRICS_CONTENT_TYPE,
        )],
        state.metrics.encode(),
    )
        .into_response()
}

/// `GET /ready`: 200 while the gateway takes requests; 503 once it is draining for
/// shutdown, or while a model's (or key's) limiter cannot answer (a shared one on an
/// unreachable Redis: its requests would all fail closed, so a load balancer should send
/// them to another replica). Asks every limiter once (one round trip each on Redis).
pub(crate) async fn ready(State(state): State<Arc<Gateway>>) -> Response {
    if state.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response();
    }
    for limiter in state.limiters() {
        if limiter.snapshot().await.is_err() {
            let why = format!("the limiter of `{}` is unavailable", limiter.model_id());
            return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
        }
    }
    "ready".into_response()
}

/// Echoes the client's `x-request-id` (if it is up to 200 visible ASCII characters) or
/// makes one, on the answer whatever it is; handlers read it from the request's
/// extensions ([`RequestId::of`]). While the gateway drains for shutdown, every answer
/// says `connection: close`, so clients stop reusing its connections. When the access
/// log is on, the request's [`Access`] entry goes in the extensions too (a model route's
/// answering layer fills it in), its work runs with it as the records' destination, and
/// it is written once the answer (and a stream's end) is done with.
pub(crate) async fn request_id(
    State(state): State<Arc<Gateway>>,
    mut request: Request,
    next: Next,
) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 200 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(|| ids::next("req"), str::to_owned);
    let value = HeaderValue::from_str(&id).unwrap_or(HeaderValue::from_static("req"));
    let id = RequestId::new(id);
    let access = Access::start(&id, request.method(), route_of(request.uri().path()));
    request.extensions_mut().insert(id);
    if let Some(access) = &access {
        request.extensions_mut().insert(access.clone());
    }
    let mut response = Access::scoped(access.as_ref(), next.run(request)).await;
    if let Some(access) = &access {
        access.status(response.status().as_u16());
    }
    let headers = response.headers_mut();
    headers.insert(REQUEST_ID_HEADER, value);
    if state.is_draining() {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The access log's route of a request on `path` until a model route's answering layer
/// names its own: an operation's path, else `unmatched` (as the request counter has it:
/// a client's made-up path is never written).
fn route_of(path: &str) -> &'static str {
    match path {
        "/" => "/",
        "/health" => "/health",
        "/ready" => "/ready",
        "/metrics" => "/metrics",
        _ => "unmatched",
    }
}

/// Reads every model's (and key's) limiter queue into the gauge; a limiter that cannot
/// answer (an unreachable Redis) keeps its last value.
async fn refresh_queues(state: &Gateway) {
    for limiter in state.limiters() {
        if let Ok(snapshot) = limiter.snapshot().await {
            state
                .metrics
                .set_queued(limiter.model_id(), snapshot.queued);
        }
    }
}
