//! The [`Catalog`]: loaded from TOML or built in code, and validated either way.

use std::collections::BTreeMap;
use std::path::Path;

use super::names::{NameMatch, Names};
use super::{CatalogError, KnownProviders, ModelEntry, UnknownModel, parse};

/// A validated set of models, and the deployment's embedding width.
///
/// Loaded from TOML ([`Catalog::from_toml_str`], [`Catalog::from_toml_file`]) or built
/// with [`Catalog::builder`]; both check every field when loading, so a mistake fails
/// before any call is made, naming the model and the field.
///
/// ```
/// use tollgate::Catalog;
/// use tollgate_fake as _; // a catalog may name only the keys of linked providers
///
/// let catalog = Catalog::from_toml_str(r#"
///     [models.assistant]
///     provider = "fake"
///     max_output_tokens = 4096
///     default_output_tokens = 512
///     rpm = 60
///     input_tpm = 100000
///     [models.assistant.price]         # USD per million tokens
///     input = 3.0
///     output = 15.0
/// "#)?;
/// let entry = catalog.get("assistant")?;
/// assert_eq!((entry.limits.rpm, entry.max_output_tokens), (60, Some(4096)));
///
/// // A typo is rejected when the catalog loads, naming the field.
/// let typo = Catalog::from_toml_str("[models.m]\nprovider = \"fake\"\nmax_output_tokens = 1\ntmp = 5\n");
/// assert!(typo.unwrap_err().to_string().contains("tmp"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    models: BTreeMap<String, ModelEntry>,
    names: Names,
    embedding_width: Option<u64>,
}

impl Catalog {
    /// Parses and validates TOML, accepting the key of every provider linked into this
    /// binary ([`KnownProviders::linked`]).
    pub fn from_toml_str(text: &str) -> Result<Self, CatalogError> {
        Self::from_toml_str_with(text, &KnownProviders::linked())
    }

    /// Parses and validates TOML against an explicit set of provider keys.
    pub fn from_toml_str_with(text: &str, known: &KnownProviders) -> Result<Self, CatalogError> {
        let (models, width) = parse::parse_catalog(text)?;
        validate(models, width, known)
    }

    /// Reads, parses and validates a TOML file.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self, CatalogError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CatalogError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml_str(&text)
    }

    /// Starts a catalog built in code; [`CatalogBuilder::build`] runs the same checks.
    pub fn builder() -> CatalogBuilder {
        CatalogBuilder::default()
    }

    /// The entry the name `model_id` resolves to: the model with that id, else with that
    /// alias, else with the most specific pattern matching it (see [`Catalog::resolve`]).
    pub fn model(&self, model_id: &str) -> Option<&ModelEntry> {
        self.resolve(model_id).map(|(entry, _)| entry)
    }

    /// The entry the name `model_id` resolves to (as [`Catalog::model`]), or
    /// [`UnknownModel`] listing the known ids (which `?` turns into
    /// [`crate::Error::UnknownModel`]).
    pub fn get(&self, model_id: &str) -> Result<&ModelEntry, UnknownModel> {
        self.model(model_id).ok_or_else(|| UnknownModel {
            model_id: model_id.into(),
            known: self.models.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// The entry a name a client sent resolves to, and how: an exact id first, then an
    /// alias, then the pattern with the most literal characters (on a tie, the longer
    /// text before the `*`, then the pattern that sorts first).
    ///
    /// ```
    /// use tollgate::{Catalog, NameMatch};
    /// use tollgate_fake as _;
    ///
    /// let catalog = Catalog::from_toml_str(r#"
    ///     [models.opus]
    ///     provider = "fake"
    ///     max_output_tokens = 4096
    ///     aliases = ["claude-opus-5-5"]
    ///     patterns = ["claude-opus-*"]
    ///     [models.any-claude]
    ///     provider = "fake"
    ///     max_output_tokens = 4096
    ///     patterns = ["claude-*"]
    /// "#)?;
    /// let (entry, how) = catalog.resolve("claude-opus-5-5").unwrap();
    /// assert_eq!((entry.id.as_str(), how), ("opus", NameMatch::Alias));
    /// assert_eq!(catalog.get("claude-opus-9")?.id, "opus");          // the longer pattern
    /// assert_eq!(catalog.get("claude-haiku-4-5")?.id, "any-claude");
    /// assert!(catalog.get("gpt-5").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, name: &str) -> Option<(&ModelEntry, NameMatch<'_>)> {
        if let Some(entry) = self.models.get(name) {
            return Some((entry, NameMatch::Id));
        }
        let (id, how) = self.names.resolve(name)?;
        self.models.get(id).map(|entry| (entry, how))
    }

    /// Every alias with the entry it names, by alias.
    pub fn aliases(&self) -> impl Iterator<Item = (&str, &ModelEntry)> {
        self.names
            .aliases()
            .filter_map(|(alias, id)| Some((alias, self.models.get(id)?)))
    }

    /// Every pattern with the entry it leads to, in the order a name is tried on them
    /// (most specific first).
    pub fn patterns(&self) -> impl Iterator<Item = (&str, &ModelEntry)> {
        self.names
            .patterns()
            .filter_map(|(pattern, id)| Some((pattern, self.models.get(id)?)))
    }

    /// Every entry, by id.
    pub fn models(&self) -> impl Iterator<Item = &ModelEntry> {
        self.models.values()
    }

    /// The width every embedding has in this deployment (`[embeddings] width`).
    pub fn embedding_width(&self) -> Option<u64> {
        self.embedding_width
    }
}

/// Builds a [`Catalog`] in code.
#[derive(Debug, Default)]
pub struct CatalogBuilder {
    models: Vec<ModelEntry>,
    embedding_width: Option<u64>,
    known: Option<KnownProviders>,
}

impl CatalogBuilder {
    /// Adds a model.
    pub fn model(mut self, entry: ModelEntry) -> Self {
        self.models.push(entry);
        self
    }

    /// Sets the deployment's embedding width.
    pub fn embedding_width(mut self, width: u64) -> Self {
        self.embedding_width = Some(width);
        self
    }

    /// Validates against these provider keys instead of the linked ones.
    pub fn known_providers(mut self, known: KnownProviders) -> Self {
        self.known = Some(known);
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Catalog, CatalogError> {
        let known = self.known.unwrap_or_else(KnownProviders::linked);
        validate(self.models, self.embedding_width, &known)
    }
}

fn validate(
    entries: Vec<ModelEntry>,
    embedding_width: Option<u64>,
    known: &KnownProviders,
) -> Result<Catalog, CatalogError> {
    if embedding_width == Some(0) {
        return Err(CatalogError::InvalidSection {
            field: "embeddings.width".into(),
            reason: "must be at least 1".into(),
        });
    }
    let mut models = BTreeMap::new();
    for entry in entries {
        if models.contains_key(&entry.id) {
            return Err(CatalogError::DuplicateModel { model_id: entry.id });
        }
        models.insert(entry.id.clone(), entry);
    }
    for entry in models.values() {
        entry.validate_alone(known, embedding_width)?;
        for fallback in &entry.fallbacks {
            if fallback == &entry.id {
                return Err(CatalogError::SelfFallback {
                    model_id: entry.id.clone(),
                });
            }
            if !models.contains_key(fallback) {
                return Err(CatalogError::UnknownFallback {
                    model_id: entry.id.clone(),
                    fallback: fallback.clone(),
                });
            }
        }
    }
    let names = Names::index(&models)?;
    Ok(Catalog {
        models,
        names,
        embedding_width,
    })
}
