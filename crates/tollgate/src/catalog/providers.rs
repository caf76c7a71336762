//! Which provider keys a catalog may name: those linked into the binary, each with the
//! crate that registers it and whether its models need a credential.
//!
//! Nothing here is a hard-coded table. Every provider crate's `register_provider!`
//! submits a [`LinkedProvider`] next to its plug-in, carrying the crate's own name, so
//! the catalog learns what is linked from the providers themselves and never asks the
//! provider registry (which depends on the catalog, not the other way round).

use std::collections::BTreeMap;
use std::fmt;

/// What the catalog needs to know about a provider key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderInfo {
    /// The key models name in `provider = "…"`.
    pub key: &'static str,
    /// The crate that registers it (for "add this crate" messages).
    pub crate_name: &'static str,
    /// Whether models of this provider must name a `credential`.
    pub requires_credential: bool,
}

/// A provider linked into this binary, as the catalog sees it; submitted by
/// [`crate::register_provider!`] in the provider's crate. `describe` is a function so that
/// the key and the credential rule come from the provider itself.
pub struct LinkedProvider {
    describe: fn() -> ProviderInfo,
}

impl LinkedProvider {
    /// A linked provider described by `describe`.
    pub const fn new(describe: fn() -> ProviderInfo) -> Self {
        LinkedProvider { describe }
    }

    /// The provider's key, crate and credential rule.
    pub fn info(&self) -> ProviderInfo {
        (self.describe)()
    }
}

impl fmt::Debug for LinkedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LinkedProvider").field(&self.info()).finish()
    }
}

inventory::collect!(LinkedProvider);

/// The provider keys a catalog is checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownProviders {
    by_key: BTreeMap<String, ProviderInfoOwned>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ProviderInfoOwned {
    crate_name: String,
    requires_credential: bool,
}

impl KnownProviders {
    /// No keys at all.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every provider linked into this binary, as each registered itself.
    pub fn linked() -> Self {
        inventory::iter::<LinkedProvider>
            .into_iter()
            .map(LinkedProvider::info)
            .fold(Self::empty(), |known, info| {
                known.with(info.key, info.crate_name, info.requires_credential)
            })
    }

    /// Adds (or replaces) a key.
    pub fn with(
        mut self,
        key: impl Into<String>,
        crate_name: impl Into<String>,
        requires_credential: bool,
    ) -> Self {
        self.by_key.insert(
            key.into(),
            ProviderInfoOwned {
                crate_name: crate_name.into(),
                requires_credential,
            },
        );
        self
    }

    /// Whether `key` is known.
    pub fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// Whether models of `key` must name a credential (`None` for an unknown key).
    pub fn requires_credential(&self, key: &str) -> Option<bool> {
        self.by_key.get(key).map(|i| i.requires_credential)
    }

    /// The crate that registers `key`, if known.
    pub fn crate_name(&self, key: &str) -> Option<&str> {
        self.by_key.get(key).map(|i| i.crate_name.as_str())
    }

    /// Every known key with its crate, e.g. `fake (tollgate-fake), sim (tollgate-sim)`;
    /// `(none)` when no provider is known.
    pub fn list(&self) -> String {
        if self.by_key.is_empty() {
            return "(none)".into();
        }
        self.by_key
            .iter()
            .map(|(key, info)| format!("{key} ({})", info.crate_name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What to add for an unknown `key`: its crate, linked with one line. First-party
    /// crates are named `tollgate-<name>` after their provider, so the key's first word
    /// gives the likely crate; `docs/catalog.md` lists which crate registers which key.
    pub fn hint_for(key: &str) -> String {
        let name = key.split('-').next().unwrap_or(key);
        format!(
            "add the crate that registers `{key}` to [dependencies] and link it with \
             `use <crate> as _;` (first-party crates are named `tollgate-<name>`, here \
             likely `tollgate-{name}` with `use tollgate_{name} as _;`; docs/catalog.md lists \
             which crate registers which key), or pass the provider to \
             `ModelsBuilder::provider` and its key in `KnownProviders`"
        )
    }
}
