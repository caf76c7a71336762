//! [`Secret`]: a credential value that never prints.

use std::fmt;
use std::sync::Arc;

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
