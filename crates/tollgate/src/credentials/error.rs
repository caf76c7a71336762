//! Why a credential could not be resolved.

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
