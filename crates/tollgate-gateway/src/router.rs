//! The routes: both dialects, operations, and an answer in the dialect's error shape for
//! a path or a method the gateway does not serve (counted under one `unmatched` route,
//! so a flood of made-up paths adds no series).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::routing::get;

use crate::answering::served;
use crate::error::{Dialect, GatewayError};
use crate::ids::RequestId;
use crate::state::Gateway;
use crate::{anthropic, key_view, model_list, openai, ops, responses};

/// What the gateway serves, for the message of a request to anything else.
pub(crate) const ROUTES: &str = "POST /v1/chat/completions, POST /v1/embeddings, \
    GET /v1/models, GET /v1/models/{id}, POST /v1/messages, POST /v1/messages/count_tokens, \
    POST /v1/responses, GET /v1/tollgate/key, GET /v1/tollgate/keys and \
    POST /v1/tollgate/reload (admin), GET /health, \
    GET /ready, GET /metrics, and GET / and HEAD / (an empty 200)";

/// The `route` label of a request no route took (404 or 405), whatever its path.
const UNMATCHED: &str = "unmatched";

/// The gateway's routes over `state`: both dialects (each model route served under
/// its answering layer: span, count and error shape), `/health`, `/ready`, `/metrics`,
/// with `x-request-id` on every answer; any other path or method is answered 404 or 405
/// in the dialect's error shape (Anthropic's under `/v1/messages`, else OpenAI's).
/// Mount it in a larger app, or [`crate::serve`] it.
pub fn router(state: Gateway) -> Router {
    // One handle shared by every route and layer: extracting the state clones it per
    // request and per layer, and a clone of the handle is one reference count.
    let state = Arc::new(state);
    Router::new()
        .route(
            "/v1/chat/completions",
            served(&state, openai::CHAT_COMPLETIONS, openai::chat_completions),
        )
        .route(
            "/v1/embeddings",
            served(&state, openai::EMBEDDINGS, openai::embeddings),
        )
        .route(
            "/v1/models",
            served(&state, model_list::LIST, model_list::list),
        )
        .route(
            "/v1/models/{*id}",
            served(&state, model_list::RETRIEVE, model_list::retrieve),
        )
        .route(
            "/v1/messages",
            served(&state, anthropic::MESSAGES, anthropic::messages),
        )
        .route(
            "/v1/messages/count_tokens",
            served(&state, anthropic::COUNT_TOKENS, anthropic::count_tokens),
        )
        .route(
            "/v1/responses",
            served(&state, responses::RESPONSES, responses::responses),
        )
        .route(
            "/v1/responses/{*rest}",
            served(
                &state,
                responses::STORED_RESPONSE,
                responses::stored_response,
            ),
        )
        .route(
            "/v1/tollgate/key",
            served(&state, key_view::KEY, key_view::own),
        )
        .route(
            "/v1/tollgate/reload",
            served(&state, key_view::RELOAD, key_view::reload),
        )
        .route(
            "/v1/tollgate/keys",
            served(&state, key_view::KEYS, key_view::all),
        )
        .route(
            "/v1/tollgate/keys/{id}",
            served(&state, key_view::ONE_KEY, key_view::one),
        )
        .route("/", get(ops::root))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            ops::request_id,
        ))
        .with_state(state)
}

/// The dialect a path speaks: Anthropic's for `/v1/messages` and every path under it
/// (`/v1/messages/batches`, …), else OpenAI's (`/v1/messagesx` too).
fn dialect_of(path: &str) -> Dialect {
    if path == "/v1/messages" || path.starts_with("/v1/messages/") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    }
}

/// The request's method and path, cut short, for a message.
fn described(request: &Request) -> (String, String) {
    let path: String = request.uri().path().chars().take(200).collect();
    (request.method().to_string(), path)
}

async fn no_route(State(state): State<Arc<Gateway>>, request: Request) -> Response {
    let id = RequestId::of(request.extensions());
    let dialect = dialect_of(request.uri().path());
    let (method, path) = described(&request);
    let response =
        GatewayError::NoRoute { method, path }.into_response_for(dialect, Some(id.as_str()));
    counted_unmatched(&state, response)
}

/// Counts an answer to a request no route took, under [`UNMATCHED`] with no model or key
/// (its path is never a label).
fn counted_unmatched(state: &Gateway, response: Response) -> Response {
    state
        .metrics
        .request(UNMATCHED, "", "", response.status().as_u16());
    response
}

async fn method_not_allowed(State(state): State<Arc<Gateway>>, request: Request) -> Response {
    let id = RequestId::of(request.extensions());
    let dialect = dialect_of(request.uri().path());
    let (method, path) = described(&request);
    let mut response = GatewayError::MethodNotAllowed { method, path }
        .into_response_for(dialect, Some(id.as_str()));
    debug_assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let allow = if request.uri().path().starts_with("/v1/models")
        || matches!(
            request.uri().path(),
            "/" | "/health" | "/ready" | "/metrics"
        ) {
        Method::GET
    } else {
        Method::POST
    };
    if let Ok(value) = allow.as_str().parse() {
        response.headers_mut().insert("allow", value);
    }
    counted_unmatched(&state, response)
}
