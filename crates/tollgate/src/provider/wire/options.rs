//! A model's `[models.ID.options]`, read with one set of checks and one error wording.

use crate::catalog::{CatalogError, ModelEntry};
use crate::error::{Error, Result};

/// Reads one model's catalog `options`, each method one kind of value. Every value of
/// the wrong kind is [`CatalogError::InvalidField`] naming `options.NAME`.
///
/// ```
/// # use tollgate::{ModelEntry, Result};
/// use tollgate::wire::ModelOptions;
///
/// # fn main() -> Result<()> {
/// let mut model = ModelEntry::new("local", "ollama", "llama3.2");
/// model.options.insert("base_url".into(), "http://127.0.0.1:11434/".into());
/// let options = ModelOptions::new(&model, &["base_url", "keep_alive"])?;
/// assert_eq!(options.url("base_url")?.as_deref(), Some("http://127.0.0.1:11434"));
/// assert_eq!(options.flag("keep_alive")?, None);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions<'m> {
    model: &'m ModelEntry,
}

impl<'m> ModelOptions<'m> {
    /// Checks that every key of `model.options` is one of `known`.
    pub fn new(model: &'m ModelEntry, known: &[&str]) -> Result<Self> {
        let options = ModelOptions { model };
        if let Some(unknown) = model.options.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(options.error(
                unknown,
                format!(
                    "is not a `{}` option; known: {}",
                    model.provider,
                    known.join(", ")
                ),
            ));
        }
        Ok(options)
    }

    /// Reads `model.options` without checking their keys: for reading a few options out
    /// of an entry that may hold another provider's too (`tollgate-sim` sizes a
    /// simulation from any model's entry). A provider reading its own models' options
    /// uses [`ModelOptions::new`].
    pub fn unchecked(model: &'m ModelEntry) -> Self {
        ModelOptions { model }
    }

    /// The model these options belong to.
    pub fn model(&self) -> &'m ModelEntry {
        self.model
    }

    /// The error for option `name`: `reason` says what is accepted.
    pub fn error(&self, name: &str, reason: impl Into<String>) -> Error {
        Error::Catalog(CatalogError::InvalidField {
            model_id: self.model.id.clone(),
            field: format!("options.{name}"),
            reason: reason.into(),
        })
    }

    /// Whether option `name` is set.
    pub fn has(&self, name: &str) -> bool {
        self.model.options.contains_key(name)
    }

    /// A string option that `parse` accepts; `expected` says what it accepts.
    pub fn parse<T>(
        &self,
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.model.options.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .and_then(parse)
                .map(Some)
                .ok_or_else(|| self.error(name, format!("must be {expected}"))),
        }
    }

    /// An `http://` or `https://` address, without a trailing `/`.
    pub fn url(&self, name: &str) -> Result<Option<String>> {
        self.parse(name, "an http:// or https:// address", |u| {
            (u.starts_with("http://") || u.starts_with("https://"))
                .then(|| u.trim_end_matches('/').to_owned())
        })
    }

    /// A string that `valid` accepts.
    pub fn text(
        &self,
        name: &str,
        expected: &str,
        valid: fn(&str) -> bool,
    ) -> Result<Option<String>> {
        self.parse(name, expected, |s| valid(s).then(|| s.to_owned()))
    }

    /// A list of strings, each of which `valid` accepts.
    pub fn list(
        &self,
        name: &str,
        expected: &str,
        valid: fn(&str) -> bool,
    ) -> Result<Option<Vec<String>>> {
        match self.model.options.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .and_then(|items| {
                    items
                        .iter()
                        .map(|i| i.as_str().filter(|s| valid(s)).map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .map(Some)
                .ok_or_else(|| self.error(name, format!("must be {expected}"))),
        }
    }

    /// A whole number, `min` or more.
    pub fn whole(&self, name: &str, min: u64) -> Result<Option<u64>> {
        match self.model.options.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_integer()
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| *n >= min)
                .map(Some)
                .ok_or_else(|| self.error(name, format!("must be a whole number, {min} or more"))),
        }
    }

    /// A [`ToolChoice`] (default [`ToolChoice::Auto`]); `required` is the provider's word
    /// for "some tool".
    pub fn tool_choice(&self, name: &str, required: &str) -> Result<ToolChoice> {
        Ok(self
            .parse(
                name,
                &format!("`auto`, `{required}`, `none` or `tool:NAME`"),
                |v| ToolChoice::parse(v, required),
            )?
            .unwrap_or_default())
    }

    /// A number, whole or not, `0` or more.
    pub fn number(&self, name: &str) -> Result<Option<f64>> {
        match self.model.options.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_float()
                .or_else(|| v.as_integer().map(|n| n as f64))
                .filter(|n| *n >= 0.0)
                .map(Some)
                .ok_or_else(|| self.error(name, "must be a non-negative number")),
        }
    }

    /// Option `name` as the catalog holds it, for a kind of value no other method reads
    /// (a table); its checks are the caller's, reported with [`ModelOptions::error`].
    pub fn value(&self, name: &str) -> Option<&'m toml::Value> {
        self.model.options.get(name)
    }

    /// `true` or `false`.
    pub fn flag(&self, name: &str) -> Result<Option<bool>> {
        match self.model.options.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.error(name, "must be true or false")),
        }
    }
}

