//! The plug-in a provider crate registers: its key, and how to build its transports.

use std::fmt::Debug;
use std::sync::Arc;

use super::transports::ProviderTransports;
use crate::catalog::ModelEntry;
use crate::context::ProviderContext;
use crate::error::Result;

/// A provider: its key, and how to build the transports it serves.
///
/// `build` runs once per [`crate::Models`], on the first call to one of the provider's
/// models, so a provider that is never used costs nothing and never asks the credential
/// store for anything.
#[async_trait::async_trait]
pub trait Provider: Send + Sync + Debug + 'static {
    /// The key catalog entries name in `provider = "…"`.
    fn key(&self) -> &'static str;

    /// Whether catalog entries of this provider must name a `credential`.
    fn requires_credential(&self) -> bool {
        true
    }

    /// The provider's name in the OpenTelemetry GenAI semantic conventions, the value of
    /// `gen_ai.provider.name` on spans and metrics (`anthropic`, `aws.bedrock`, `openai`,
    /// `gcp.gemini`, `gcp.vertex_ai`, …). The default is [`Provider::key`], for providers
    /// the conventions do not list (they allow a custom value).
    fn conventions_name(&self) -> &'static str {
        self.key()
    }

    /// The address `model`'s calls are sent to (scheme, host, optional port), from which
    /// spans and metrics take `server.address` and `server.port`; `None` when unknown
    /// before a call. The default reads the model's `base_url` option.
    fn base_url(&self, model: &ModelEntry) -> Option<String> {
        model
            .options
            .get("base_url")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    }

    /// Called once per catalog model (and deployment) of this provider when
    /// [`crate::Models`] is built, before any call: where to start work that would
    /// otherwise land on the model's first call (e.g. loading a tokenizer's tables in the
    /// background). Must return at once and never fail; by default nothing.
    fn prepare(&self, model: &ModelEntry) {
        let _ = model;
    }

    /// Builds the provider's transports. Must not copy secrets: keep the
    /// [`ProviderContext`]'s [`CredentialRef`](crate::context::CredentialRef)s and resolve them on each call.
    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>>;
}
