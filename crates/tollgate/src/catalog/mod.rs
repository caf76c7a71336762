//! The catalog: one entry per model, from TOML or built in code, validated on load.
//!
//! Every mistake is reported with the model id and the field to fix, before any call is
//! made: an unknown provider, a negative or non-numeric limit, a default output above
//! the ceiling, fallbacks to unknown models or to the model itself, a missing credential
//! id, duplicate ids, an embeddings model that cannot produce the deployment's width,
//! an alias that is another name already, a pattern without one `*` or listed twice.
//! A name a client sends resolves to a model by id, alias or pattern (`names`).
//! See `docs/catalog.md` for every field.

mod batch_terms;
mod dimension;
mod entry;
mod error;
mod fallback_wait;
mod load;
mod names;
mod parse;
mod price;
mod providers;

pub use batch_terms::BatchTerms;
pub use dimension::Dimension;
pub use entry::{
    DEFAULT_MAX_EMBEDDINGS_RESPONSE_BYTES, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_STREAM_IDLE_TIMEOUT,
    Deployment, EmbeddingCapabilities, Limits, ModelEntry, ModelKind, RateWindow,
};
pub use error::{CatalogError, UnknownModel};
pub use fallback_wait::FallbackWait;
pub use load::{Catalog, CatalogBuilder};
pub use names::NameMatch;
pub use price::Price;
pub use providers::{FIRST_PARTY, KnownProviders, LinkedProvider, ProviderInfo, first_party_crate};

#[cfg(test)]
#[path = "names_tests.rs"]
mod names_tests;
#[cfg(test)]
mod tests;
