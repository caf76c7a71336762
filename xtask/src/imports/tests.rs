//! The import graph on small crates written to a temporary directory.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use super::{Graph, workspace_graph};
use crate::circles::{circles, top_module_graph};

/// A workspace with one crate `crates/p` holding `files` (paths under its `src/`).
pub(crate) fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let krate = dir.path().join("crates/p");
    fs::create_dir_all(krate.join("src")).expect("crate dir");
    fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    )
    .expect("manifest");
    for (path, text) in files {
        let path = krate.join("src").join(path);
        fs::create_dir_all(path.parent().expect("parent")).expect("module dir");
        fs::write(path, text).expect("source file");
    }
    dir
}

/// The arrows of `graph` as (from, to), paths under the crate's `src/`.
fn arrows(graph: &Graph) -> BTreeSet<(String, String)> {
    let short = |p: &str| p.trim_start_matches("crates/p/src/").to_owned();
    graph
        .imports
        .iter()
        .map(|i| (short(&i.from), short(&i.to)))
        .collect()
}

fn arrow(from: &str, to: &str) -> (String, String) {
    (from.to_owned(), to.to_owned())
}

fn graph_of(files: &[(&str, &str)]) -> Graph {
    let dir = fixture(files);
    workspace_graph(dir.path())
}

/// Asserts that the crate of `files` has exactly one arrow, `from` -> `to`.
fn assert_one_arrow(files: &[(&str, &str)], from: &str, to: &str) {
    assert_eq!(arrows(&graph_of(files)), BTreeSet::from([arrow(from, to)]));
}

#[test]
fn crate_super_and_self_paths_resolve_to_the_file_of_the_module_they_reach() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub mod inner;\npub struct A;\n"),
        (
            "a/inner.rs",
            "pub struct I;\nfn f() { let _ = super::A; let _ = self::g; }\nfn g() {}\n",
        ),
        (
            "b.rs",
            "use crate::a::inner::I;\nfn f() -> crate::a::A { crate::a::A }\n",
        ),
    ]);
    let arrows = arrows(&graph);
    assert!(arrows.contains(&arrow("b.rs", "a/inner.rs")), "{arrows:?}");
    assert!(arrows.contains(&arrow("b.rs", "a.rs")), "{arrows:?}");
    assert!(arrows.contains(&arrow("a/inner.rs", "a.rs")), "{arrows:?}");
    assert!(!arrows.iter().any(|(f, t)| f == t), "{arrows:?}");
}

#[test]
fn a_reexported_name_imports_the_reexporting_file_and_is_defined_behind_it() {
    let dir = fixture(&[
        ("lib.rs", "mod x;\nmod h;\npub use x::Xa;\n"),
        ("x/mod.rs", "mod xa;\npub use xa::Xa;\n"),
        ("x/xa.rs", "pub struct Xa;\n"),
        ("h.rs", "use crate::x::Xa;\nfn f() -> crate::Xa { Xa }\n"),
    ]);
    let graph = workspace_graph(dir.path());
    let arrows = arrows(&graph);
    assert!(arrows.contains(&arrow("h.rs", "x/mod.rs")), "{arrows:?}");
    assert!(arrows.contains(&arrow("h.rs", "lib.rs")), "{arrows:?}");
    assert!(!arrows.contains(&arrow("h.rs", "x/xa.rs")), "{arrows:?}");
    let through_root = graph
        .imports
        .iter()
        .find(|i| i.from.ends_with("h.rs") && i.to.ends_with("lib.rs"))
        .expect("h imports the root");
    assert_eq!(through_root.defined_in, "crates/p/src/x/xa.rs");
}

#[test]
fn an_item_of_an_inline_module_belongs_to_its_file() {
    assert_one_arrow(
        &[
            ("lib.rs", "mod f;\nmod g;\n"),
            ("f.rs", "use crate::g::inner::Gi;\npub struct F;\n"),
            ("g.rs", "pub mod inner { pub struct Gi; }\n"),
        ],
        "f.rs",
        "g.rs",
    );
}

#[test]
fn a_use_alias_and_a_declared_module_name_start_paths() {
    let graph = graph_of(&[
        (
            "main.rs",
            "mod lim;\nmod pipe;\nfn main() { lim::reserve::Reserve::new(); }\n",
        ),
        ("lim.rs", "pub mod reserve;\n"),
        (
            "lim/reserve.rs",
            "pub struct Reserve;\nimpl Reserve { pub fn new() {} }\n",
        ),
        (
            "pipe.rs",
            "use crate::lim as l;\nfn f() { l::reserve::Reserve::new(); }\n",
        ),
    ]);
    let arrows = arrows(&graph);
    assert!(
        arrows.contains(&arrow("main.rs", "lim/reserve.rs")),
        "{arrows:?}"
    );
    assert!(arrows.contains(&arrow("pipe.rs", "lim.rs")), "{arrows:?}");
    assert!(
        arrows.contains(&arrow("pipe.rs", "lim/reserve.rs")),
        "{arrows:?}"
    );
}

#[test]
fn paths_in_macro_calls_count_but_dollar_crate_does_not() {
    assert_one_arrow(
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "pub const N: usize = 1;\n"),
            ("b.rs", "fn f() { assert_eq!(crate::a::N, 1); }\n"),
            ("c.rs", "macro_rules! m { () => { $crate::a::N }; }\n"),
        ],
        "b.rs",
        "a.rs",
    );
}

