//! The route handlers: authenticate, decode, call through `Models`, encode the
//! answer or the failure in this dialect. `POST /v1/messages/count_tokens` counts the
//! same body's input tokens instead of answering it.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tollgate::{LlmClient, LlmRequest};

use super::request::MessagesRequest;
use super::response::{EventEncoder, message};
use crate::answering::{Route, Tags, answered, post_route};
use crate::auth::admitted;
use crate::client::chat_client;
use crate::error::{Dialect, GatewayError};
use crate::ids;
use crate::sse::sse_response;
use crate::state::Gateway;

/// `POST /v1/messages`, as its metrics and span name it.
const MESSAGES: Route = post_route!("messages", "/v1/messages");

/// `POST /v1/messages/count_tokens`, as its metrics and span name it.
const COUNT_TOKENS: Route = post_route!("count_tokens", "/v1/messages/count_tokens");

/// The answer header of `POST /v1/messages/count_tokens` that says who counted:
/// `provider` (the model's provider's own counter) or `estimate` (tollgate's).
pub const TOKEN_COUNT_HEADER: &str = "x-tollgate-token-count";

/// `POST /v1/messages`.
pub(crate) async fn messages(State(state): State<Gateway>, request: Request) -> Response {
    answered(state, MESSAGES, Dialect::Anthropic, request, answer).await
}

async fn answer(
    state: Gateway,
    headers: HeaderMap,
    body: Body,
    tags: Arc<Tags>,
) -> Result<Response, GatewayError> {
    let (req, request, client) = prepared(&state, &headers, body, &tags).await?;
    let id = ids::next("msg");
    if req.stream {
        // Queued and sent before the 200: a refusal to wait is still a status answer.
        let stream = client.stream_response(&request).await?;
        let encoder = EventEncoder::new(id, req.model.clone());
        return Ok(sse_response(stream, encoder, &tags, &state));
    }
    let response = client.single_response(&request).await?;
    Ok(Json(message(&id, &req.model, &response)).into_response())
}

/// What both routes do first: the caller and the body admitted ([`admitted`]), the body
/// as a neutral request, and the client of its model.
async fn prepared(
    state: &Gateway,
    headers: &HeaderMap,
    body: Body,
    tags: &Tags,
) -> Result<(MessagesRequest, LlmRequest, Arc<dyn LlmClient>), GatewayError> {
    let (req, models) = admitted::<MessagesRequest>(state, headers, body, tags).await?;
    let request = req.to_llm_request()?;
    let client = chat_client(&models, &request).await?;
    Ok((req, request, client))
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, with [`TOKEN_COUNT_HEADER`].
pub(crate) async fn count_tokens(State(state): State<Gateway>, request: Request) -> Response {
    answered(state, COUNT_TOKENS, Dialect::Anthropic, request, count).await
}

/// The body is a Messages body (its `max_tokens` may be left out); the key and the model
/// are checked as for `/v1/messages`. The count takes no slot on the model's or the key's
/// limiters: it is sent at once, as the provider limits its counter apart from its
/// answers (and tollgate's estimate costs the provider nothing).
async fn count(
    state: Gateway,
    headers: HeaderMap,
    body: Body,
    tags: Arc<Tags>,
) -> Result<Response, GatewayError> {
    let (_, request, client) = prepared(&state, &headers, body, &tags).await?;
    let counted = client.count_input_tokens(&request).await?;
    Ok((
        [(TOKEN_COUNT_HEADER, counted.counted_by.as_str())],
        Json(json!({"input_tokens": counted.input_tokens})),
    )
        .into_response())
}
