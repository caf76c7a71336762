//! What a live reload says: [`ReloadError`] when it did not happen, [`Reloaded`] when it
//! did, and the [`Reload`] a gateway asks one of (its [`LiveGateway`](crate::LiveGateway)).

/// Why a reload did not happen; the gateway serving before it goes on serving.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The gateway was given nothing to reload from ([`LiveGateway::new`](crate::LiveGateway::new)).
    #[error("this gateway was started with nothing to reload from")]
    NotReloadable,
    /// The new catalog or keys were refused (a file that does not parse, a key naming a
    /// model the new catalog lacks, …); the old ones are kept.
    #[error("reload refused, the catalog and keys in use are kept: {0}")]
    Refused(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// What a reload put in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reloaded {
    /// Catalog models now served.
    pub models: usize,
    /// Virtual keys now accepted (`None`: the gateway is open).
    pub keys: Option<usize>,
}

/// What can be asked to reload: the live gateway a gateway is served by.
pub(crate) trait Reload: Send + Sync {
    /// Reloads, or says why not.
    fn reload(&self) -> Result<Reloaded, ReloadError>;
}
