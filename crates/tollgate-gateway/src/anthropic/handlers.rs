//! The route handlers: over the admitted request (key, body and model checked by
//! [`Admitted`]), call through `Models` and encode the answer; a failure is an
//! [`AnthropicError`], which the route's answering layer answers in Anthropic's shape. `POST /v1/messages/count_tokens` counts the
//! same body's input tokens instead of answering it.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;
use tollgate::{LlmClient, LlmRequest, Models};

use super::request::MessagesRequest;
use super::response::{EventEncoder, message};
use crate::answering::{Route, Speaks, Tags};
use crate::auth::Admitted;
use crate::client::chat_client;
use crate::failure::AnthropicError;
use crate::ids;
use crate::sse::sse_response;
use crate::state::Gateway;

/// `POST /v1/messages`, as its metrics and span name it.
pub(crate) const MESSAGES: Route = Route::post("messages", "/v1/messages", Speaks::Anthropic);

/// `POST /v1/messages/count_tokens`, as its metrics and span name it.
pub(crate) const COUNT_TOKENS: Route = Route::post(
    "count_tokens",
    "/v1/messages/count_tokens",
    Speaks::Anthropic,
);

/// The answer header of `POST /v1/messages/count_tokens` that says who counted:
/// `provider` (the model's provider's own counter) or `estimate` (tollgate's).
pub const TOKEN_COUNT_HEADER: &str = "x-tollgate-token-count";

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(state): State<Arc<Gateway>>,
    Extension(tags): Extension<Arc<Tags>>,
    Admitted(req, models): Admitted<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    let (request, client) = prepared(&req, &models).await?;
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

/// What both routes do with the admitted body ([`Admitted`]): it as a neutral request,
/// and the client of its model.
async fn prepared(
    req: &MessagesRequest,
    models: &Models,
) -> Result<(LlmRequest, Arc<dyn LlmClient>), AnthropicError> {
    let request = req.to_llm_request()?;
    let client = chat_client(models, &request).await?;
    Ok((request, client))
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, with [`TOKEN_COUNT_HEADER`].
/// The body is a Messages body (its `max_tokens` may be left out); the key and the model
/// are checked as for `/v1/messages`. The count takes no slot on the model's or the key's
/// limiters: it is sent at once, as the provider limits its counter apart from its
/// answers (and tollgate's estimate costs the provider nothing).
pub(crate) async fn count_tokens(
    Admitted(req, models): Admitted<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    let (request, client) = prepared(&req, &models).await?;
    let counted = client.count_input_tokens(&request).await?;
    Ok((
        [(TOKEN_COUNT_HEADER, counted.counted_by.as_str())],
        Json(json!({"input_tokens": counted.input_tokens})),
    )
        .into_response())
}
