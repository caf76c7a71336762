//! `tollgate models` (the catalog as a table) and `tollgate catalog check` (every
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
/// context window and output ceiling.
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
    Ok(ExitCode::SUCCESS)
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
/// checked on its own (with the `[embeddings]` section), then the fallbacks across models.
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
        let mut doc = toml::Table::new();
        if let Some(e) = &embeddings {
            doc.insert("embeddings".into(), e.clone());
        }
        let mut one = toml::Table::new();
        one.insert(id.clone(), alone);
        doc.insert("models".into(), toml::Value::Table(one));
        if let Err(e) = Catalog::from_toml_str(&doc.to_string())
            && !matches!(e, CatalogError::InvalidSection { .. })
        {
            mistakes.push(e.to_string());
        }
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
        assert_eq!(mistakes.len(), 3, "{mistakes:#?}");
        assert!(mistakes[0].contains("`a`") && mistakes[0].contains("`rpm`"));
        assert!(mistakes[1].contains("`b`") && mistakes[1].contains("`provider`"));
        assert!(mistakes[2].contains("`c`") && mistakes[2].contains("`fallbacks`"));
    }

    #[test]
    fn the_embedded_demo_catalog_has_no_mistakes() {
        assert!(check(crate::setup::DEMO_CATALOG).is_empty());
    }
}
