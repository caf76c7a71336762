//! Which provider keys a catalog may name, and whether each needs a credential.

use std::collections::BTreeMap;

/// What the catalog needs to know about a provider key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderInfo {
    /// The key models name in `provider = "…"`.
    pub key: &'static str,
    /// The crate that implements it (for "add this crate" messages).
    pub crate_name: &'static str,
    /// Whether models of this provider must name a `credential`.
    pub requires_credential: bool,
}

/// The first-party provider keys. Listing a key here lets a catalog name it before its
/// crate is linked; calling such a model then says which crate to add.
///
/// `openai-compatible` servers (vLLM, Ollama, llama.cpp) often need no key; Bedrock falls
/// back to the AWS default credential chain.
pub const FIRST_PARTY_PROVIDERS: &[ProviderInfo] = &[
    ProviderInfo {
        key: "fake",
        crate_name: "tollgate-fake",
        requires_credential: false,
    },
    ProviderInfo {
        key: "sim",
        crate_name: "tollgate-sim",
        requires_credential: false,
    },
    ProviderInfo {
        key: "anthropic-direct",
        crate_name: "tollgate-anthropic",
        requires_credential: true,
    },
    ProviderInfo {
        key: "openai",
        crate_name: "tollgate-openai",
        requires_credential: true,
    },
    ProviderInfo {
        key: "openai-compatible",
        crate_name: "tollgate-openai",
        requires_credential: false,
    },
    ProviderInfo {
        key: "bedrock-converse",
        crate_name: "tollgate-bedrock",
        requires_credential: false,
    },
    ProviderInfo {
        key: "anthropic-bedrock",
        crate_name: "tollgate-bedrock",
        requires_credential: false,
    },
    ProviderInfo {
        key: "gemini",
        crate_name: "tollgate-gemini",
        requires_credential: true,
    },
];

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

    /// The first-party keys plus every provider linked into this binary.
    pub fn linked() -> Self {
        let mut known = Self::empty();
        for info in FIRST_PARTY_PROVIDERS {
            known = known.with(info.key, info.crate_name, info.requires_credential);
        }
        for provider in crate::provider::linked_providers() {
            if !known.contains(provider.key()) {
                known = known.with(provider.key(), "(linked)", provider.requires_credential());
            }
        }
        known
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

    /// The crate that implements `key`, if known.
    pub fn crate_name(&self, key: &str) -> Option<&str> {
        self.by_key.get(key).map(|i| i.crate_name.as_str())
    }

    /// Every known key, comma-separated.
    pub fn list(&self) -> String {
        self.by_key.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}
