//! The route handlers: authenticate, decode, call through `Models`, encode the
//! answer or the failure in this dialect.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use tollgate::EmbeddingPurpose;
use tollgate::pipeline::{DefaultEstimator, TokenEstimator};

use super::request::{ChatRequest, EmbeddingsRequest};
use super::response::{ChunkEncoder, openai_completion, openai_embeddings};
use crate::answering::{Route, Tags, answered, post_route};
use crate::auth::admitted;
use crate::client::chat_client;
use crate::error::{Dialect, GatewayError};
use crate::ids;
use crate::sse::{sse_response, unix_now};
use crate::state::Gateway;

/// `POST /v1/chat/completions`, as its metrics and span name it.
const CHAT_COMPLETIONS: Route = post_route!("chat_completions", "/v1/chat/completions");

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(State(state): State<Gateway>, request: Request) -> Response {
    answered(state, CHAT_COMPLETIONS, Dialect::OpenAi, request, chat).await
}

async fn chat(
    state: Gateway,
    headers: HeaderMap,
    body: Body,
    tags: Arc<Tags>,
) -> Result<Response, GatewayError> {
    let (req, models) = admitted::<ChatRequest>(&state, &headers, body, &tags).await?;
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
const EMBEDDINGS: Route = post_route!("embeddings", "/v1/embeddings");

/// `POST /v1/embeddings`.
pub(crate) async fn embeddings(State(state): State<Gateway>, request: Request) -> Response {
    answered(state, EMBEDDINGS, Dialect::OpenAi, request, embed).await
}

async fn embed(
    state: Gateway,
    headers: HeaderMap,
    body: Body,
    tags: Arc<Tags>,
) -> Result<Response, GatewayError> {
    let (req, models) = admitted::<EmbeddingsRequest>(&state, &headers, body, &tags).await?;
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
