//! The route handlers: authenticate, decode, call through `Models`, encode the
//! answer or the failure in this dialect.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::request::MessagesRequest;
use super::response::{EventEncoder, message};
use crate::auth::admitted;
use crate::client::chat_client;
use crate::error::{Dialect, GatewayError};
use crate::ids;
use crate::metrics::{Route, Tags, answered, post_route};
use crate::sse::sse_response;
use crate::state::Gateway;

/// `POST /v1/messages`, as its metrics and span name it.
const MESSAGES: Route = post_route!("messages", "/v1/messages");

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(state): State<Gateway>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let metrics = state.metrics.clone();
    answered(&metrics, MESSAGES, Dialect::Anthropic, |tags| {
        answer(state, headers, body, tags)
    })
    .await
}

async fn answer(
    state: Gateway,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    tags: Arc<Tags>,
) -> Result<Response, GatewayError> {
    let (req, models) = admitted::<MessagesRequest>(&state, &headers, body, &tags).await?;
    let request = req.to_llm_request()?;
    let client = chat_client(&models, &request).await?;
    let id = ids::next("msg");
    if req.stream {
        // Queued and sent before the 200: a refusal to wait is still a status answer.
        let stream = client.stream_response(&request).await?;
        return Ok(sse_response(
            stream,
            EventEncoder::new(id, req.model.clone()),
        ));
    }
    let response = client.single_response(&request).await?;
    Ok(Json(message(&id, &req.model, &response)).into_response())
}
