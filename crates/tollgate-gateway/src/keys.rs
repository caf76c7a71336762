//! Virtual keys (`keys.toml`): who may call the gateway, which models, at which
//! priority, and how long their requests may queue.
//!
//! A key's secret is never stored: the file holds its SHA-256 (hex). A presented secret
//! is hashed and its key found by that hash in one lookup (100,000 keys cost what one
//! does), the match compared in constant time: the hash of a guess reveals nothing of a
//! stored secret, so neither a wrong key nor a timing difference helps an attacker.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tollgate::catalog::Limits;
use tollgate::limit::Priority;

mod check;

/// Why a keys file could not be loaded, or its keys not used over a catalog. Every
/// variant about one key names it (never its secret or hash).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeysError {
    /// The file could not be read.
    #[error("cannot read keys file `{path}`: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML of the expected shape.
    #[error("keys file is not valid: {0}")]
    Parse(#[from] toml::de::Error),
    /// A key is malformed (its id names it; never its secret). A key without an id is
    /// named by its place in the file, `#1` for the first.
    #[error("key `{id}`: {reason}")]
    Invalid {
        /// The key's id.
        id: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// Two keys have the same secret (the same `secret_sha256`, in any case): a caller
    /// presenting it could not be told apart.
    #[error(
        "key `{id}`: its `secret_sha256` is the same as key `{other}`'s; give each key \
         its own secret"
    )]
    DuplicateSecret {
        /// The later key.
        id: String,
        /// The earlier key with the same secret.
        other: String,
    },
    /// A key's `models` names a model the catalog does not have.
    #[error(
        "key `{id}`: model `{model}` in its `models` is not in the catalog; remove it or \
         add it to the catalog"
    )]
    UnknownModel {
        /// The key's id.
        id: String,
        /// The model it names.
        model: String,
    },
    /// A key has a daily budget, and a model it may call (or that model's fallback) has
    /// no price: its calls would cost nothing against the budget, which would not hold.
    #[error(
        "key `{id}`: it has `budget_usd_per_day`, but model `{model}`, which it may call, \
         has no `price` in the catalog, so the budget could not count its calls; give the \
         model a `[models.{model}.price]`, or list only priced models in the key's \
         `models`, or drop its budget"
    )]
    UnpricedBudget {
        /// The key's id.
        id: String,
        /// The model without a price.
        model: String,
    },
    /// A key's own `rpm`/`tpm` buckets could not be built by the gateway's limiter
    /// factory.
    #[error("key `{id}`: its rpm/tpm buckets cannot be built: {source}")]
    Limiter {
        /// The key's id.
        id: String,
        /// What the factory said.
        #[source]
        source: Box<tollgate::Error>,
    },
}

/// One virtual key: an id (recorded with every call as job `key:<id>`), what it may use,
/// its priority class, its queue bound, and its own rate caps and daily budget.
#[derive(Clone, PartialEq)]
pub struct VirtualKey {
    id: String,
    hash: [u8; 32],
    models: Option<Vec<String>>,
    priority: Priority,
    max_wait: Option<Duration>,
    caps: Limits,
    budget_usd_per_day: Option<f64>,
    admin: bool,
}

impl fmt::Debug for VirtualKey {
    // The hash stays out of logs too: it is what a stolen log would be matched against.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtualKey")
            .field("id", &self.id)
            .field("models", &self.models)
            .field("priority", &self.priority)
            .field("max_wait", &self.max_wait)
            .field("caps", &self.caps)
            .field("budget_usd_per_day", &self.budget_usd_per_day)
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

impl VirtualKey {
    /// A key `id` whose secret hashes (SHA-256) to `hash`, allowed every model, at
    /// [`Priority::Default`], unbounded wait.
    pub fn new(id: impl Into<String>, hash: [u8; 32]) -> Self {
        VirtualKey {
            id: id.into(),
            hash,
            models: None,
            priority: Priority::Default,
            max_wait: None,
            caps: Limits::default(),
            budget_usd_per_day: None,
            admin: false,
        }
    }

    /// An admin key: besides what its other fields allow, it may read every key's usage
    /// (`GET /v1/tollgate/keys`). Keys are not admin keys unless the file says so.
    pub fn with_admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Whether the key is an admin key.
    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// The catalog models the key may call by name, or `None` for every one.
    pub fn models(&self) -> Option<&[String]> {
        self.models.as_deref()
    }

