//! Credentials: resolved by id from a [`CredentialStore`] when a call needs them.
//!
//! Clients never read environment variables and never copy a secret when they are
//! built: every call asks the store, so a key rotated in the store is used by the next
//! call with no restart. [`Secret`] prints as `[redacted]` in `Debug` and `Display`.

mod env;
mod error;
mod file;
mod secret;
mod store;

pub use env::EnvCredentialStore;
pub use error::CredentialError;
pub use file::{FileCredentialStore, parse_credentials_file};
pub use secret::Secret;
pub use store::{CredentialStore, MemoryCredentialStore};

#[cfg(test)]
mod tests;
