//! Every catalog in the book loads.
//!
//! - The provider guide (`docs/providers.md` and every page under `docs/providers/`,
//!   listed when the test runs, so a page added there is covered without being named
//!   here): **every** ```toml block is parsed as a catalog. A block that is not a whole
//!   catalog (only `[models.ID.options]`, a keys file) says so in its info string,
//!   ```` ```toml,fragment ````, and is skipped; an unmarked block that does not load fails
//!   the test, naming the file and the line its fence opens on.
//! - The other pages of `docs/SUMMARY.md`: each ```toml block that defines a model (a
//!   `[models.…]` table with a `provider`) loads (their other TOML is gateway or keys
//!   configuration, checked by the gateway's own tests).
//!
//! Catalogs are checked against every provider crate linked here and the keys of
//! [`UNLINKED`], so an example that names a field the catalog rejects, leaves out one it
//! requires, or names a key no crate registers fails here.

use std::path::{Path, PathBuf};

use tollgate::Catalog;
use tollgate::catalog::KnownProviders;
use tollgate_anthropic as _;
use tollgate_bedrock as _;
use tollgate_fake as _;
use tollgate_gemini as _;
use tollgate_ollama as _;
use tollgate_openai as _;

/// Provider keys the book's catalogs may name whose crate is not linked into this test
/// (being written, or not a dependency of `tests/book`): key, crate, whether its models
/// need a credential. A page naming a key that is neither linked nor here fails with
/// `UnknownProvider`: link the crate in `tests/book/Cargo.toml` once it registers the
/// key, or add the key here while it is being written.
const UNLINKED: &[(&str, &str, bool)] = &[
    ("azure-openai", "tollgate-azure", false),
    ("cohere", "tollgate-cohere", true),
    ("deepseek", "tollgate-deepseek", true),
    ("fireworks", "tollgate-openai-like", true),
    ("groq", "tollgate-groq", true),
    ("mistral", "tollgate-mistral", true),
    ("perplexity", "tollgate-perplexity", true),
    ("together", "tollgate-together", true),
    ("xai", "tollgate-xai", true),
];

/// The info-string attribute that marks a ```toml block as not a whole catalog.
const FRAGMENT: &str = "fragment";

/// The keys a catalog of the book may name: every linked provider, then [`UNLINKED`].
fn known() -> KnownProviders {
    UNLINKED.iter().fold(
        KnownProviders::linked(),
        |known, &(key, krate, credential)| {
            if known.contains(key) {
                known // a registration, once linked, is what counts
            } else {
                known.with(key, krate, credential)
            }
        },
    )
}

/// The docs directory.
fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// The provider guide under `docs`: `providers.md`, then every `.md` file in
/// `providers/`, sorted.
fn provider_pages(docs: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(docs.join("providers"))
        .expect("docs/providers")
        .map(|entry| entry.expect("an entry of docs/providers").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, docs.join("providers.md"));
    pages
}

/// The pages `docs/SUMMARY.md` lists.
fn summary_pages(docs: &Path) -> Vec<PathBuf> {
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).expect("SUMMARY.md");
    summary
        .lines()
        .filter_map(|l| {
            l.split_once("](")
                .and_then(|(_, rest)| rest.split_once(')'))
        })
        .map(|(target, _)| docs.join(target))
        .collect()
}

/// One ```toml block: the 1-based line of its opening fence, whether it is marked a
/// fragment, and its text.
#[derive(Debug)]
struct Snippet {
    line: usize,
    fragment: bool,
    toml: String,
}

impl Snippet {
    /// Whether the block defines a model: a `[models.…]` table with a `provider`.
    fn defines_a_model(&self) -> bool {
        let lines = || self.toml.lines().map(str::trim_start);
        lines().any(|l| l.starts_with("[models.")) && lines().any(|l| l.starts_with("provider"))
    }
}

