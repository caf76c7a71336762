//! The provider crates' imports, a `tidy` rule: a provider crate reads the core through
//! `tollgate::provider` alone, the folder its author opens, and another provider crate
//! through that crate's public codec alone. The rule reads code, not comments or string
//! literals: a doc comment may show the application's side (`tollgate::Models`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// What may follow `tollgate::` in a provider crate's code, each with why.
const CORE_PATHS: &[(&str, &str)] = &[
    (
        "provider",
        "the provider kit: everything a provider crate is written with",
    ),
    (
        "register_provider",
        "the registration macro, at the crate root because `#[macro_export]` puts it there",
    ),
    (
        "async_trait",
        "the attribute the transport traits are implemented with",
    ),
    ("self", "the crate itself, as in `pub use tollgate;`"),
];

/// What a provider crate may name in a codec crate (`tidy::CODEC_CRATES`), with why:
/// OpenAI's preset and codec (every OpenAI-like provider is a preset plus its
/// differences), its contract-kit script, and the transports, options and provider type
/// it re-exports at its root for a host that reuses them (Azure); Anthropic's codec
/// alone (Bedrock and Vertex send Claude's wire format through their own transports).
const CODEC_PATHS: &[(&str, &[&str])] = &[
    (
        "tollgate_openai",
        &[
            "preset",
            "codec",
            "testkit",
            "OpenAiProvider",
            "Quirks",
            "OutputLimitField",
            "OpenAiChat",
            "OpenAiEmbeddings",
            "OpenAiDecision",
            "OpenAiOptions",
            "Api",
        ],
    ),
    ("tollgate_anthropic", &["codec"]),
];

/// The provider crates outside `crates/` (which `provider_crates` finds by their
/// `register_provider!`): the third-party examples, held to the same rule.
const EXAMPLE_PROVIDERS: &[&str] = &["examples/ollama", "examples/openai-like"];

/// Checks every provider crate's `src/`: each `tollgate::` path is into
/// `tollgate::provider` (or a macro), each path into another provider crate is into its
/// public codec.
pub(super) fn check(root: &Path, problems: &mut Vec<String>) {
    let crates = provider_dirs(root);
    let names: Vec<String> = crates.keys().cloned().collect();
    for (name, dir) in &crates {
        for file in super::rust_files(&dir.join("src")) {
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            let rel = super::relative(root, &file);
            check_text(&rel, &text, name, &names, problems);
        }
    }
}

/// Every provider crate's library name and directory: the crates under `crates/` that
/// register a provider, and [`EXAMPLE_PROVIDERS`].
fn provider_dirs(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut crates: BTreeMap<String, PathBuf> = super::provider_crates(root)
        .into_values()
        .filter_map(|manifest| manifest.parent().map(Path::to_path_buf))
        .map(|dir| (crate_name(&dir), dir))
        .collect();
    for example in EXAMPLE_PROVIDERS {
        let dir = root.join(example);
        crates.insert(crate_name(&dir), dir);
    }
    crates
}

/// The library name of the crate in `dir` (its package name, `-` as `_`).
fn crate_name(dir: &Path) -> String {
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    let package = manifest
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == "name").then(|| value.trim().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| {
            dir.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        });
    package.replace('-', "_")
}

/// The problems of one file of provider crate `own` (`providers`: every provider
/// crate's library name).
fn check_text(rel: &str, text: &str, own: &str, providers: &[String], problems: &mut Vec<String>) {
    let code: String = text
        .lines()
        .map(|l| strip_strings(super::code(l)) + "\n")
        .collect();
    for (line, first) in paths(&code, "tollgate") {
        if !CORE_PATHS.iter().any(|(p, _)| *p == first) {
            problems.push(format!(
                "{rel}:{line}: `tollgate::{first}` in a provider crate; import it from `tollgate::provider` (re-export it there if it is missing), the one module a provider crate reads the core through"
            ));
        }
    }
    for other in providers.iter().filter(|p| *p != own) {
        let allowed = CODEC_PATHS
            .iter()
            .find(|(c, _)| c == other)
            .map_or(&[][..], |(_, a)| *a);
        for (line, first) in paths(&code, other) {
            if !allowed.contains(&first.as_str()) {
                problems.push(format!(
                    "{rel}:{line}: `{other}::{first}`: a provider crate reaches another only through its public codec ({})",
                    if allowed.is_empty() { "none here".to_owned() } else { allowed.join(", ") }
                ));
            }
        }
    }
}