#[test]
fn test_only_code_comments_strings_and_visibility_import_nothing() {
    let graph = graph_of(&[
        ("lib.rs", "mod d;\nmod e;\n"),
        (
            "d.rs",
            "//! Uses [`crate::e::E`] in words only.\n/// See `crate::e::E`.\npub(in crate::d) struct D;\nconst S: &str = \"crate::e::E\";\n#[cfg(test)]\nmod tests { use crate::e::E; }\n#[cfg(all(test, feature = \"x\"))]\nfn t() { crate::e::f(); }\n",
        ),
        ("e.rs", "pub struct E;\npub fn f() {}\n"),
    ]);
    assert_eq!(arrows(&graph), BTreeSet::new());
}

#[test]
fn a_glob_import_imports_the_module_file() {
    assert_one_arrow(
        &[
            ("lib.rs", "mod b;\nmod c;\n"),
            ("b.rs", "pub fn b() {}\n"),
            ("c.rs", "use crate::b::*;\nfn f() { b(); }\n"),
        ],
        "c.rs",
        "b.rs",
    );
}

#[test]
fn a_path_attribute_and_a_mod_rs_are_followed_to_their_files() {
    let graph = graph_of(&[
        (
            "lib.rs",
            "#[path = \"../shared/common.rs\"]\nmod common;\nmod q;\n",
        ),
        ("../shared/common.rs", "pub fn c() { crate::q::r::f(); }\n"),
        ("q/mod.rs", "pub mod r;\n"),
        ("q/r.rs", "pub fn f() {}\n"),
    ]);
    let arrows = arrows(&graph);
    assert!(
        arrows.contains(&arrow("crates/p/shared/common.rs", "q/r.rs")),
        "{arrows:?}"
    );
}

#[test]
fn a_file_and_the_modules_nested_in_it_are_no_circle() {
    let graph = graph_of(&[
        (
            "lib.rs",
            "mod a;\npub struct Root;\nfn r() { a::sub::S; }\n",
        ),
        ("a.rs", "pub mod sub;\npub struct T;\nfn f() { sub::S; }\n"),
        (
            "a/sub.rs",
            "pub struct S;\nfn g() { super::T; crate::Root; }\n",
        ),
    ]);
    assert_eq!(graph.imports.len(), 4, "{:?}", graph.imports);
    assert!(circles(&graph).is_empty());
}

#[test]
fn a_circle_through_three_files_is_one_circle_with_its_names() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "use crate::c::C;\npub struct B;\n"),
        ("c.rs", "pub struct C(crate::a::A);\n"),
        ("d.rs", "use crate::a::A;\n"),
    ]);
    let found = circles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    let ties: BTreeSet<(&str, &str, Vec<&str>)> = found[0]
        .iter()
        .map(|i| {
            (
                i.from.trim_start_matches("crates/p/src/"),
                i.to.trim_start_matches("crates/p/src/"),
                i.names.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        ties,
        BTreeSet::from([
            ("a.rs", "b.rs", vec!["B"]),
            ("b.rs", "c.rs", vec!["C"]),
            ("c.rs", "a.rs", vec!["A"]),
        ])
    );
}

#[test]
fn the_core_layers_follow_reexports_and_leave_out_the_root() {
    let dir = fixture(&[
        ("lib.rs", "mod error;\nmod limit;\npub use error::Error;\n"),
        ("error.rs", "pub struct Error;\n"),
        ("limit/mod.rs", "mod bucket;\n"),
        (
            "limit/bucket.rs",
            "fn f() -> crate::Error { crate::Error }\n",
        ),
    ]);
    let layers = top_module_graph(&workspace_graph(dir.path()), "crates/p/src/");
    assert_eq!(layers["limit"], BTreeSet::from(["error".to_owned()]));
    assert!(layers["lib"].is_empty(), "{layers:?}");
}

/// The loop the provider crates had: a transport naming its clients, which name it back.
#[test]
fn a_reintroduced_transport_decision_loop_fails_the_check() {
    let dir = fixture(&[
        ("lib.rs", "//! Provider.\nmod decision;\nmod transport;\n"),
        (
            "transport.rs",
            "//! Transport.\nuse crate::decision::OpenAiDecision;\npub(crate) struct Endpoint;\npub(crate) fn decide() -> OpenAiDecision { OpenAiDecision }\n",
        ),
        (
            "decision.rs",
            "//! Decision.\nuse crate::transport::Endpoint;\npub(crate) struct OpenAiDecision;\npub(crate) fn at(_: Endpoint) {}\n",
        ),
    ]);
    let problems = crate::tidy::check(dir.path());
    let circle: Vec<&String> = problems.iter().filter(|p| p.contains("circle")).collect();
    assert_eq!(circle.len(), 1, "{problems:?}");
    assert!(
        circle[0]
            .contains("crates/p/src/transport.rs -> crates/p/src/decision.rs (OpenAiDecision)")
            && circle[0]
                .contains("crates/p/src/decision.rs -> crates/p/src/transport.rs (Endpoint)"),
        "{}",
        circle[0]
    );
    fs::write(
        dir.path().join("crates/p/src/decision.rs"),
        "//! Decision.\npub(crate) struct OpenAiDecision;\n",
    )
    .expect("rewrite");
    let problems = crate::tidy::check(Path::new(dir.path()));
    assert!(
        problems.iter().all(|p| !p.contains("circle")),
        "{problems:?}"
    );
}
