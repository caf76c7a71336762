//! Virtual keys (`keys.toml`): who may call the gateway, which models, at which
//! priority, and how long their requests may queue.
//!
//! A key's secret is never stored: the file holds its SHA-256 (hex). A presented secret
//! is hashed and its key found by that hash in one lookup (100,000 keys cost what one
//! does), the match compared in constant time: the hash of a guess reveals nothing of a
//! stored secret, so neither a wrong key nor a timing difference helps an attacker.

use std::collections::{HashMap, HashSet};
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
        }
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
}

impl Keys {
    /// The keys `keys`: their ids must be distinct, and so must their secrets.
    pub fn new(keys: Vec<VirtualKey>) -> Result<Self, KeysError> {
        let mut ids = HashSet::with_capacity(keys.len());
        let mut by_hash = HashMap::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            if !ids.insert(key.id.as_str()) {
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
        Ok(Keys { keys, by_hash })
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
        let presented: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        let key = &self.keys[*self.by_hash.get(&presented)?];
        bool::from(key.hash.ct_eq(&presented)).then_some(key)
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
mod tests {
    use super::*;

    #[test]
    fn authenticate_finds_each_of_many_keys_by_its_secret_and_no_key_for_a_guess() {
        let hash = |secret: &str| -> [u8; 32] { Sha256::digest(secret.as_bytes()).into() };
        let keys = Keys::new(
            (0..5000)
                .map(|i| VirtualKey::new(format!("k{i}"), hash(&format!("secret-{i}"))))
                .collect(),
        )
        .unwrap();
        for i in [0, 1, 2500, 4999] {
            let found = keys
                .authenticate(&format!("secret-{i}"))
                .map(VirtualKey::id);
            assert_eq!(found, Some(format!("k{i}").as_str()));
        }
        assert!(keys.authenticate("secret-5000").is_none());
        assert!(keys.authenticate("").is_none());
        let twice = Keys::new(vec![
            VirtualKey::new("a", hash("s")),
            VirtualKey::new("b", hash("t")),
            VirtualKey::new("c", hash("s")),
        ]);
        assert!(
            matches!(twice, Err(KeysError::DuplicateSecret { ref id, ref other }) if id == "c" && other == "a"),
            "{twice:?}"
        );
    }

    fn file(secret: &str) -> String {
        format!(
            "[[keys]]\nid = \"nb\"\nsecret_sha256 = \"{}\"\nmodels = [\"demo\"]\n\
             priority = \"interactive\"\nmax_wait_ms = 1500\n\n\
             [[keys]]\nid = \"batch\"\nsecret_sha256 = \"{}\"\npriority = \"batch\"\n",
            hash_secret(secret),
            hash_secret("other-secret")
        )
    }

    #[test]
    fn keys_file_authenticates_by_hash_and_reads_models_priority_and_max_wait() {
        let keys = Keys::from_toml_str(&file("s3cret")).unwrap();
        let key = keys.authenticate("s3cret").unwrap();
        assert_eq!(key.id(), "nb");
        assert_eq!(key.priority(), Priority::Interactive);
        assert_eq!(key.max_wait(), Some(Duration::from_millis(1500)));
        assert!(key.allows("demo") && !key.allows("demo-slow"));
        let batch = keys.authenticate("other-secret").unwrap();
        assert_eq!((batch.id(), batch.priority()), ("batch", Priority::Batch));
        assert!(batch.allows("anything"));
        assert!(keys.authenticate("s3cre").is_none());
        assert!(keys.authenticate("").is_none());
    }

    #[test]
    fn keys_file_refuses_bad_hashes_priorities_and_repeated_ids_naming_the_key() {
        let bad_hash = "[[keys]]\nid = \"a\"\nsecret_sha256 = \"abc\"\n";
        let e = Keys::from_toml_str(bad_hash).unwrap_err();
        assert!(
            matches!(e, KeysError::Invalid { ref id, .. } if id == "a"),
            "{e}"
        );
        let h = hash_secret("x");
        let bad_priority =
            format!("[[keys]]\nid = \"b\"\nsecret_sha256 = \"{h}\"\npriority = \"urgent\"\n");
        let e = Keys::from_toml_str(&bad_priority).unwrap_err();
        assert!(
            matches!(e, KeysError::Invalid { ref id, .. } if id == "b"),
            "{e}"
        );
        let twice = format!(
            "[[keys]]\nid = \"c\"\nsecret_sha256 = \"{h}\"\n[[keys]]\nid = \"c\"\nsecret_sha256 = \"{h}\"\n"
        );
        assert!(matches!(
            Keys::from_toml_str(&twice),
            Err(KeysError::Invalid { .. })
        ));
    }

    #[test]
    fn keys_file_reads_rate_caps_and_daily_budget_and_refuses_a_negative_budget() {
        let h = hash_secret("x");
        let text = format!(
            "[[keys]]\nid = \"a\"\nsecret_sha256 = \"{h}\"\nrpm = 30\nbudget_usd_per_day = 2.5\n\
             [[keys]]\nid = \"b\"\nsecret_sha256 = \"{}\"\ntpm = 1000\n",
            hash_secret("y")
        );
        let keys = Keys::from_toml_str(&text).unwrap();
        let a = keys.authenticate("x").unwrap();
        assert_eq!((a.caps().rpm, a.caps().tpm), (30, 0));
        assert_eq!(a.budget_usd_per_day(), Some(2.5));
        let b = keys.authenticate("y").unwrap();
        assert_eq!(
            (b.caps().rpm, b.caps().tpm, b.budget_usd_per_day()),
            (0, 1000, None)
        );
        let negative =
            format!("[[keys]]\nid = \"n\"\nsecret_sha256 = \"{h}\"\nbudget_usd_per_day = -1\n");
        let e = Keys::from_toml_str(&negative).unwrap_err();
        assert!(
            matches!(e, KeysError::Invalid { ref id, ref reason } if id == "n" && reason.contains("budget_usd_per_day")),
            "{e}"
        );
    }

    #[test]
    fn keys_file_refuses_two_keys_with_one_secret_in_any_case_naming_both() {
        let h = hash_secret("shared");
        let text = format!(
            "[[keys]]\nid = \"first\"\nsecret_sha256 = \"{h}\"\n\
             [[keys]]\nid = \"second\"\nsecret_sha256 = \"{}\"\n",
            h.to_uppercase()
        );
        let e = Keys::from_toml_str(&text).unwrap_err();
        assert!(
            matches!(&e, KeysError::DuplicateSecret { id, other } if id == "second" && other == "first"),
            "{e}"
        );
        // Neither the hash nor the secret is shown.
        let shown = format!("{e} {e:?}");
        assert!(
            !shown.contains(&h) && !shown.contains(&h.to_uppercase()),
            "{shown}"
        );
        // Built in code, too.
        let e = Keys::new(vec![
            VirtualKey::new("a", [3; 32]),
            VirtualKey::new("b", [3; 32]),
        ])
        .unwrap_err();
        assert!(matches!(e, KeysError::DuplicateSecret { .. }), "{e}");
    }

    #[test]
    fn keys_file_refuses_an_unknown_field_naming_the_key_and_the_field() {
        let h = hash_secret("x");
        let text = format!(
            "[[keys]]\nid = \"fine\"\nsecret_sha256 = \"{}\"\n\
             [[keys]]\nid = \"typo\"\nsecret_sha256 = \"{h}\"\nbudget_usd_per_dya = 5.0\n",
            hash_secret("y")
        );
        let e = Keys::from_toml_str(&text).unwrap_err();
        assert!(
            matches!(&e, KeysError::Invalid { id, reason } if id == "typo" && reason.contains("budget_usd_per_dya")),
            "{e}"
        );
        assert!(e.to_string().starts_with("key `typo`:"), "{e}");
        // A key without an id is named by its place; a stray top-level field is refused.
        let e = Keys::from_toml_str(&format!(
            "[[keys]]\nid = \"a\"\nsecret_sha256 = \"{h}\"\n[[keys]]\nsecret_sha256 = \"{h}\"\n"
        ))
        .unwrap_err();
        assert!(
            matches!(&e, KeysError::Invalid { id, reason } if id == "#2" && reason.contains("id")),
            "{e}"
        );
        let e = Keys::from_toml_str("budget = 1\n").unwrap_err();
        assert!(matches!(e, KeysError::Parse(_)), "{e}");
    }

    #[test]
    fn virtual_key_debug_shows_neither_secret_nor_hash() {
        let key = VirtualKey::new("nb", [7u8; 32]);
        let shown = format!("{key:?}");
        assert!(shown.contains("nb"));
        assert!(!shown.contains(&hex::encode([7u8; 32])) && !shown.contains("[7, 7"));
    }
}