    /// Caps the key's own rate across every model it calls: `rpm` requests and `tpm`
    /// tokens a minute (0 = no cap on that dimension). They are buckets like a model's,
    /// reserved before the model's and shared on Redis with `--redis`.
    pub fn with_caps(mut self, rpm: u64, tpm: u64) -> Self {
        self.caps = Limits {
            rpm,
            tpm,
            ..Limits::default()
        };
        self
    }

    /// Caps what the key's calls may cost per UTC day, in USD (from the catalog's
    /// prices; each call holds its worst case before it is sent).
    pub fn with_budget_usd_per_day(mut self, usd: f64) -> Self {
        self.budget_usd_per_day = Some(usd);
        self
    }

    /// The key's own per-minute caps (0 on a dimension: none).
    pub fn caps(&self) -> Limits {
        self.caps
    }

    /// The key's spend budget per UTC day in USD, if any.
    pub fn budget_usd_per_day(&self) -> Option<f64> {
        self.budget_usd_per_day
    }

    /// Only these catalog models.
    pub fn with_models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.models = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// The priority class of every call made with the key.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// How long a request may queue before it is answered 429 instead.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key's priority class.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The key's queue bound, if any.
    pub fn max_wait(&self) -> Option<Duration> {
        self.max_wait
    }

    /// Whether the key may call catalog model `model_id` (a catalog id, as its
    /// `models` lists it).
    pub fn allows(&self, model_id: &str) -> bool {
        self.models
            .as_ref()
            .is_none_or(|m| m.iter().any(|id| id == model_id))
    }

    /// Whether the key may call catalog model `model_id` of `catalog`: its `models` list
    /// the id, or a name (alias, or one a pattern covers) that `catalog` resolves to it.
    pub fn allows_in(&self, catalog: &tollgate::Catalog, model_id: &str) -> bool {
        self.models.as_ref().is_none_or(|m| {
            m.iter().any(|name| {
                name == model_id || catalog.model(name).is_some_and(|e| e.id == model_id)
            })
        })
    }
}

/// The SHA-256 of `secret`, as stored in `keys.toml` (lowercase hex).
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Every virtual key the gateway accepts.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    keys: Vec<VirtualKey>,
    /// Each key's place in `keys`, by the SHA-256 of its secret: one lookup finds the key
    /// of a presented secret, however many keys there are.
    by_hash: HashMap<[u8; 32], usize>,
    /// Each key's place in `keys`, by its id.
    by_id: HashMap<String, usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    // Each key is read on its own (`KeyLine::read`), so an error in it names the key.
    #[serde(default)]
    keys: Vec<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyLine {
    id: String,
    secret_sha256: String,
    #[serde(default)]
    models: Option<Vec<String>>,
    #[serde(default)]
    priority: Option<String>,
    #[serde(default)]
    max_wait_ms: Option<u64>,
    #[serde(default)]
    rpm: Option<u64>,
    #[serde(default)]
    tpm: Option<u64>,
    #[serde(default)]
    budget_usd_per_day: Option<f64>,
    #[serde(default)]
    admin: bool,
}

impl Keys {
    /// The keys `keys`: their ids must be distinct, and so must their secrets.
    pub fn new(keys: Vec<VirtualKey>) -> Result<Self, KeysError> {
        let mut by_id = HashMap::with_capacity(keys.len());
        let mut by_hash = HashMap::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            if by_id.insert(key.id.clone(), i).is_some() {
                return Err(invalid(&key.id, "is defined twice"));
            }
            if let Some(&other) = by_hash.get(&key.hash) {
                let other: &VirtualKey = &keys[other];
                return Err(KeysError::DuplicateSecret {
                    id: key.id.clone(),
                    other: other.id.clone(),
                });
            }
            by_hash.insert(key.hash, i);
        }
        Ok(Keys {
            keys,
            by_hash,
            by_id,
        })
    }

