//! Provider plug-ins: the [`ClientProvider`] trait, registration through `inventory`,
//! and the registry that finds every provider linked into the binary.
//!
//! A provider crate registers itself once, at the crate's top level:
//!
//! ```
//! use std::sync::Arc;
//! use tollgate::provider::{ClientProvider, ProviderClients, ProviderContext};
//!
//! #[derive(Debug, Default)]
//! struct MyProvider;
//!
//! #[derive(Debug)]
//! struct MyClients; // overrides `chat`, `embeddings` or `decision` with its transports
//! impl ProviderClients for MyClients {}
//!
//! #[tollgate::async_trait]
//! impl ClientProvider for MyProvider {
//!     fn key(&self) -> &'static str { "my-provider" }
//!     async fn build(&self, _context: &ProviderContext) -> tollgate::Result<Arc<dyn ProviderClients>> {
//!         Ok(Arc::new(MyClients))
//!     }
//! }
//!
//! tollgate::register_provider!(|| Arc::new(MyProvider));
//! # fn main() {
//! assert!(tollgate::provider::linked_providers().iter().any(|p| p.key() == "my-provider"));
//! # }
//! ```
//!
//! and an application links it with one line, `use tollgate_myprovider as _;`, so the
//! crate is not dropped by the linker (a crate that nothing mentions is not linked, and
//! its registration with it).

mod context;
mod registry;

use std::fmt::Debug;
use std::sync::Arc;

pub use context::{CredentialRef, ProviderContext};
pub use registry::{ProviderRegistration, ProviderRegistry, linked_providers};

use crate::catalog::ModelEntry;
use crate::error::{Error, Result};
use crate::pipeline::{ChatTransport, DecisionTransport, EmbeddingsTransport};

/// A provider: its key, and how to build its clients.
///
/// `build` runs once per [`crate::Models`], on the first call to one of the provider's
/// models, so a provider that is never used costs nothing and never asks the credential
/// store for anything.
#[async_trait::async_trait]
pub trait ClientProvider: Send + Sync + Debug + 'static {
    /// The key catalog entries name in `provider = "…"`.
    fn key(&self) -> &'static str;

    /// Whether catalog entries of this provider must name a `credential`.
    fn requires_credential(&self) -> bool {
        true
    }

    /// Builds the provider's clients. Must not copy secrets: keep the
    /// [`ProviderContext`]'s [`CredentialRef`]s and resolve them on each call.
    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderClients>>;
}

/// What a built provider hands out, per catalog model: the transports the pipeline
/// drives. A provider overrides the kinds it serves; the others answer
/// [`Error::Unsupported`].
pub trait ProviderClients: Send + Sync + Debug {
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
}

fn unsupported(model: &ModelEntry, capability: &str) -> Error {
    Error::Unsupported {
        model_id: model.id.clone(),
        provider: model.provider.clone(),
        capability: capability.into(),
    }
}
