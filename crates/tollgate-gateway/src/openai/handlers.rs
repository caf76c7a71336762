//! The route handlers: over the admitted request (key, body and model checked by
//! [`Admitted`]), call through `Models` and encode the answer; a failure is an
//! [`OpenAiError`], which the route's answering layer answers in OpenAI's shape.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine;
use serde_json::{Value, json};
use tollgate::EmbeddingPurpose;
use tollgate::pipeline::{DefaultEstimator, TokenEstimator};

use super::request::{ChatRequest, EmbeddingsRequest};
use super::response::{ChunkEncoder, openai_completion, openai_embeddings};
use crate::answering::{Route, Speaks, Tags};
use crate::auth::Admitted;
use crate::client::chat_client;
use crate::failure::OpenAiError;
use crate::ids;
use crate::sse::{sse_response, unix_now};
use crate::state::Gateway;

/// `POST /v1/chat/completions`, as its metrics and span name it.
pub(crate) const CHAT_COMPLETIONS: Route =
    Route::post("chat_completions", "/v1/chat/completions", Speaks::OpenAi);

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(state): State<Arc<Gateway>>,
    Extension(tags): Extension<Arc<Tags>>,
    Admitted(req, models): Admitted<ChatRequest>,
) -> Result<Response, OpenAiError> {
    let request = req.to_llm_request()?;
    let client = chat_client(&models, &request).await?;
    let id = ids::next("chatcmpl");
    let created = unix_now();
    if req.stream {
        // Queued and sent before the 200: a refusal to wait is still a status answer.
        let stream = client.stream_response(&request).await?;
        let encoder = ChunkEncoder::new(id, created, req.model.clone(), req.include_usage());
        return Ok(sse_response(stream, encoder, &tags, &state));
    }
    let response = client.single_response(&request).await?;
    Ok(Json(openai_completion(&id, created, &req.model, &response)).into_response())
}

/// `POST /v1/embeddings`, as its metrics and span name it.
pub(crate) const EMBEDDINGS: Route = Route::post("embeddings", "/v1/embeddings", Speaks::OpenAi);

/// `POST /v1/embeddings`.
pub(crate) async fn embeddings(
    Admitted(req, models): Admitted<EmbeddingsRequest>,
) -> Result<Response, OpenAiError> {
    let texts = req.texts()?;
    let base64 = req.base64()?;
    let client = models.embeddings(&req.model).await?;
    let vectors = client
        .embed_batch(&texts, EmbeddingPurpose::Document)
        .await?;
    let embeddings: Vec<Value> = vectors
        .into_iter()
        .map(|v| {
            if base64 {
                let bytes: Vec<u8> = v.as_slice().iter().flat_map(|x| x.to_le_bytes()).collect();
                Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v.as_slice())
            }
        })
        .collect();
    // The embeddings client reports vectors, not usage: the input is estimated the way
    // the pipeline estimates it before reserving.
    let tokens: u64 = texts
        .iter()
        .map(|t| DefaultEstimator.estimate_text(t))
        .sum();
    Ok(Json(openai_embeddings(&req.model, embeddings, tokens)).into_response())
}
