//! The registry: every provider linked into the binary, found through `inventory`, by key.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::Provider;
use crate::catalog::ProviderInfo;
use crate::error::{Error, Result};

/// One provider's entry in the `inventory` registry; made by [`crate::register_provider!`].
pub struct ProviderRegistration {
    crate_name: &'static str,
    make: fn() -> Arc<dyn Provider>,
}

impl ProviderRegistration {
    /// A registration, from crate `crate_name`, that makes the provider with `make`
    /// (called once per lookup).
    pub const fn new(crate_name: &'static str, make: fn() -> Arc<dyn Provider>) -> Self {
        ProviderRegistration { crate_name, make }
    }

    /// The crate that registered the provider.
    pub fn crate_name(&self) -> &'static str {
        self.crate_name
    }

    /// A new instance of the provider.
    pub fn provider(&self) -> Arc<dyn Provider> {
        (self.make)()
    }

    /// What the catalog needs to know: the provider's key and credential rule, and the
    /// crate that registered it.
    pub fn info(&self) -> ProviderInfo {
        let provider = self.provider();
        ProviderInfo {
            key: provider.key(),
            crate_name: self.crate_name,
            requires_credential: provider.requires_credential(),
        }
    }
}

impl fmt::Debug for ProviderRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderRegistration")
            .field("crate_name", &self.crate_name)
            .finish_non_exhaustive()
    }
}

inventory::collect!(ProviderRegistration);

/// Registers a provider with the registry, from its crate:
/// `tollgate::register_provider!(|| Arc::new(MyProvider::default()));`.
///
/// Two entries are submitted: the plug-in, for the [`ProviderRegistry`], and a
/// [`crate::catalog::LinkedProvider`], so a catalog accepts the key and an unknown key's
/// error names the crate (the registering package's name, `CARGO_PKG_NAME`).
/// The provider crate needs no direct dependency on `inventory`.
#[macro_export]
macro_rules! register_provider {
    ($make:expr) => {
        const _: () = {
            fn make() -> ::std::sync::Arc<dyn $crate::provider::Provider> {
                ($make)()
            }
            $crate::__private::inventory::submit! {
                $crate::provider::ProviderRegistration::new(env!("CARGO_PKG_NAME"), make)
            }
            $crate::__private::inventory::submit! {
                $crate::catalog::LinkedProvider::new(|| {
                    $crate::provider::ProviderRegistration::new(env!("CARGO_PKG_NAME"), make).info()
                })
            }
        };
    };
}

/// Every provider registered in this binary, in no particular order (duplicates kept).
pub fn linked_providers() -> Vec<Arc<dyn Provider>> {
    inventory::iter::<ProviderRegistration>
        .into_iter()
        .map(ProviderRegistration::provider)
        .collect()
}

/// Providers by key: those linked into the binary, plus any given explicitly.
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    by_key: BTreeMap<&'static str, Arc<dyn Provider>>,
}

impl ProviderRegistry {
    /// Every provider linked into this binary; two crates registering one key is an error.
    pub fn linked() -> Result<Self> {
        Self::from_providers(linked_providers())
    }

    /// A registry of exactly these providers; two with one key is an error.
    pub fn from_providers(providers: impl IntoIterator<Item = Arc<dyn Provider>>) -> Result<Self> {
        let mut registry = ProviderRegistry::default();
        for provider in providers {
            let key = provider.key();
            if registry.by_key.insert(key, provider).is_some() {
                return Err(Error::DuplicateProvider { key: key.into() });
            }
        }
        Ok(registry)
    }

    /// Adds a provider, replacing a linked one with the same key (e.g. a scripted fake).
    pub fn with(mut self, provider: Arc<dyn Provider>) -> Self {
        self.by_key.insert(provider.key(), provider);
        self
    }

    /// The provider for `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<dyn Provider>> {
        self.by_key.get(key)
    }

    /// Every key, sorted.
    pub fn keys(&self) -> Vec<&'static str> {
        self.by_key.keys().copied().collect()
    }
}

impl fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("keys", &self.keys())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderContext, ProviderTransports};

    #[derive(Debug)]
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl Provider for Named {
        fn key(&self) -> &'static str {
            self.0
        }
        async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
            Err(Error::Cancelled)
        }
    }

    #[test]
    fn registry_rejects_two_providers_with_one_key() {
        let providers: Vec<Arc<dyn Provider>> = vec![
            Arc::new(Named("a")),
            Arc::new(Named("b")),
            Arc::new(Named("a")),
        ];
        let err = ProviderRegistry::from_providers(providers).unwrap_err();
        assert!(
            matches!(err, Error::DuplicateProvider { ref key } if key == "a"),
            "{err}"
        );
    }

    #[test]
    fn registry_lists_keys_sorted_and_explicit_providers_replace_linked_ones() {
        let providers: Vec<Arc<dyn Provider>> = vec![Arc::new(Named("b")), Arc::new(Named("a"))];
        let registry = ProviderRegistry::from_providers(providers)
            .unwrap()
            .with(Arc::new(Named("b")));
        assert_eq!(registry.keys(), vec!["a", "b"]);
    }
}
