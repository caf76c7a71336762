//! The route handlers: authenticate, decode, call through `Models`, encode the answer
//! or the failure in OpenAI's shape.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::output::{Echo, whole};
use super::request::ResponsesRequest;
use super::stream::EventEncoder;
use crate::answering::{Route, Tags, answered, post_route};
use crate::auth::admitted;
use crate::client::chat_client;
use crate::error::{Dialect, GatewayError};
use crate::ids::RequestId;
use crate::sse::sse_response;
use crate::state::Gateway;

/// `POST /v1/responses`, as its metrics and span name it.
const RESPONSES: Route = post_route!("responses", "/v1/responses");

/// `POST /v1/responses`.
pub(crate) async fn responses(State(state): State<Gateway>, request: Request) -> Response {
    answered(state, RESPONSES, Dialect::OpenAi, request, answer).await
}

async fn answer(
    state: Gateway,
    headers: HeaderMap,
    body: Body,
    tags: Arc<Tags>,
) -> Result<Response, GatewayError> {
    let (req, models) = admitted::<ResponsesRequest>(&state, &headers, body, &tags).await?;
    let decoded = req.decode()?;
    let request = decoded.request;
    let client = chat_client(&models, &request).await?;
    let echo = Echo::new(&req, decoded.custom_tools, decoded.namespaces);
    if req.stream {
        // Queued and sent before the 200: a refusal to wait is still a status answer.
        let stream = client.stream_response(&request).await?;
        // The provider that signs streamed thinking: the one whose model took the call
        // (after a fallback, not the one asked for), else the asked model's own.
        let provider = match stream.provider() {
            Some(provider) => provider.to_owned(),
            None => models
                .catalog()
                .get(request.model_id())
                .map(|e| e.provider.clone())
                .map_err(tollgate::Error::from)?,
        };
        let encoder = EventEncoder::new(echo, &provider);
        return Ok(sse_response(stream, encoder, &tags, &state));
    }
    let response = client.single_response(&request).await?;
    Ok(Json(whole(&echo, &response)).into_response())
}

/// `GET`/`DELETE /v1/responses/{id}` and the routes under it: the gateway stores no
/// responses, so each is a 404 in OpenAI's shape that says so.
pub(crate) async fn stored_response(request: Request) -> Response {
    let id = RequestId::of(request.extensions());
    let path: String = request.uri().path().chars().take(200).collect();
    GatewayError::NotKept {
        param: "response_id".into(),
        code: "not_found",
        reason: format!(
            "{} {path}: the gateway stores no responses (it answers with store: false); keep \
             the answer on the client and send the whole conversation each time",
            request.method()
        ),
    }
    .into_response_for(Dialect::OpenAi, Some(id.as_str()))
}
