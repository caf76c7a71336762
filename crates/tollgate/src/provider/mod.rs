//! Provider plug-ins: the [`Provider`] trait, the [`ProviderTransports`] it builds, registration through `inventory`,
//! and the registry that finds every provider linked into the binary.
//!
//! A provider crate registers itself once, at the crate's top level:
//!
//! ```
//! use std::sync::Arc;
//! use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
//!
//! #[derive(Debug, Default)]
//! struct MyProvider;
//!
//! #[derive(Debug)]
//! struct MyTransports; // overrides `chat`, `embeddings` or `decision` with its transports
//! impl ProviderTransports for MyTransports {}
//!
//! #[tollgate::async_trait]
//! impl Provider for MyProvider {
//!     fn key(&self) -> &'static str { "my-provider" }
//!     async fn build(&self, _context: &ProviderContext) -> tollgate::Result<Arc<dyn ProviderTransports>> {
//!         Ok(Arc::new(MyTransports))
//!     }
//! }
//!
//! tollgate::register_provider!(|| Arc::new(MyProvider));
//! # fn main() {
//! assert!(tollgate::provider::linked_providers().iter().any(|p| p.key() == "my-provider"));
//! # }
//! ```
//!
//! and an application links it with one line, `use tollgate_myprovider as _;`, so the
//! crate is not dropped by the linker (a crate that nothing mentions is not linked, and
//! its registration with it).
//!
//! The registration also tells the catalog that the key exists, which crate registers it
//! (the registering crate's package name) and whether its models need a credential
//! ([`Provider::requires_credential`]); see [`crate::catalog::KnownProviders::linked`].

mod context;
mod plugin;
mod registry;
mod transports;

pub use context::{CredentialRef, ProviderContext};
pub use plugin::Provider;
pub use registry::{ProviderRegistration, ProviderRegistry, linked_providers};
pub use transports::ProviderTransports;
