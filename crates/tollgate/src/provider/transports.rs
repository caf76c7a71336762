//! What a built provider hands out: one transport per catalog model and kind.

use std::fmt::Debug;
use std::sync::Arc;

use super::batch::BatchTransport;
use super::transport::{ChatTransport, DecisionTransport, EmbeddingsTransport};
use crate::catalog::ModelEntry;
use crate::error::{Error, Result};

/// What a built provider hands out, per catalog model: the transports the pipeline
/// drives. A provider overrides the kinds it serves; the others answer
/// [`Error::Unsupported`].
pub trait ProviderTransports: Send + Sync + Debug {
    /// The chat transport for `model`.
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Err(unsupported(model, "chat"))
    }

    /// The embeddings transport for `model`.
    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Err(unsupported(model, "embeddings"))
    }

    /// The decision transport for `model`.
    fn decision(&self, model: &ModelEntry) -> Result<Arc<dyn DecisionTransport>> {
        Err(unsupported(model, "decision"))
    }

    /// The batch API for chat model `model` (`tollgate run --via batch`), where the
    /// provider has one.
    fn batch(&self, model: &ModelEntry) -> Result<Arc<dyn BatchTransport>> {
        Err(unsupported(model, "batch"))
    }
}

fn unsupported(model: &ModelEntry, capability: &str) -> Error {
    Error::Unsupported {
        model_id: model.id.clone(),
        provider: model.provider.clone(),
        capability: capability.into(),
    }
}
