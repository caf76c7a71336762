//! `cargo xtask tidy`: repository rules checked as code, in the manner of
//! rust-analyzer's `xtask/src/tidy.rs`. Each rule says why in one line; `test-all` runs
//! this first, so a broken rule fails fast.
//!
//! - **Every module has a `//!` doc.** A reader opening a file learns what it holds.
//! - **No source file over [`MAX_LINES`] lines outside tests.** One concept per file.
//! - **`mod.rs` only declares and re-exports** (in `crates/*/src`): code lives in files
//!   named after what they hold.
//! - **No clock read outside `tollgate::clock`** (in `crates/*/src`): time comes from one
//!   injectable clock that tests pause (`clippy.toml` bans the same calls).
//! - **No provider crate depends on another**, except the documented
//!   `tollgate-bedrock` → `tollgate-anthropic` codec reuse: a provider crate is the core
//!   plus its codec.
//! - **No circle among the core's modules**: `cargo xtask core-graph` draws them (DOT),
//!   and this check fails on a cycle, naming it.
//!
//! Plain `std`: the checks read text, they do not parse Rust.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a non-test source file may be, in lines.
pub(crate) const MAX_LINES: usize = 800;

/// Files allowed over [`MAX_LINES`] for now, each with why. An entry that is no longer
/// needed is itself a failure, so the list only shrinks.
const LONG_FILE_EXCEPTIONS: &[(&str, &str)] = &[];

/// Provider crate dependencies that are allowed: (dependent, dependency).
const PROVIDER_DEPENDENCY_EXCEPTIONS: &[(&str, &str)] =
    &[("tollgate-bedrock", "tollgate-anthropic")];

/// The one file allowed to read the clock.
const CLOCK_MODULE: &str = "crates/tollgate/src/clock.rs";

/// Calls that read a clock.
const CLOCK_READS: &[&str] = &["Instant::now", "SystemTime::now"];

/// Runs every rule over the repository at `root`; the problems found, one a line.
pub(crate) fn check(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let files = rust_files(root);
    for file in &files {
        let rel = relative(root, file);
        let Ok(text) = fs::read_to_string(file) else {
            problems.push(format!("{rel}: cannot be read"));
            continue;
        };
        check_module_doc(&rel, &text, &mut problems);
        check_length(&rel, &text, &mut problems);
        if rel.starts_with("crates/") && rel.contains("/src/") {
            check_mod_rs(&rel, &text, &mut problems);
            check_clock(&rel, &text, &mut problems);
        }
    }
    for (path, why) in LONG_FILE_EXCEPTIONS {
        let long = fs::read_to_string(root.join(path)).is_ok_and(|t| t.lines().count() > MAX_LINES);
        if !long {
            problems.push(format!(
                "{path}: listed in LONG_FILE_EXCEPTIONS ({why}) but no longer over {MAX_LINES} lines; remove it from the list"
            ));
        }
    }
    check_provider_dependencies(root, &mut problems);
    if let Some(cycle) = find_cycle(&core_module_graph(root)) {
        problems.push(format!(
            "crates/tollgate/src: the core's modules import each other in a circle: {}; move the shared item to a module below both (see `cargo xtask core-graph`)",
            cycle.join(" -> ")
        ));
    }
    problems
}

