//! `tollgate models` (the catalog as a table, then its aliases and patterns) and `tollgate catalog check` (every
//! mistake in a catalog file, each with its model and field).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use tollgate::Catalog;
use tollgate::catalog::{CatalogError, KnownProviders};
use tollgate::pipeline::NoRecorder;

use crate::CliResult;
use crate::setup::Source;

/// List the catalog's models: provider (and whether its crate is linked), limits, prices,
/// context window and output ceiling; then the aliases and patterns that name them.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  tollgate models\n  tollgate --catalog models.toml models")]
pub(crate) struct ModelsArgs {}

/// Catalog tools.
#[derive(Debug, Subcommand)]
pub(crate) enum CatalogCommand {
    /// Check a catalog file: report every mistake with its model and field; exit non-zero
    /// if there is one.
    #[command(after_help = "Examples:\n  tollgate catalog check models.toml")]
    Check {
        /// The catalog file.
        file: PathBuf,
    },
}

fn n(v: u64) -> String {
    if v == 0 { "-".into() } else { v.to_string() }
}

pub(crate) fn list(source: &Source, _args: &ModelsArgs) -> CliResult {
    let (models, origin) = source.models(Arc::new(NoRecorder))?;
    let linked = models.provider_keys();
    let known = KnownProviders::linked();
    let header = [
        "model", "kind", "provider", "linked", "rpm", "tpm", "in tpm", "out tpm", "$/M in",
        "$/M out", "context", "max out",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for m in models.catalog().models() {
        let krate = known.crate_name(&m.provider).unwrap_or("?");
        let linked = if linked.contains(&m.provider.as_str()) {
            format!("yes ({krate})")
        } else {
            format!("no: add {krate}")
        };
        let (pin, pout) = m
            .price
            .map(|p| (format!("{:.2}", p.input), format!("{:.2}", p.output)))
            .unwrap_or(("-".into(), "-".into()));
        rows.push(vec![
            m.id.clone(),
            m.kind.as_str().into(),
            m.provider.clone(),
            linked,
            n(m.limits.rpm),
            n(m.limits.tpm),
            n(m.limits.input_tpm),
            n(m.limits.output_tpm),
            pin,
            pout,
            m.context_window.map_or("-".into(), |v| v.to_string()),
            m.max_output_tokens.map_or("-".into(), |v| v.to_string()),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    println!("catalog: {origin}");
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    }
    for line in other_names(models.catalog()) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The names besides the ids that the catalog serves, after the table: each alias with
/// its model, then each pattern with its model in the order names are tried on them.
fn other_names(catalog: &Catalog) -> Vec<String> {
    let mut lines = Vec::new();
    let aliases: Vec<String> = catalog
        .aliases()
        .map(|(alias, m)| format!("  {alias} -> {}", m.id))
        .collect();
    if !aliases.is_empty() {
        lines.push("aliases:".to_owned());
        lines.extend(aliases);
    }
    let patterns: Vec<String> = catalog
        .patterns()
        .map(|(pattern, m)| format!("  {pattern} -> {}", m.id))
        .collect();
    if !patterns.is_empty() {
        lines.push(
            "patterns (most specific first; an id or alias is matched before any):".to_owned(),
        );
        lines.extend(patterns);
    }
    lines
}

pub(crate) fn catalog(command: CatalogCommand) -> CliResult {
    let CatalogCommand::Check { file } = command;
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
    let mistakes = check(&text);
    if mistakes.is_empty() {
        let catalog = Catalog::from_toml_str(&text)?;
        println!(
            "{}: ok, {} models",
            file.display(),
            catalog.models().count()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for m in &mistakes {
        println!("{}: {m}", file.display());
    }
    println!("{}: {} mistakes", file.display(), mistakes.len());
    Ok(ExitCode::FAILURE)
}

/// Every mistake in a catalog text. The library stops at the first; here each model is
/// checked on its own (with the `[embeddings]` section), every mistake in it found by
/// [`model_mistakes`], then the fallbacks across models.
pub(crate) fn check(text: &str) -> Vec<String> {
    let root: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            return vec![
                CatalogError::Syntax {
                    message: e.to_string(),
                }
                .to_string(),
            ];
        }
    };
    if Catalog::from_toml_str(text).is_ok() {
        return Vec::new();
    }
    let mut mistakes = Vec::new();
    let mut base = toml::Table::new();
    for (key, value) in &root {
        if key != "models" {
            base.insert(key.clone(), value.clone());
        }
    }
    if let Err(e) = Catalog::from_toml_str(&base.to_string()) {
        mistakes.push(e.to_string());
    }
    let embeddings = root.get("embeddings").cloned();
    let models = match root.get("models") {
        None => return mistakes,
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => {
            mistakes
                .push("catalog: field `models` must be a table of `[models.ID]` entries".into());
            return mistakes;
        }
    };
    for (id, model) in &models {
        let mut alone = model.clone();
        let fallbacks = match &mut alone {
            toml::Value::Table(t) => t.remove("fallbacks"),
            _ => None,
        };
        mistakes.extend(model_mistakes(id, alone, embeddings.as_ref()));
        match fallbacks {
            None => {}
            Some(toml::Value::Array(items)) => {
                for item in items {
                    match item.as_str() {
                        Some(f) if f == id => mistakes.push(
                            CatalogError::SelfFallback {
                                model_id: id.clone(),
                            }
                            .to_string(),
                        ),
                        Some(f) if !models.contains_key(f) => mistakes.push(
                            CatalogError::UnknownFallback {
                                model_id: id.clone(),
                                fallback: f.to_owned(),
                            }
                            .to_string(),
                        ),
                        Some(_) => {}
                        None => mistakes.push(format!(
                            "catalog model `{id}`: field `fallbacks` must be an array of model ids"
                        )),
                    }
                }
            }
            Some(_) => mistakes.push(format!(
                "catalog model `{id}`: field `fallbacks` must be an array of model ids"
            )),
        }
    }
    if mistakes.is_empty()
        && let Err(e) = Catalog::from_toml_str(text)
    {
        mistakes.push(e.to_string());
    }
    mistakes
}

/// Every mistake in one model. The library reports the first; it is noted, and the
/// field it names is taken out (or, when it is missing, filled with a stand-in) before
/// the model is checked again, until it loads or a mistake names nothing to change. A
/// "required" mistake about a field taken out here is not reported: it says nothing new.
fn model_mistakes(
    id: &str,
    mut model: toml::Value,
    embeddings: Option<&toml::Value>,
) -> Vec<String> {
    let mut mistakes = Vec::new();
    let mut taken_out: Vec<String> = Vec::new();
    for _ in 0..64 {
        let mut doc = toml::Table::new();
        if let Some(e) = embeddings {
            doc.insert("embeddings".into(), e.clone());
        }
        let mut one = toml::Table::new();
        one.insert(id.to_owned(), model.clone());
        doc.insert("models".into(), toml::Value::Table(one));
        let error = match Catalog::from_toml_str(&doc.to_string()) {
            Ok(_) | Err(CatalogError::InvalidSection { .. }) => return mistakes,
            Err(e) => e,
        };
        let field = match &error {
            CatalogError::InvalidField { field, .. }
            | CatalogError::EmbeddingWidth { field, .. } => field.clone(),
            CatalogError::DefaultAboveMax { .. } => "default_output_tokens".into(),
            // Checked after every field parsed: nothing more to find in this model.
            _ => {
                mistakes.push(error.to_string());
                return mistakes;
            }
        };
        if !taken_out.contains(&field) {
            mistakes.push(error.to_string());
        }
        if take_out(&mut model, &field) {
            taken_out.push(field);
        } else if !stand_in(&mut model, &field) {
            return mistakes;
        }
    }
    mistakes
}

/// Removes `field` (dotted: `price.input`) from a model's table; `false` when absent.
fn take_out(model: &mut toml::Value, field: &str) -> bool {
    let (table, last) = parent(model, field);
    table
        .and_then(toml::Value::as_table_mut)
        .is_some_and(|t| t.remove(last).is_some())
}

/// Puts a valid value in a missing required `field`, so the rest of the model is checked
/// (a price is a number; the other required fields that can be stood in are counts);
/// `false` for a field no stand-in fits (a string such as `provider`).
fn stand_in(model: &mut toml::Value, field: &str) -> bool {
    let value = if field.starts_with("price.") {
        toml::Value::Float(0.0)
    } else if field.ends_with("tokens") || field.ends_with("window") {
        toml::Value::Integer(1_000_000_000)
    } else {
        return false;
    };
    let (table, last) = parent(model, field);
    match table.and_then(toml::Value::as_table_mut) {
        Some(t) if !t.contains_key(last) => t.insert(last.to_owned(), value).is_none(),
        _ => false,
    }
}

/// The table holding the last part of a dotted `field`, and that part.
fn parent<'m>(
    model: &'m mut toml::Value,
    field: &'m str,
) -> (Option<&'m mut toml::Value>, &'m str) {
    let mut parts: Vec<&str> = field.split('.').collect();
    let last = parts.pop().unwrap_or(field);
    let mut table = Some(model);
    for part in parts {
        table = table.and_then(|t| t.get_mut(part));
    }
    (table, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_check_reports_every_mistake_with_model_and_field() {
        let text = r#"
            [models.a]
            provider = "fake"
            rpm = -1
            [models.b]
            provider = "nope"
            [models.c]
            provider = "fake"
            max_output_tokens = 100
            fallbacks = ["zzz"]
        "#;
        let mistakes = check(text);
        assert_eq!(mistakes.len(), 4, "{mistakes:#?}");
        assert!(mistakes[0].contains("`a`") && mistakes[0].contains("`rpm`"));
        // The model's second mistake is found too.
        assert!(mistakes[1].contains("`a`") && mistakes[1].contains("`max_output_tokens`"));
        assert!(mistakes[2].contains("`b`") && mistakes[2].contains("`provider`"));
        assert!(mistakes[3].contains("`c`") && mistakes[3].contains("`fallbacks`"));
    }

    #[test]
    fn the_embedded_demo_catalog_has_no_mistakes() {
        assert!(check(crate::setup::DEMO_CATALOG).is_empty());
    }

    #[test]
    fn models_lists_aliases_and_patterns_with_their_models() {
        let catalog = Catalog::from_toml_str(crate::setup::DEMO_CATALOG).unwrap();
        let lines = other_names(&catalog);
        for line in [
            "  claude-opus-5-5 -> demo",
            "  claude-sonnet-4-5 -> demo",
            "  gpt-5.6-luna -> demo",
            "  claude-* -> demo",
            "  gpt-* -> demo",
        ] {
            assert!(lines.iter().any(|l| l == line), "{line}: {lines:#?}");
        }
        assert_eq!(lines[0], "aliases:");
    }

    #[test]
    fn catalog_check_names_an_alias_that_is_another_model_s_id() {
        let text = "[models.a]\nprovider = \"fake\"\nmax_output_tokens = 1\naliases = [\"b\"]\n\
                    [models.b]\nprovider = \"fake\"\nmax_output_tokens = 1\n";
        let mistakes = check(text);
        assert_eq!(mistakes.len(), 1, "{mistakes:#?}");
        assert!(mistakes[0].contains("`aliases`") && mistakes[0].contains("`b`"));
    }
}