/// A line with its string and char literals emptied (a `"` left open, as by a `//` in a
/// URL cut by [`super::code`], empties the rest of the line).
fn strip_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push_str("\"\"");
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '"'); a lifetime ('a) is left as it is.
                let rest: String = chars.clone().take(3).collect();
                let len = if rest.starts_with('\\') {
                    rest.find('\'').filter(|&i| i >= 2)
                } else {
                    rest.char_indices()
                        .nth(1)
                        .filter(|(_, c)| *c == '\'')
                        .map(|(i, _)| i)
                };
                out.push('\'');
                if let Some(len) = len {
                    for _ in 0..=len {
                        chars.next();
                    }
                    out.push('\'');
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every path into crate `name` in `code`: its line (1-based) and first segment after
/// `name::` (each item of a `name::{…}` group, `*` for a glob).
fn paths(code: &str, name: &str) -> Vec<(usize, String)> {
    let prefix = format!("{name}::");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(&prefix).map(|i| i + from) {
        from = at + prefix.len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = code[from..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                out.push((line, first_segment(item)));
            }
        } else {
            out.push((line, first_segment(rest)));
        }
    }
    out
}

/// The items of a `{…}` group (its text after the `{`), split at its top-level commas.
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.into_iter().filter(|i| !i.trim().is_empty()).collect()
}

/// The first path segment of `path` (`*` for a glob).
fn first_segment(path: &str) -> String {
    let path = path.trim_start();
    if path.starts_with('*') {
        return "*".into();
    }
    path.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_crate_reads_the_core_through_tollgate_provider_and_a_codec_crate_through_its_codec()
     {
        let text = r#"//! Doc: `tollgate::Models` is the application's side.
use tollgate::provider::{LlmRequest, Result};
use tollgate::{
    Error,
    provider::Usage,
};
use tollgate_openai::preset::{Dialect, Preset};
use tollgate_openai::{OpenAiProvider, chat::Hidden};
use tollgate_anthropic::codec::{self, read_error};
use tollgate_gemini::codec;
pub use tollgate;
/// Made with `tollgate::limit::LimiterConfig` (a comment).
fn name() -> &'static str { "tollgate::ResponseCap" }
fn quote() -> char { '"' }
fn f() -> tollgate::Result<()> { tollgate::provider::clock::now(); Ok(()) }
tollgate::register_provider!(|| std::sync::Arc::new(P));
"#;
        let providers: Vec<String> = [
            "tollgate_x",
            "tollgate_openai",
            "tollgate_anthropic",
            "tollgate_gemini",
        ]
        .map(String::from)
        .into();
        let mut problems = Vec::new();
        check_text(
            "crates/tollgate-x/src/lib.rs",
            text,
            "tollgate_x",
            &providers,
            &mut problems,
        );
        let found: Vec<&str> = problems
            .iter()
            .filter_map(|p| p.split_whitespace().nth(1))
            .map(|w| w.trim_end_matches(':'))
            .collect();
        assert_eq!(
            found,
            [
                "`tollgate::Error`",
                "`tollgate::Result`",
                "`tollgate_openai::chat`",
                "`tollgate_gemini::codec`",
            ],
            "{problems:#?}"
        );
        assert!(
            problems[0].starts_with("crates/tollgate-x/src/lib.rs:3:"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_rule_reads_every_provider_crate_by_its_library_name() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root");
        let found = provider_dirs(root);
        for name in [
            "tollgate_openai",
            "tollgate_anthropic",
            "tollgate_bedrock",
            "tollgate_fake",
            "tollgate_ollama",
            "tollgate_openai_like",
        ] {
            assert!(
                found.contains_key(name),
                "{name} not among {:?}",
                found.keys()
            );
        }
        assert!(
            !found.contains_key("tollgate"),
            "the core is not a provider crate"
        );
    }
}