    /// Reads a keys file (see the module docs and `docs/gateway.md`).
    pub fn from_toml_file(path: &Path) -> Result<Self, KeysError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeysError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml_str(&text)
    }

    /// Parses a keys file's text:
    ///
    /// ```toml
    /// [[keys]]
    /// id = "notebooks"
    /// secret_sha256 = "…64 hex digits…"   # `printf %s SECRET | sha256sum`
    /// models = ["demo"]                    # omitted: every catalog model
    /// priority = "interactive"             # interactive | default | batch
    /// max_wait_ms = 5000                   # omitted: wait as long as it takes
    /// rpm = 100                            # the key's own caps across its models
    /// tpm = 200000                         #   (omitted: none beyond the models')
    /// budget_usd_per_day = 25.0            # omitted: no budget
    /// admin = false                        # true: may read every key's usage
    /// ```
    ///
    /// A field the format does not know, a malformed value, two keys with one id or one
    /// secret: each is an error naming the key. The models are checked against the
    /// catalog when the gateway takes the keys ([`Keys::check_against`]).
    pub fn from_toml_str(text: &str) -> Result<Self, KeysError> {
        let file: KeysFile = toml::from_str(text)?;
        let keys = file
            .keys
            .into_iter()
            .enumerate()
            .map(|(i, table)| KeyLine::read(i, table)?.into_key(i))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(keys)
    }

    /// The key whose secret is `secret`, if any: one lookup by the secret's SHA-256,
    /// whatever the number of keys. What the lookup's time could tell (how the presented
    /// secret's hash falls in a table keyed at random per process) says nothing of a
    /// stored secret, which SHA-256 does not give back; the match itself is compared in
    /// constant time.
    pub fn authenticate(&self, secret: &str) -> Option<&VirtualKey> {
        self.authenticate_at(secret).map(|at| &self.keys[at])
    }

    /// [`Keys::authenticate`], answering the key's place in file order.
    pub(crate) fn authenticate_at(&self, secret: &str) -> Option<usize> {
        let presented: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let at = *self.by_hash.get(&presented)?;
        bool::from(self.keys[at].hash.ct_eq(&presented)).then_some(at)
    }

    /// The key at place `at` in file order.
    pub(crate) fn at(&self, at: usize) -> Option<&VirtualKey> {
        self.keys.get(at)
    }

    /// The key whose id is `id`, if any.
    pub fn get(&self, id: &str) -> Option<&VirtualKey> {
        self.by_id.get(id).map(|&i| &self.keys[i])
    }

    /// The place in file order (from 0) of the key whose id is `id`, if any.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// Every key, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &VirtualKey> {
        self.keys.iter()
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

impl KeyLine {
    /// The `i`th key of the file (from 0), its errors naming it by its id, else by its
    /// place (`#1` for the first).
    fn read(i: usize, table: toml::Table) -> Result<KeyLine, KeysError> {
        let name = match table.get("id").and_then(toml::Value::as_str) {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => place(i),
        };
        KeyLine::deserialize(toml::Value::Table(table)).map_err(|e| {
            let reason = e.message().trim_end().to_owned();
            KeysError::Invalid { id: name, reason }
        })
    }

    fn into_key(self, i: usize) -> Result<VirtualKey, KeysError> {
        if self.id.is_empty() {
            return Err(invalid(&place(i), "`id` must not be empty"));
        }
        let mut hash = [0u8; 32];
        hex::decode_to_slice(self.secret_sha256.trim(), &mut hash).map_err(|_| {
            invalid(
                &self.id,
                "`secret_sha256` must be 64 hex digits (the SHA-256 of the secret)",
            )
        })?;
        let priority = match self.priority.as_deref() {
            None | Some("default") => Priority::Default,
            Some("interactive") => Priority::Interactive,
            Some("batch") => Priority::Batch,
            Some(other) => {
                return Err(invalid(
                    &self.id,
                    &format!("`priority` is `{other}`; use interactive, default or batch"),
                ));
            }
        };
        let mut key = VirtualKey::new(self.id, hash).with_priority(priority);
        if let Some(models) = self.models {
            key = key.with_models(models);
        }
        if let Some(ms) = self.max_wait_ms {
            key = key.with_max_wait(Duration::from_millis(ms));
        }
        if self.rpm.is_some() || self.tpm.is_some() {
            key = key.with_caps(self.rpm.unwrap_or(0), self.tpm.unwrap_or(0));
        }
        if let Some(usd) = self.budget_usd_per_day {
            if !usd.is_finite() || usd < 0.0 {
                return Err(invalid(
                    &key.id,
                    &format!("`budget_usd_per_day` is {usd}; give a number of USD, 0 or more"),
                ));
            }
            key = key.with_budget_usd_per_day(usd);
        }
        if self.admin {
            key = key.with_admin();
        }
        Ok(key)
    }
}

/// How a key without an id is named: its place in the file, from `#1`.
fn place(i: usize) -> String {
    format!("#{}", i + 1)
}

fn invalid(id: &str, reason: &str) -> KeysError {
    KeysError::Invalid {
        id: id.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests;