/// Every `.rs` file of the workspace outside `target/` and hidden directories.
fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && !name.starts_with("target-") {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Whether `rel` is test code: an integration test directory or a `tests.rs` module.
fn is_test(rel: &str) -> bool {
    rel.starts_with("tests/tests/")
        || rel.contains("/tests/")
        || rel.ends_with("/tests.rs")
        || rel.starts_with("fuzz/")
}

fn check_module_doc(rel: &str, text: &str, problems: &mut Vec<String>) {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if !first.starts_with("//!") {
        problems.push(format!(
            "{rel}: no `//!` module doc; open the file with a line saying what it holds"
        ));
    }
}

fn check_length(rel: &str, text: &str, problems: &mut Vec<String>) {
    let lines = text.lines().count();
    if lines > MAX_LINES && !is_test(rel) && !LONG_FILE_EXCEPTIONS.iter().any(|(p, _)| *p == rel) {
        problems.push(format!(
            "{rel}: {lines} lines, over {MAX_LINES}; split it into files named after what they hold"
        ));
    }
}

/// A `mod.rs` holds only its doc, `mod` declarations and re-exports.
fn check_mod_rs(rel: &str, text: &str, problems: &mut Vec<String>) {
    if !rel.ends_with("/mod.rs") || is_test(rel) {
        return;
    }
    let allowed = |line: &str| {
        let l = line.trim();
        l.is_empty()
            || l.starts_with("//")
            || l.starts_with("#[")
            || l.starts_with("mod ")
            || l.starts_with("pub mod ")
            || l.starts_with("pub(crate) mod ")
            || l.starts_with("pub use ")
            || l.starts_with("pub(crate) use ")
            || !line.starts_with(|c: char| c.is_alphabetic() || c == '#' || c == '/')
            || l == "};"
    };
    if let Some((n, line)) = text.lines().enumerate().find(|(_, l)| !allowed(l)) {
        problems.push(format!(
            "{rel}:{}: `{}`: a mod.rs only declares and re-exports; move the code into a file named after it",
            n + 1,
            line.trim()
        ));
    }
}

/// The code of a line: what precedes a `//` comment (string contents are not special-cased;
/// a clock call spelled inside a string would be flagged, which is fine).
fn code(line: &str) -> &str {
    line.split_once("//").map_or(line, |(c, _)| c)
}

fn check_clock(rel: &str, text: &str, problems: &mut Vec<String>) {
    if rel == CLOCK_MODULE {
        return;
    }
    for (n, line) in text.lines().enumerate() {
        let code = code(line);
        if let Some(read) = CLOCK_READS.iter().find(|r| code.contains(*r)) {
            problems.push(format!(
                "{rel}:{}: reads the clock (`{read}`); use `tollgate::clock::now()` (tokio's clock, paused in tests) or `clock::wall_now()`",
                n + 1
            ));
        }
    }
}

/// The `[dependencies]` (and build-dependencies) names of a `Cargo.toml`.
fn dependencies(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_deps = l == "[dependencies]" || l == "[build-dependencies]";
            continue;
        }
        if in_deps
            && let Some((name, _)) = l.split_once('=')
            && !l.starts_with('#')
        {
            let name = name.trim();
            deps.insert(
                name.split('.')
                    .next()
                    .unwrap_or(name)
                    .trim_matches('"')
                    .to_owned(),
            );
        }
    }
    deps
}

/// A provider crate is a crate under `crates/` whose sources call `register_provider!`.
fn provider_crates(root: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let Ok(entries) = fs::read_dir(root.join("crates")) else {
        return out;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let registers = rust_files(&dir.join("src")).iter().any(|f| {
            fs::read_to_string(f)
                .is_ok_and(|t| t.lines().any(|l| code(l).contains("register_provider!(")))
        });
        let name = entry.file_name().to_string_lossy().into_owned();
        if registers && name != "tollgate" {
            out.insert(name, dir.join("Cargo.toml"));
        }
    }
    out
}

fn check_provider_dependencies(root: &Path, problems: &mut Vec<String>) {
    let providers = provider_crates(root);
    for (name, manifest) in &providers {
        let Ok(text) = fs::read_to_string(manifest) else {
            continue;
        };
        for dep in dependencies(&text) {
            if providers.contains_key(&dep)
                && !PROVIDER_DEPENDENCY_EXCEPTIONS.contains(&(name.as_str(), dep.as_str()))
            {
                problems.push(format!(
                    "crates/{name}/Cargo.toml: provider crate `{name}` depends on provider crate `{dep}`; a provider crate depends on `tollgate` only (the one exception is tollgate-bedrock reusing the Anthropic codec)"
                ));
            }
        }
    }
}

/// The core's top-level modules and the ones each uses, from the code of every file
/// under `crates/tollgate/src` (comments and `#[cfg(test)]` code left out). A use is a
/// `crate::module` path, or a `crate::Name` (also inside `crate::{…}` on one line) that
/// `lib.rs` re-exports from a module.
pub(crate) fn core_module_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let src = root.join("crates/tollgate/src");
    let files: Vec<PathBuf> = rust_files(&src)
        .into_iter()
        .filter(|f| !f.ends_with("tests.rs"))
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|f| top_module(&src, f)).collect();
    let reexports = root_reexports(&fs::read_to_string(src.join("lib.rs")).unwrap_or_default());
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = top_module(&src, file);
        let text = fs::read_to_string(file).unwrap_or_default();
        let edges = graph.entry(from.clone()).or_default();
        for line in text.lines() {
            if line.trim() == "#[cfg(test)]" {
                break;
            }
            let code = code(line);
            for (i, _) in code.match_indices("crate::") {
                // `$crate::` in a macro names the crate from outside: not an import.
                if code[..i].ends_with('$') {
                    continue;
                }
                let rest = &code[i + "crate::".len()..];
                let names: Vec<String> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .map(|n| ident(n.trim()))
                        .collect(),
                    None => vec![ident(rest)],
                };
                for name in names {
                    let target = if modules.contains(&name) {
                        Some(name)
                    } else {
                        reexports.get(&name).cloned()
                    };
                    if let Some(target) = target
                        && target != from
                    {
                        edges.insert(target);
                    }
                }
            }
        }
    }
    graph
}

