//! The names a model answers to besides its id: its `aliases` (exact names) and its
//! `patterns` (globs with one `*`), and how a name a client sent resolves to a model.
//!
//! Clients send the names they were built with (Claude Code `claude-opus-5-5`, the
//! Agents SDK `gpt-5.6-luna`); a catalog maps them onto its own models without copying an
//! entry per name. A name resolves to the model whose id it is, else whose alias it is,
//! else whose pattern matches it with the most literal characters, so one model's
//! limits, prices and limiter apply whatever name was used.

use std::collections::BTreeMap;

use super::{CatalogError, ModelEntry};

/// How a name a client sent found its model ([`Catalog::resolve`](super::Catalog::resolve)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameMatch<'c> {
    /// The name is the model's id.
    Id,
    /// The name is one of the model's `aliases`.
    Alias,
    /// The name matches this one of the model's `patterns`.
    Pattern(&'c str),
}

/// A glob with exactly one `*`, which stands for any run of characters (none included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pattern {
    text: String,
    star: usize,
}

impl Pattern {
    /// Parses `text`, or says why it is not a pattern.
    pub(super) fn parse(text: &str) -> Result<Self, &'static str> {
        if text.trim() != text || text.is_empty() {
            return Err("must be a non-empty name without surrounding spaces");
        }
        let mut stars = text.match_indices('*');
        match (stars.next(), stars.next()) {
            (Some((star, _)), None) => Ok(Pattern {
                text: text.to_owned(),
                star,
            }),
            (None, _) => Err("must hold one `*` (an exact name belongs in `aliases`)"),
            (Some(_), Some(_)) => Err("must hold only one `*`"),
        }
    }

    /// The text before and after the `*`.
    fn parts(&self) -> (&str, &str) {
        (&self.text[..self.star], &self.text[self.star + 1..])
    }

    /// How many literal characters it has: the more, the more specific.
    fn literal_len(&self) -> usize {
        self.text.len() - 1
    }

    /// Whether `name` matches.
    fn matches(&self, name: &str) -> bool {
        let (prefix, suffix) = self.parts();
        name.len() >= prefix.len() + suffix.len()
            && name.starts_with(prefix)
            && name.ends_with(suffix)
    }
}

/// Every alias and pattern of a catalog, checked and indexed.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Names {
    /// Alias → model id.
    aliases: BTreeMap<String, String>,
    /// `(pattern, model id)`, most specific first: the most literal characters, then the
    /// longer prefix, then the text, so that a name's match never depends on the order
    /// of the file.
    patterns: Vec<(Pattern, String)>,
}

impl Names {
    /// Indexes the aliases and patterns of `models`, refusing an alias that is another
    /// name already (an id, or an alias of any model), a pattern without exactly one
    /// `*`, and a pattern two models (or one model twice) list.
    pub(super) fn index(models: &BTreeMap<String, ModelEntry>) -> Result<Self, CatalogError> {
        let mut names = Names::default();
        for entry in models.values() {
            for alias in &entry.aliases {
                let invalid = |reason: &str| CatalogError::InvalidField {
                    model_id: entry.id.clone(),
                    field: "aliases".into(),
                    reason: format!("`{alias}` {reason}"),
                };
                if alias.trim().is_empty() || alias.trim() != alias {
                    return Err(invalid(
                        "must be a non-empty name without surrounding spaces",
                    ));
                }
                if alias.contains('*') {
                    return Err(invalid("holds `*`: a glob belongs in `patterns`"));
                }
                let taken_by = if models.contains_key(alias) {
                    Some(format!("the id of model `{alias}`"))
                } else {
                    names
                        .aliases
                        .get(alias)
                        .map(|owner| format!("already an alias of model `{owner}`"))
                };
                if let Some(taken_by) = taken_by {
                    return Err(CatalogError::NameTaken {
                        model_id: entry.id.clone(),
                        field: "aliases",
                        name: alias.clone(),
                        taken_by,
                    });
                }
                names.aliases.insert(alias.clone(), entry.id.clone());
            }
            for text in &entry.patterns {
                let pattern =
                    Pattern::parse(text).map_err(|reason| CatalogError::InvalidField {
                        model_id: entry.id.clone(),
                        field: "patterns".into(),
                        reason: format!("`{text}` {reason}"),
                    })?;
                if let Some((_, owner)) = names.patterns.iter().find(|(p, _)| p == &pattern) {
                    return Err(CatalogError::DuplicatePattern {
                        model_id: entry.id.clone(),
                        pattern: text.clone(),
                        other_model: owner.clone(),
                    });
                }
                names.patterns.push((pattern, entry.id.clone()));
            }
        }
        names.patterns.sort_by(|(a, _), (b, _)| {
            b.literal_len()
                .cmp(&a.literal_len())
                .then(b.star.cmp(&a.star))
                .then(a.text.cmp(&b.text))
        });
        Ok(names)
    }

    /// The model id `name` resolves to (when it is not an id itself) and how.
    pub(super) fn resolve(&self, name: &str) -> Option<(&str, NameMatch<'_>)> {
        if let Some(id) = self.aliases.get(name) {
            return Some((id, NameMatch::Alias));
        }
        self.patterns
            .iter()
            .find(|(p, _)| p.matches(name))
            .map(|(p, id)| (id.as_str(), NameMatch::Pattern(&p.text)))
    }

    /// Every alias with its model id, by alias.
    pub(super) fn aliases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.aliases.iter().map(|(a, id)| (a.as_str(), id.as_str()))
    }

    /// Every pattern with its model id, most specific first.
    pub(super) fn patterns(&self) -> impl Iterator<Item = (&str, &str)> {
        self.patterns
            .iter()
            .map(|(p, id)| (p.text.as_str(), id.as_str()))
    }
}
