//! `cargo xtask tidy`: repository rules checked as code, in the manner of
//! rust-analyzer's `xtask/src/tidy.rs`. Each rule says why in one line; `test-all` runs
//! this first, so a broken rule fails fast.
//!
//! - **Every module has a `//!` doc.** A reader opening a file learns what it holds.
//! - **No source file over [`MAX_LINES`] lines outside tests.** One concept per file, and
//!   a file a reader can hold in mind.
//! - **`mod.rs` only declares and re-exports** (in `crates/*/src`): code lives in files
//!   named after what they hold.
//! - **No clock read outside `tollgate::clock`** (in `crates/*/src`): time comes from one
//!   injectable clock that tests pause (`clippy.toml` bans the same calls).
//! - **No provider crate depends on another**, except the documented
//!   `tollgate-bedrock` → `tollgate-anthropic` codec reuse: a provider crate is the core
//!   plus its codec.
//! - **No crate under `crates/` depends on `tollgate-bench`** (in any dependency table):
//!   a product crate never builds the benchmarks' baselines and tables; a benchmark lives
//!   in `benches/` and depends on the product, not the other way round.
//! - **No `rustfmt.toml` but the root's**: one formatting for the whole workspace, so
//!   `cargo fmt --all` means the same in every crate.
//! - **The `tollgate` binary is built without tokio's `test-util`** ([`release`]): test
//!   machinery that steps the clock stays out of production; `tollgate simulate`'s
//!   paused clock is the `tollgate-simulate` binary's.
//! - **No circle of imports between files, in any crate** ([`imports`]): a file reads
//!   from the files below it, never from one that reads from it, so each can be read (and
//!   moved) on its own; the failure names the files and the names that tie them. A file
//!   and the modules it declares are one family, not a circle.
//! - **No circle among the core's top-level modules** (past re-exports): the core reads
//!   as layers; `cargo xtask core-graph` draws them (DOT).
//! - **A provider crate imports the core from `tollgate::provider` alone**, and another
//!   provider crate through its public codec alone ([`provider_imports`]): the folder a
//!   provider author opens holds all a provider is written with.
//!
//! The checks read text, except the import graph, which `syn` parses.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::{circles, imports, release};

mod provider_imports;

/// The longest a non-test source file may be, in lines.
pub(crate) const MAX_LINES: usize = 600;

/// Files allowed over [`MAX_LINES`] for now, each with why. An entry that is no longer
/// needed is itself a failure, so the list only shrinks.
const LONG_FILE_EXCEPTIONS: &[(&str, &str)] = &[];

/// The provider crates whose wire format other provider crates may reuse through their
/// public codec: Anthropic's (Bedrock's and Vertex's Claude) and OpenAI's (every
/// OpenAI-like provider, a preset plus its differences).
const CODEC_CRATES: &[&str] = &["tollgate-anthropic", "tollgate-openai"];

/// The benchmark crate, which no product crate may depend on.
const BENCH_CRATE: &str = "tollgate-bench";

/// The one file allowed to read the clock.
const CLOCK_MODULE: &str = "crates/tollgate/src/clock.rs";

/// The core crate's sources, whose top-level modules form layers.
const CORE_SRC: &str = "crates/tollgate/src/";

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
    provider_imports::check(root, &mut problems);
    check_bench_dependents(root, &mut problems);
    check_rustfmt_files(root, &mut problems);
    release::check(root, &mut problems);
    let graph = imports::workspace_graph(root);
    problems.extend(
        graph
            .unreadable
            .iter()
            .map(|u| format!("{u}: cannot be parsed")),
    );
    check_circles(&graph, &mut problems);
    if let Some(cycle) = find_cycle(&circles::top_module_graph(&graph, CORE_SRC)) {
        problems.push(format!(
            "crates/tollgate/src: the core's modules import each other in a circle: {}; move the shared item to a module below both (see `cargo xtask core-graph`)",
            cycle.join(" -> ")
        ));
    }
    problems
}

/// Every file circle of the import graph, with the names that tie it.
fn check_circles(graph: &imports::Graph, problems: &mut Vec<String>) {
    for circle in circles::circles(graph) {
        let mut files: BTreeSet<&str> = BTreeSet::new();
        let ties: Vec<String> = circle
            .iter()
            .map(|i| {
                files.insert(&i.from);
                let names: Vec<&str> = i.names.iter().map(String::as_str).collect();
                format!("{} -> {} ({})", i.from, i.to, names.join(", "))
            })
            .collect();
        problems.push(format!(
            "{}: these files import each other in a circle: {}; move what they share into a file below them",
            files.into_iter().collect::<Vec<_>>().join(", "),
            ties.join("; ")
        ));
    }
}

/// Every `.rs` file of the workspace outside `target/` and hidden directories.
fn rust_files(root: &Path) -> Vec<PathBuf> {
    workspace_files(root, |name| name.ends_with(".rs"))
}

