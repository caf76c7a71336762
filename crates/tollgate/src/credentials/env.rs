//! Credentials read from environment variables, for applications that choose to.

use std::collections::HashMap;

use super::{CredentialError, CredentialStore, Secret};

/// Credentials from environment variables, mapped explicitly by the application:
/// `EnvCredentialStore::new().map("openai-main", "OPENAI_API_KEY")`.
///
/// tollgate never reads the environment on its own; this store exists for applications
/// that choose to, and reads the variable on every lookup.
#[derive(Debug, Clone, Default)]
pub struct EnvCredentialStore {
    vars: HashMap<String, String>,
}

impl EnvCredentialStore {
    /// A store with no mappings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resolves credential `id` from environment variable `var`.
    pub fn map(mut self, id: impl Into<String>, var: impl Into<String>) -> Self {
        self.vars.insert(id.into(), var.into());
        self
    }
}

#[async_trait::async_trait]
impl CredentialStore for EnvCredentialStore {
    async fn get(&self, id: &str) -> Result<Secret, CredentialError> {
        let not_found = |store: String| CredentialError::NotFound {
            id: id.into(),
            store,
        };
        let var = self.vars.get(id).ok_or_else(|| {
            not_found("environment credential store (no variable is mapped to it)".into())
        })?;
        std::env::var(var).map(Secret::new).map_err(|_| {
            not_found(format!(
                "environment (variable `{var}` is unset or not UTF-8)"
            ))
        })
    }
}
