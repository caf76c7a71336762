//! Credentials: resolved by id from a [`CredentialStore`] when a call needs them.
//!
//! Clients never read environment variables and never copy a secret when they are
//! built: every call asks the store, so a key rotated in the store is used by the next
//! call with no restart. [`Secret`] prints as `[redacted]` in `Debug` and `Display`.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// A secret value. `Debug` and `Display` print `[redacted]`; read it with
/// [`Secret::expose_secret`] only where it is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(Arc::from(value.into()))
    }

    /// The secret text, for the one place that sends it.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Why a credential could not be resolved. Never holds the secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// The store has no credential with this id.
    #[error(
        "credential `{id}` is not in the {store}; add it there or fix the model's `credential` in the catalog"
    )]
    NotFound {
        /// The id asked for.
        id: String,
        /// Which store was asked.
        store: String,
    },
    /// The credentials file could not be read.
    #[error("could not read credentials file `{path}`: {source}")]
    Unreadable {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The credentials file is not valid.
    #[error("credentials file `{path}` is invalid: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong (never the secret).
        reason: String,
    },
}

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

/// Credentials in a TOML file of `id = "secret"` lines, read on every lookup so that
/// editing the file rotates a key without a restart.
#[derive(Debug, Clone)]
pub struct FileCredentialStore {
    path: PathBuf,
}

impl FileCredentialStore {
    /// A store reading `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileCredentialStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn get(&self, id: &str) -> Result<Secret, CredentialError> {
        let path = self.path.display().to_string();
        let text = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|source| CredentialError::Unreadable {
                path: path.clone(),
                source,
            })?;
        parse_credentials_file(&path, &text, id)
    }
}

/// Looks `id` up in the text of a credentials file (TOML, `id = "secret"` lines);
/// `path` only names the file in errors. What [`FileCredentialStore`] does with the file
/// it read; public for the fuzz targets (`fuzz/`), not part of the API.
#[doc(hidden)]
pub fn parse_credentials_file(path: &str, text: &str, id: &str) -> Result<Secret, CredentialError> {
    let path = path.to_owned();
    // The parser's own message could quote a secret; report only the position.
    let table: toml::Table =
        text.parse()
            .map_err(|e: toml::de::Error| CredentialError::Invalid {
                path: path.clone(),
                reason: match e.span() {
                    Some(span) => format!("not valid TOML near byte {}", span.start),
                    None => "not valid TOML".into(),
                },
            })?;
    match table.get(id) {
        Some(toml::Value::String(secret)) => Ok(Secret::new(secret.clone())),
        Some(_) => Err(CredentialError::Invalid {
            path,
            reason: format!("`{id}` must be a string"),
        }),
        None => Err(CredentialError::NotFound {
            id: id.into(),
            store: format!("credentials file `{path}`"),
        }),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_debug_and_display_are_redacted() {
        let s = Secret::new("sk-live-123");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(s.expose_secret(), "sk-live-123");
        let store = MemoryCredentialStore::new().with("main", "sk-live-123");
        assert!(!format!("{store:?}").contains("sk-live"));
    }

    #[tokio::test]
    async fn memory_store_rotation_is_seen_by_the_next_lookup() {
        let store = MemoryCredentialStore::new().with("main", "old");
        assert_eq!(store.get("main").await.unwrap().expose_secret(), "old");
        store.insert("main", "new");
        assert_eq!(store.get("main").await.unwrap().expose_secret(), "new");
    }

    #[tokio::test]
    async fn file_store_reads_the_file_on_every_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds.toml");
        std::fs::write(&path, "main = \"first\"\n").unwrap();
        let store = FileCredentialStore::new(&path);
        assert_eq!(store.get("main").await.unwrap().expose_secret(), "first");
        std::fs::write(&path, "main = \"second\"\n").unwrap();
        assert_eq!(store.get("main").await.unwrap().expose_secret(), "second");
        let err = store.get("other").await.unwrap_err();
        assert!(matches!(err, CredentialError::NotFound { .. }), "{err}");
    }

    #[tokio::test]
    async fn file_store_errors_never_quote_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds.toml");
        std::fs::write(&path, "main = \"sk-secret-value\n").unwrap();
        let err = FileCredentialStore::new(&path)
            .get("main")
            .await
            .unwrap_err();
        assert!(!err.to_string().contains("sk-secret"), "{err}");
        assert!(!format!("{err:?}").contains("sk-secret"), "{err:?}");
    }

    #[tokio::test]
    async fn env_store_reads_only_mapped_variables() {
        let store = EnvCredentialStore::new().map("main", "TOLLGATE_TEST_SURELY_UNSET_VAR");
        let err = store.get("main").await.unwrap_err();
        assert!(err.to_string().contains("TOLLGATE_TEST_SURELY_UNSET_VAR"));
        let err = store.get("unmapped").await.unwrap_err();
        assert!(err.to_string().contains("no variable is mapped"));
        let path = store.get("PATH").await.unwrap_err();
        assert!(matches!(path, CredentialError::NotFound { .. }));
    }
}
