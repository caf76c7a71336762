//! Every catalog in the book loads: each ```toml block of a page in `docs/SUMMARY.md`
//! that defines a model (a `[models.…]` table with a `provider`) is parsed by
//! `Catalog::from_toml_str` with every provider crate linked, so an example that names a
//! field the catalog rejects, or leaves out one it requires, fails here.

use std::path::{Path, PathBuf};

use tollgate::Catalog;
use tollgate_anthropic as _;
use tollgate_bedrock as _;
use tollgate_fake as _;
use tollgate_gemini as _;
use tollgate_ollama as _;
use tollgate_openai as _;

/// The docs directory.
fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// The pages `docs/SUMMARY.md` lists.
fn pages() -> Vec<PathBuf> {
    let summary = std::fs::read_to_string(docs().join("SUMMARY.md")).expect("SUMMARY.md");
    summary
        .lines()
        .filter_map(|l| {
            l.split_once("](")
                .and_then(|(_, rest)| rest.split_once(')'))
        })
        .map(|(target, _)| docs().join(target))
        .collect()
}

/// The ```toml blocks of `text` that define a model, with the line each starts on.
fn catalogs(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        match &mut block {
            None if trimmed.starts_with("```toml") => block = Some((i + 1, String::new())),
            Some(_) if trimmed == "```" => {
                let (at, toml) = block.take().expect("open block");
                let defines_a_model = toml.lines().any(|l| l.trim_start().starts_with("[models."))
                    && toml.lines().any(|l| l.trim_start().starts_with("provider"));
                if defines_a_model {
                    out.push((at, toml));
                }
            }
            Some((_, toml)) => {
                toml.push_str(line);
                toml.push('\n');
            }
            None => {}
        }
    }
    out
}

#[test]
fn every_catalog_in_the_book_loads() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page of the book");
        for (line, toml) in catalogs(&text) {
            checked += 1;
            if let Err(e) = Catalog::from_toml_str(&toml) {
                failures.push(format!("{}:{line}: {e}", page.display()));
            }
        }
    }
    assert!(
        checked > 5,
        "only {checked} catalogs found: is the scan broken?"
    );
    assert!(
        failures.is_empty(),
        "catalogs in the book that do not load:\n{}",
        failures.join("\n")
    );
}
