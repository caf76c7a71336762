use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::ClientProvider;
use crate::error::{Error, Result};

/// One provider's entry in the `inventory` registry; made by [`crate::register_provider!`].
pub struct ProviderRegistration {
    make: fn() -> Arc<dyn ClientProvider>,
}

impl ProviderRegistration {
    /// A registration that makes the provider with `make` (called once per lookup).
    pub const fn new(make: fn() -> Arc<dyn ClientProvider>) -> Self {
        ProviderRegistration { make }
    }
}

impl fmt::Debug for ProviderRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderRegistration")
            .finish_non_exhaustive()
    }
}

inventory::collect!(ProviderRegistration);

/// Registers a provider with the registry, from its crate:
/// `tollgate::register_provider!(|| Arc::new(MyProvider::default()));`.
///
/// The provider crate needs no direct dependency on `inventory`.
#[macro_export]
macro_rules! register_provider {
    ($make:expr) => {
        $crate::__private::inventory::submit! {
            $crate::provider::ProviderRegistration::new($make)
        }
    };
}

/// Every provider registered in this binary, in no particular order (duplicates kept).
pub fn linked_providers() -> Vec<Arc<dyn ClientProvider>> {
    inventory::iter::<ProviderRegistration>
        .into_iter()
        .map(|r| (r.make)())
        .collect()
}

/// Providers by key: those linked into the binary, plus any given explicitly.
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    by_key: BTreeMap<&'static str, Arc<dyn ClientProvider>>,
}

impl ProviderRegistry {
    /// Every provider linked into this binary; two crates registering one key is an error.
    pub fn linked() -> Result<Self> {
        Self::from_providers(linked_providers())
    }

    /// A registry of exactly these providers; two with one key is an error.
    pub fn from_providers(
        providers: impl IntoIterator<Item = Arc<dyn ClientProvider>>,
    ) -> Result<Self> {
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
    pub fn with(mut self, provider: Arc<dyn ClientProvider>) -> Self {
        self.by_key.insert(provider.key(), provider);
        self
    }

    /// The provider for `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<dyn ClientProvider>> {
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
    use crate::provider::{ProviderClients, ProviderContext};

    #[derive(Debug)]
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl ClientProvider for Named {
        fn key(&self) -> &'static str {
            self.0
        }
        async fn build(&self, _: &ProviderContext) -> Result<Arc<dyn ProviderClients>> {
            Err(Error::Cancelled)
        }
    }

    #[test]
    fn registry_rejects_two_providers_with_one_key() {
        let providers: Vec<Arc<dyn ClientProvider>> = vec![
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
        let providers: Vec<Arc<dyn ClientProvider>> =
            vec![Arc::new(Named("b")), Arc::new(Named("a"))];
        let registry = ProviderRegistry::from_providers(providers)
            .unwrap()
            .with(Arc::new(Named("b")));
        assert_eq!(registry.keys(), vec!["a", "b"]);
    }
}