pub use crate::settings::ToolChoice;

#[cfg(test)]
mod tests {
    use super::*;

    fn model(options: &str) -> ModelEntry {
        let mut model = ModelEntry::new("m", "p", "n");
        model.options = toml::from_str(options).unwrap();
        model
    }

    #[test]
    fn an_unknown_option_names_the_known_ones() {
        let model = model("colour = 1");
        let error = ModelOptions::new(&model, &["base_url"]).unwrap_err();
        assert_eq!(
            error.to_string(),
            Error::Catalog(CatalogError::InvalidField {
                model_id: "m".into(),
                field: "options.colour".into(),
                reason: "is not a `p` option; known: base_url".into(),
            })
            .to_string()
        );
    }

    #[test]
    fn values_of_the_wrong_kind_fail() {
        let model = model("u = \"ftp://x\"\nw = 0\nf = 1\nl = [1]");
        let o = ModelOptions::new(&model, &["u", "w", "f", "l"]).unwrap();
        assert!(o.url("u").is_err());
        assert!(o.whole("w", 1).is_err());
        assert!(o.flag("f").is_err());
        assert!(o.list("l", "names", |_| true).is_err());
        assert_eq!(o.url("absent").unwrap(), None);
    }

    #[test]
    fn a_number_is_whole_or_not_and_never_negative() {
        let model = model("a = 3\nb = 2.5\nc = -1\nd = \"4\"");
        let o = ModelOptions::new(&model, &["a", "b", "c", "d"]).unwrap();
        assert_eq!(o.number("a").unwrap(), Some(3.0));
        assert_eq!(o.number("b").unwrap(), Some(2.5));
        assert!(o.number("c").is_err());
        assert!(o.number("d").is_err());
        assert_eq!(o.number("absent").unwrap(), None);
    }

    #[test]
    fn unchecked_options_accept_any_key_and_still_check_kinds() {
        let model = model("colour = 1\nseed = \"x\"");
        let o = ModelOptions::unchecked(&model);
        assert_eq!(o.whole("colour", 0).unwrap(), Some(1));
        assert!(o.number("seed").is_err());
    }

    #[test]
    fn tool_choice_spellings() {
        assert_eq!(ToolChoice::parse("any", "any"), Some(ToolChoice::Required));
        assert_eq!(ToolChoice::parse("any", "required"), None);
        assert_eq!(
            ToolChoice::parse("tool:x", "any"),
            Some(ToolChoice::Tool("x".into()))
        );
        assert_eq!(ToolChoice::parse("tool:", "any"), None);
        assert_eq!(ToolChoice::parse("none", "any"), Some(ToolChoice::None));
    }
}
