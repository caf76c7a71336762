//! The route handlers: over the admitted request (key, body and model checked by
//! [`Admitted`]), call through `Models` and encode the answer; a failure is an
//! [`OpenAiError`], which the route's answering layer answers in OpenAI's shape.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use super::output::{Echo, whole};
use super::request::ResponsesRequest;
use super::stream::EventEncoder;
use crate::answering::{Route, Speaks, Tags};
use crate::auth::Admitted;
use crate::client::chat_client;
use crate::error::GatewayError;
use crate::failure::OpenAiError;
use crate::sse::sse_response;
use crate::state::Gateway;

/// `POST /v1/responses`, as its metrics and span name it.
pub(crate) const RESPONSES: Route = Route::post("responses", "/v1/responses", Speaks::OpenAi);

/// Every method on `/v1/responses/{id}` and the paths under it, as its metrics and span
/// name it.
pub(crate) const STORED_RESPONSE: Route =
    Route::any("stored_response", "/v1/responses/{*rest}", Speaks::OpenAi);

/// `POST /v1/responses`.
pub(crate) async fn responses(
    State(state): State<Arc<Gateway>>,
    Extension(tags): Extension<Arc<Tags>>,
    Admitted(req, models): Admitted<ResponsesRequest>,
) -> Result<Response, OpenAiError> {
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
pub(crate) async fn stored_response(
    Extension(_tags): Extension<Arc<Tags>>,
    method: Method,
    uri: Uri,
) -> OpenAiError {
    let path: String = uri.path().chars().take(200).collect();
    OpenAiError(GatewayError::NotKept {
        param: "response_id".into(),
        code: "not_found",
        reason: format!(
            "{method} {path}: the gateway stores no responses (it answers with store: false); \
             keep the answer on the client and send the whole conversation each time"
        ),
    })
}