/// Every file of the workspace whose name passes `wanted`, outside `target/` and hidden
/// directories.
fn workspace_files(root: &Path, wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
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
            } else if wanted(&name) {
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
            if providers.contains_key(&dep) && !CODEC_CRATES.contains(&dep.as_str()) {
                problems.push(format!(
                    "crates/{name}/Cargo.toml: provider crate `{name}` depends on provider crate `{dep}`; a provider crate depends on `tollgate` and, to reuse a wire format, only on a codec crate ({})",
                    CODEC_CRATES.join(", ")
                ));
            }
        }
    }
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

/// The names of every dependency table of a `Cargo.toml` (`[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]`, their `[target.….…]` forms, and
/// `[dependencies.name]` tables), by package: a renamed dependency counts under its
/// `package = "…"`.
fn all_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    // In a `[…dependencies]` table (keys are names), or a `[…dependencies.name]` one.
    let (mut in_table, mut in_entry) = (false, false);
    for line in manifest.lines() {
        let l = code_toml(line).trim();
        if let Some(header) = l.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            in_table = header.ends_with("dependencies");
            in_entry = false;
            if let Some((table, name)) = header.rsplit_once('.')
                && table.ends_with("dependencies")
            {
                in_entry = true;
                deps.insert(name.trim_matches('"').to_owned());
            }
            continue;
        }
        if !in_table && !in_entry {
            continue;
        }
        if let Some(package) = package_value(l) {
            deps.insert(package.to_owned());
        }
        if in_table && let Some((key, _)) = l.split_once('=') {
            let key = key.trim();
            deps.insert(
                key.split('.')
                    .next()
                    .unwrap_or(key)
                    .trim_matches('"')
                    .to_owned(),
            );
        }
    }
    deps
}

/// The `package = "…"` of a dependency line, if it renames one.
fn package_value(line: &str) -> Option<&str> {
    let rest = line
        .split("package")
        .nth(1)?
        .trim_start()
        .strip_prefix('=')?;
    rest.trim_start().strip_prefix('"')?.split('"').next()
}

/// A TOML line without its comment (a `#` inside a string is rare in a manifest and
/// not special-cased).
fn code_toml(line: &str) -> &str {
    line.split_once('#').map_or(line, |(c, _)| c)
}

fn check_bench_dependents(root: &Path, problems: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(root.join("crates")) else {
        return;
    };
    let mut manifests: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join("Cargo.toml"))
        .collect();
    manifests.sort();
    for manifest in manifests {
        let Ok(text) = fs::read_to_string(&manifest) else {
            continue;
        };
        if all_dependencies(&text).contains(BENCH_CRATE) {
            problems.push(format!(
                "{}: depends on `{BENCH_CRATE}`; a product crate never depends on the benchmarks: move the bench into `benches/`",
                relative(root, &manifest)
            ));
        }
    }
}

/// Formatting is the root's `rustfmt.toml` (or rustfmt's defaults) for every crate.
fn check_rustfmt_files(root: &Path, problems: &mut Vec<String>) {
    for file in workspace_files(root, |n| n == "rustfmt.toml" || n == ".rustfmt.toml") {
        if file.parent() != Some(root) {
            problems.push(format!(
                "{}: a crate-local rustfmt configuration; the workspace formats with the root's alone, so remove it",
                relative(root, &file)
            ));
        }
    }
}

/// The core's module graph in Graphviz DOT (`lib` and edges to it left out).
pub(crate) fn core_graph_dot(root: &Path) -> String {
    let graph = imports::workspace_graph(root);
    let mut out = String::from("digraph tollgate_core {\n    rankdir=BT;\n");
    for (from, tos) in circles::top_module_graph(&graph, CORE_SRC) {
        if from == "lib" {
            continue;
        }
        out.push_str(&format!("    \"{from}\";\n"));
        for to in tos.iter().filter(|t| *t != "lib") {
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
    fn every_dependency_table_names_the_bench_crate() {
        for manifest in [
            "[dev-dependencies]\ntollgate-bench = { path = \"../../benches\" }\n",
            "[dependencies]\ntollgate-bench.workspace = true\n",
            "[build-dependencies]\nbench = { package = \"tollgate-bench\", path = \"b\" }\n",
            "[target.'cfg(unix)'.dev-dependencies]\ntollgate-bench = \"0.1\"\n",
            "[dev-dependencies.tollgate-bench]\npath = \"../../benches\"\n",
            "[dev-dependencies.bench]\npackage = \"tollgate-bench\"\npath = \"b\"\n",
        ] {
            assert!(
                all_dependencies(manifest).contains(BENCH_CRATE),
                "not seen in:\n{manifest}"
            );
        }
        let clean = "[package]\nname = \"x\"\n# tollgate-bench = \"1\"\n[features]\ntollgate-bench = []\n[dependencies]\ntollgate.workspace = true\n";
        assert!(!all_dependencies(clean).contains(BENCH_CRATE));
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
