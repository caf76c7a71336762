//! The chat client a request runs on.

use std::sync::Arc;

use tollgate::pipeline::FallbackOptions;
use tollgate::{LlmClient, LlmRequest, Models};

use crate::error::GatewayError;

/// The client for the request's catalog model: over its catalog `fallbacks` when it has
/// any (the model first; another only when it cannot serve), else the model alone. Its
/// deployments apply either way.
pub(crate) async fn chat_client(
    models: &Models,
    request: &LlmRequest,
) -> Result<Arc<dyn LlmClient>, GatewayError> {
    let id = request.model_id();
    let entry = models.catalog().get(id).map_err(tollgate::Error::from)?;
    Ok(if entry.fallbacks.is_empty() {
        models.chat(id).await?
    } else {
        models
            .chat_with_fallbacks(id, FallbackOptions::default())
            .await?
    })
}
