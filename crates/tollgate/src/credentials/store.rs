//! The [`CredentialStore`] trait, and the in-memory store.

use std::collections::HashMap;
use std::fmt;
use std::sync::RwLock;

use super::{CredentialError, Secret};

/// Resolves a credential id to a secret.
#[async_trait::async_trait]
pub trait CredentialStore: Send + Sync + fmt::Debug {
    /// The secret for `id`, as the store holds it now.
    async fn get(&self, id: &str) -> Result<Secret, CredentialError>;
}

/// Credentials held in memory; [`MemoryCredentialStore::insert`] rotates one in place.
#[derive(Default)]
pub struct MemoryCredentialStore {
    secrets: RwLock<HashMap<String, Secret>>,
}

impl MemoryCredentialStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `id` → `secret`, chained.
    pub fn with(self, id: impl Into<String>, secret: impl Into<String>) -> Self {
        self.insert(id, secret);
        self
    }

    /// Adds or replaces (rotates) a secret.
    pub fn insert(&self, id: impl Into<String>, secret: impl Into<String>) {
        self.secrets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.into(), Secret::new(secret));
    }

    /// Removes a secret.
    pub fn remove(&self, id: &str) {
        self.secrets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

impl fmt::Debug for MemoryCredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        let mut ids: Vec<&String> = secrets.keys().collect();
        ids.sort();
        f.debug_struct("MemoryCredentialStore")
            .field("ids", &ids)
            .finish()
    }
}

#[async_trait::async_trait]
impl CredentialStore for MemoryCredentialStore {
    async fn get(&self, id: &str) -> Result<Secret, CredentialError> {
        self.secrets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| CredentialError::NotFound {
                id: id.into(),
                store: "in-memory credential store".into(),
            })
    }
}
