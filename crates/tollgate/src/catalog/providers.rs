//! Which provider keys a catalog may name: those linked into the binary, each with the
//! crate that registers it and whether its models need a credential.
//!
//! What is linked is no hard-coded table. Every provider crate's `register_provider!`
//! submits a [`LinkedProvider`] next to its plug-in, carrying the crate's own name, so
//! the catalog learns what is linked from the providers themselves and never asks the
//! provider registry (which depends on the catalog, not the other way round).
//!
//! The one table, [`FIRST_PARTY`], is for keys that are *not* linked: an unknown key is
//! registered by nothing in this binary, so the hint naming its crate cannot come from a
//! registration. A test that links every first-party crate (`tollgate-testkit`'s
//! `tests/first_party_keys.rs`) checks the table against their registrations.

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

/// Every first-party provider key and the crate that registers it, sorted by key: what
/// the hint for an unknown key names. Kept equal to the first-party crates' own
/// registrations by a test that links them all.
pub const FIRST_PARTY: &[(&str, &str)] = &[
    ("anthropic-bedrock", "tollgate-bedrock"),
    ("anthropic-direct", "tollgate-anthropic"),
    ("anthropic-vertex", "tollgate-gemini"),
    ("azure-openai", "tollgate-azure"),
    ("bedrock-converse", "tollgate-bedrock"),
    ("cohere", "tollgate-cohere"),
    ("deepseek", "tollgate-deepseek"),
    ("fake", "tollgate-fake"),
    ("gemini", "tollgate-gemini"),
    ("groq", "tollgate-groq"),
    ("mistral", "tollgate-mistral"),
    ("openai", "tollgate-openai"),
    ("openai-compatible", "tollgate-openai"),
    ("perplexity", "tollgate-perplexity"),
    ("sim", "tollgate-sim"),
    ("together", "tollgate-together"),
    ("vertex", "tollgate-gemini"),
    ("xai", "tollgate-xai"),
];

/// The first-party crate that registers `key`, if any ([`FIRST_PARTY`]).
pub fn first_party_crate(key: &str) -> Option<&'static str> {
    FIRST_PARTY
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, crate_name)| *crate_name)
}

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

    /// What to add for an unknown `key`: the first-party crate that registers it
    /// ([`FIRST_PARTY`]), linked with one line; for any other key, the crate that
    /// registers it, or the provider given to `ModelsBuilder::provider`.
    pub fn hint_for(key: &str) -> String {
        match first_party_crate(key) {
            Some(crate_name) => format!(
                "`{key}` is registered by the crate `{crate_name}`: add it to [dependencies] \
                 and link it with `use {} as _;`",
                crate_name.replace('-', "_")
            ),
            None => format!(
                "no first-party crate registers `{key}` (docs/catalog.md lists their keys): \
                 add the crate that registers it to [dependencies] and link it with \
                 `use <crate> as _;`, or pass the provider to `ModelsBuilder::provider` and \
                 its key in `KnownProviders`"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_party_table_is_sorted_with_each_key_once() {
        let keys: Vec<&str> = FIRST_PARTY.iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn every_first_party_keys_hint_names_its_crate_and_link_line() {
        for (key, crate_name) in FIRST_PARTY {
            let hint = KnownProviders::hint_for(key);
            let link = format!("use {} as _;", crate_name.replace('-', "_"));
            assert!(hint.contains(&format!("`{crate_name}`")), "{key}: {hint}");
            assert!(hint.contains(&link), "{key}: {hint}");
        }
    }

    #[test]
    fn the_hint_names_the_crate_not_the_keys_first_word() {
        let hint = KnownProviders::hint_for("anthropic-bedrock");
        assert!(hint.contains("`tollgate-bedrock`"), "{hint}");
        assert!(!hint.contains("tollgate-anthropic"), "{hint}");
        let hint = KnownProviders::hint_for("vertex");
        assert!(hint.contains("`tollgate-gemini`"), "{hint}");
        assert!(!hint.contains("tollgate-vertex"), "{hint}");
    }

    #[test]
    fn an_unknown_third_party_key_names_no_guessed_crate() {
        let hint = KnownProviders::hint_for("acme-llm");
        assert!(
            hint.contains("no first-party crate registers `acme-llm`"),
            "{hint}"
        );
        assert!(!hint.contains("tollgate-acme"), "{hint}");
        assert!(hint.contains("ModelsBuilder::provider"), "{hint}");
    }
}