/// The ```toml blocks of `text`. Other fenced blocks are stepped over whole (a block
/// closes only at a fence of its own marker, at least as long), so TOML quoted inside a
/// Rust or Markdown block is not taken for a snippet.
fn toml_snippets(text: &str) -> Vec<Snippet> {
    let fence = |line: &str| -> Option<(char, usize)> {
        let marker = line.chars().next().filter(|c| matches!(c, '`' | '~'))?;
        let length = line.chars().take_while(|c| *c == marker).count();
        // A backtick fence's info string holds no backtick (CommonMark): "```` ``` ````"
        // at the start of a line is inline code.
        let info = &line[length..];
        (length >= 3 && !(marker == '`' && info.contains('`'))).then_some((marker, length))
    };
    let mut out = Vec::new();
    // The open block: its fence, and the snippet when it is TOML.
    let mut open: Option<((char, usize), Option<Snippet>)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        match (&mut open, fence(trimmed)) {
            (None, Some((marker, length))) => {
                let info = &trimmed[length..];
                let mut attributes = info.split([',', ' ']).filter(|a| !a.is_empty());
                let snippet = (attributes.next() == Some("toml")).then(|| Snippet {
                    line: i + 1,
                    fragment: attributes.any(|a| a == FRAGMENT),
                    toml: String::new(),
                });
                open = Some(((marker, length), snippet));
            }
            (Some(((marker, length), _)), Some((m, l)))
                if m == *marker && l >= *length && trimmed.chars().all(|c| c == m) =>
            {
                out.extend(open.take().and_then(|(_, snippet)| snippet));
            }
            (Some((_, Some(snippet))), _) => {
                snippet.toml.push_str(line);
                snippet.toml.push('\n');
            }
            _ => {}
        }
    }
    if let Some((_, Some(snippet))) = open {
        panic!(
            "the ```toml block opened on line {} is never closed",
            snippet.line
        );
    }
    out
}

/// What checking some pages found: how many catalogs loaded and what failed, each
/// failure as `path:line: reason` with the path relative to the docs directory.
#[derive(Debug, Default)]
struct Report {
    loaded: usize,
    failures: Vec<String>,
}

impl Report {
    /// Checks the ```toml blocks of `page`: every unmarked one when `strict`, else those
    /// that define a model. A block marked a fragment is skipped, unless it is a whole
    /// catalog defining a model (then the mark only hides it from this test).
    fn check(&mut self, docs: &Path, page: &Path, strict: bool, known: &KnownProviders) {
        let text = std::fs::read_to_string(page).expect("a page of the book");
        let name = page
            .strip_prefix(docs)
            .unwrap_or(page)
            .display()
            .to_string();
        for snippet in toml_snippets(&text) {
            let at = format!("{name}:{}", snippet.line);
            let loaded = Catalog::from_toml_str_with(&snippet.toml, known);
            match (snippet.fragment, loaded) {
                (true, Ok(_)) if snippet.defines_a_model() => self.failures.push(format!(
                    "{at}: marked `{FRAGMENT}`, but it is a whole catalog: remove the mark"
                )),
                (true, _) => {}
                (false, Ok(_)) => self.loaded += 1,
                (false, Err(e)) if strict || snippet.defines_a_model() => {
                    self.failures.push(format!(
                        "{at}: {e} (a block that is not a whole catalog is ```toml,{FRAGMENT})"
                    ))
                }
                (false, Err(_)) => {}
            }
        }
    }

    /// Checks the provider guide under `docs` strictly.
    fn provider_guide(docs: &Path, known: &KnownProviders) -> Self {
        let mut report = Report::default();
        for page in provider_pages(docs) {
            report.check(docs, &page, true, known);
        }
        report
    }
}

#[test]
fn every_catalog_in_the_book_loads() {
    let docs = docs();
    let known = known();
    let guide = provider_pages(&docs);
    let mut report = Report::default();
    for page in summary_pages(&docs) {
        if !guide.iter().any(|p| p == &page) {
            report.check(&docs, &page, false, &known);
        }
    }
    assert!(
        report.loaded > 3,
        "only {} catalogs found: is the scan broken?",
        report.loaded
    );
    assert!(
        report.failures.is_empty(),
        "catalogs in the book that do not load:\n{}",
        report.failures.join("\n")
    );
}

#[test]
fn every_toml_snippet_of_the_provider_guide_loads_or_is_marked_a_fragment() {
    let docs = docs();
    let report = Report::provider_guide(&docs, &known());
    let pages = provider_pages(&docs);
    assert!(
        pages.len() > 4 && report.loaded > pages.len(),
        "only {} catalogs on {} pages: is the scan broken?",
        report.loaded,
        pages.len()
    );
    assert!(
        report.failures.is_empty(),
        "snippets of the provider guide that do not load:\n{}",
        report.failures.join("\n")
    );
}

