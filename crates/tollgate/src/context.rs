//! What a provider is built with: the catalog, the credential store, the connect timeout
//! (re-exported by [`crate::provider`], below which it sits so that the HTTP kit can use
//! it without a circle).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{Catalog, ModelEntry};
use crate::credentials::{CredentialStore, Secret};
use crate::error::Result;

/// What a provider is built with: the catalog and the credential store.
#[derive(Debug, Clone)]
pub struct ProviderContext {
    key: String,
    connect_timeout: Duration,
    catalog: Arc<Catalog>,
    credentials: Arc<dyn CredentialStore>,
}

impl ProviderContext {
    /// A context for provider `key`.
    pub fn new(
        key: impl Into<String>,
        catalog: Arc<Catalog>,
        credentials: Arc<dyn CredentialStore>,
    ) -> Self {
        ProviderContext {
            key: key.into(),
            connect_timeout: Duration::from_secs(10),
            catalog,
            credentials,
        }
    }

    /// Sets the connect timeout transports should use.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a transport may take to connect; a slower connect is a
    /// [`crate::ProviderError::Timeout`]. (The whole attempt's deadline is enforced by
    /// the pipeline.)
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The provider key being built.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The whole catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// This provider's models.
    pub fn models(&self) -> impl Iterator<Item = &ModelEntry> {
        self.catalog.models().filter(|m| m.provider == self.key)
    }

    /// A handle to `model`'s credential, resolved on each use; `None` when the model
    /// names no credential.
    pub fn credential_ref(&self, model: &ModelEntry) -> Option<CredentialRef> {
        model.credential.as_ref().map(|id| CredentialRef {
            id: id.clone(),
            store: self.credentials.clone(),
        })
    }

    /// The credential store, for providers that resolve ids of their own.
    pub fn credentials(&self) -> &Arc<dyn CredentialStore> {
        &self.credentials
    }
}

/// A credential id and the store to resolve it in. Clients keep this, never the secret,
/// and call [`CredentialRef::secret`] for each request so rotation needs no restart.
#[derive(Clone)]
pub struct CredentialRef {
    id: String,
    store: Arc<dyn CredentialStore>,
}

impl CredentialRef {
    /// The credential id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The secret as the store holds it now.
    pub async fn secret(&self) -> Result<Secret> {
        Ok(self.store.get(&self.id).await?)
    }
}

impl fmt::Debug for CredentialRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialRef")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
