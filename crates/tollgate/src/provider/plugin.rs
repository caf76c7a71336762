//! The plug-in a provider crate registers: its key, and how to build its transports.

use std::fmt::Debug;
use std::sync::Arc;

use super::{ProviderContext, ProviderTransports};
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

    /// Builds the provider's transports. Must not copy secrets: keep the
    /// [`ProviderContext`]'s [`super::CredentialRef`]s and resolve them on each call.
    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>>;
}