/// A docs directory under the test's temporary directory holding `providers.md` and the
/// provider pages `pages` (name, text).
fn docs_with(test: &str, pages: &[(&str, &str)]) -> PathBuf {
    let docs = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    let _ = std::fs::remove_dir_all(&docs);
    std::fs::create_dir_all(docs.join("providers")).unwrap();
    let catalog = "```toml\n[models.m]\nprovider = \"fake\"\nmax_output_tokens = 8\n```\n";
    std::fs::write(docs.join("providers.md"), format!("# Guide\n\n{catalog}")).unwrap();
    for (name, text) in pages {
        std::fs::write(docs.join("providers").join(name), text).unwrap();
    }
    docs
}

/// Asserts that `report` failed exactly at `expected`: each a `path:line` and a text the
/// failure holds.
fn assert_failures(report: &Report, expected: &[(&str, &str)]) {
    assert_eq!(
        report.failures.len(),
        expected.len(),
        "{:?}",
        report.failures
    );
    for (failure, (at, holds)) in report.failures.iter().zip(expected) {
        assert!(
            failure.starts_with(&format!("{at}: ")) && failure.contains(holds),
            "expected {at} saying {holds}, got: {failure}"
        );
    }
}

#[test]
fn a_page_added_under_docs_providers_is_checked_without_being_listed_anywhere() {
    let page = "# acme\n\n```toml\n[models.a]\nprovider = \"acme\"\nmax_output_tokens = 8\n```\n";
    let docs = docs_with("a_page_added_under_docs_providers", &[("acme.md", page)]);
    let report = Report::provider_guide(&docs, &known());
    assert_failures(&report, &[("providers/acme.md:3", "`acme`")]);
    let known = known().with("acme", "tollgate-acme", false);
    let report = Report::provider_guide(&docs, &known);
    assert_eq!((report.loaded, report.failures.len()), (2, 0), "{report:?}");
}

#[test]
fn an_unmarked_snippet_that_does_not_load_fails_naming_its_file_and_line() {
    let options_only = "[models.m.options]\nbase_url = \"http://127.0.0.1:1\"\n";
    let old_embeddings = "[embeddings]\nwidth = 8\n[models.e]\nprovider = \"fake\"\n\
                          kind = \"embeddings\"\n[models.e.embeddings]\nnative_width = 8\n";
    let page =
        format!("# p\n\n```toml\n{options_only}```\n\ntext\n\n```toml\n{old_embeddings}```\n");
    let docs = docs_with("an_unmarked_snippet", &[("p.md", &page)]);
    let report = Report::provider_guide(&docs, &known());
    let expected = [
        ("providers/p.md:3", "field `provider` is required"),
        (
            "providers/p.md:10",
            "field `embeddings` is not a known field",
        ),
    ];
    assert_failures(&report, &expected);
}

#[test]
fn a_snippet_marked_fragment_is_skipped_unless_it_is_a_whole_catalog() {
    let page = "# p\n\n```toml,fragment\n[models.m.options]\nbase_url = \"x\"\n```\n\n\
                ```toml,fragment\n[models.w]\nprovider = \"fake\"\nmax_output_tokens = 8\n```\n";
    let docs = docs_with("a_snippet_marked_fragment", &[("p.md", page)]);
    let report = Report::provider_guide(&docs, &known());
    assert_eq!(report.loaded, 1, "only providers.md's catalog: {report:?}");
    assert_failures(&report, &[("providers/p.md:8", "remove the mark")]);
}

#[test]
fn toml_quoted_inside_another_code_block_is_not_a_snippet() {
    // Inline code at the start of a line, a four-backtick Markdown block quoting a
    // ```toml block, a Rust block, then the page's one TOML snippet.
    let text = "```` ```toml ```` is inline code\n````markdown\n```toml\n[models.x]\n```\n````\n\
                ```rust\nlet t = \"```toml\";\n```\n\
                ```toml\n[embeddings]\nwidth = 1\n```\n";
    let snippets = toml_snippets(text);
    assert_eq!(snippets.len(), 1, "{snippets:?}");
    assert_eq!(
        (snippets[0].line, snippets[0].toml.as_str()),
        (10, "[embeddings]\nwidth = 1\n")
    );
}