/// The identifier `text` starts with.
fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// What `lib.rs` re-exports from its modules: name → module, from `pub use module::…;`
/// items (braces may span lines).
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let code: String = lib.lines().map(code).collect::<Vec<_>>().join("\n");
    for item in code.split(';') {
        let Some(path) = item.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (module, names) = path.split_once("::").unwrap_or((path, ""));
        for name in names
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
        {
            let name = ident(name.trim().rsplit("::").next().unwrap_or(""));
            if !name.is_empty() {
                out.insert(name, module.trim().to_owned());
            }
        }
    }
    out
}

/// `lib.rs` is the crate root; `a.rs` and `a/…` are module `a`.
fn top_module(src: &Path, file: &Path) -> String {
    let rel = relative(src, file);
    let first = rel.split('/').next().unwrap_or(&rel);
    first.trim_end_matches(".rs").to_owned()
}

/// A cycle in `graph`, as the modules along it (first repeated at the end), if any.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first search; `path` is the current chain, `done` the fully explored nodes.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The core's module graph in Graphviz DOT (`lib` and edges to it left out).
pub(crate) fn core_graph_dot(root: &Path) -> String {
    let mut out = String::from("digraph tollgate_core {\n    rankdir=BT;\n");
    for (from, tos) in core_module_graph(root) {
        if from == "lib" {
            continue;
        }
        out.push_str(&format!("    \"{from}\";\n"));
        for to in tos {
            out.push_str(&format!("    \"{from}\" -> \"{to}\";\n"));
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_cycle_names_the_circle_and_accepts_a_dag() {
        let graph = |edges: &[(&str, &str)]| {
            let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (a, b) in edges {
                g.entry((*a).into()).or_default().insert((*b).into());
                g.entry((*b).into()).or_default();
            }
            g
        };
        assert_eq!(
            find_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])),
            None
        );
        assert_eq!(
            find_cycle(&graph(&[("catalog", "provider"), ("provider", "catalog")])),
            Some(vec!["catalog".into(), "provider".into(), "catalog".into()])
        );
    }

    #[test]
    fn mod_rs_with_code_is_reported_and_declarations_are_not() {
        let mut problems = Vec::new();
        check_mod_rs(
            "crates/x/src/a/mod.rs",
            "//! Doc.\n\nmod b;\n\npub use b::{\n    B, C,\n};\n",
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        check_mod_rs(
            "crates/x/src/a/mod.rs",
            "//! Doc.\n\nfn f() {}\n",
            &mut problems,
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    #[test]
    fn clock_reads_in_comments_are_not_reads() {
        let mut problems = Vec::new();
        check_clock(
            "crates/x/src/a.rs",
            "// Instant::now is banned\n",
            &mut problems,
        );
        assert!(problems.is_empty());
        check_clock(
            "crates/x/src/a.rs",
            "let t = Instant::now();\n",
            &mut problems,
        );
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn root_reexports_map_names_to_their_modules() {
        let lib = "pub use error::{Error, Result};\npub use client::{\n    Decision, LlmClient,\n};\npub use usage::Usage;\npub mod cache;\n";
        let map = root_reexports(lib);
        assert_eq!(map.get("Result").map(String::as_str), Some("error"));
        assert_eq!(map.get("LlmClient").map(String::as_str), Some("client"));
        assert_eq!(map.get("Usage").map(String::as_str), Some("usage"));
    }

    #[test]
    fn dependencies_reads_only_the_dependencies_tables() {
        let manifest = "[dependencies]\ntollgate.workspace = true\nfoo = \"1\"\n\n[dev-dependencies]\ntollgate-openai.workspace = true\n";
        let deps = dependencies(manifest);
        assert!(deps.contains("tollgate") && deps.contains("foo"));
        assert!(!deps.contains("tollgate-openai"));
    }

    /// The repository itself passes: the rules hold on the tree as committed.
    #[test]
    fn the_repository_is_tidy() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root");
        let problems = check(root);
        assert!(problems.is_empty(), "tidy:\n{}", problems.join("\n"));
    }
}
