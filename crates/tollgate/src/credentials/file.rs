//! Credentials read from a TOML file on every lookup.

use std::path::{Path, PathBuf};

use super::{CredentialError, CredentialStore, Secret};

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

/// Reads secret `id` from the text of a credentials file at `path` (for the fuzz target;
/// [`FileCredentialStore`] reads the file and calls this).
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
