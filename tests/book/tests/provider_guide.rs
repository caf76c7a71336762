//! The provider guide's reading path stays true: it names every check of the contract
//! kit, read from the kit's sources when the test runs (a check added to the kit fails
//! here until the guide names it), and `docs/providers.md` sends the author to no source
//! file of the core and to none of the paths a provider crate must not import from.

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn guide() -> String {
    std::fs::read_to_string(root().join("docs/providers.md")).expect("docs/providers.md")
}

/// The guide's "Reading path" section: from its heading to the next `## ` heading.
fn reading_path(guide: &str) -> &str {
    let start = guide
        .find("\n## Reading path\n")
        .expect("docs/providers.md has a `## Reading path` section");
    let rest = &guide[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

/// The checks of the contract kit: every `pub async fn` of
/// `tollgate-testkit/src/provider/checks/*.rs`, as (file, name).
fn kit_checks() -> Vec<(String, String)> {
    let dir = root().join("crates/tollgate-testkit/src/provider/checks");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the kit's checks")
        .map(|e| e.expect("an entry of checks/").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut checks = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a checks file");
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("pub async fn ") {
                let check = rest.split(['(', '<']).next().unwrap_or_default();
                checks.push((name.clone(), check.to_owned()));
            }
        }
    }
    checks
}

#[test]
fn the_reading_path_names_every_check_of_the_contract_kit() {
    let guide = guide();
    let path = reading_path(&guide);
    let checks = kit_checks();
    assert!(
        checks.len() > 30,
        "only {} checks found: is the scan broken?",
        checks.len()
    );
    let missing: Vec<String> = checks
        .iter()
        .filter(|(_, check)| !path.contains(&format!("`{check}`")))
        .map(|(file, check)| format!("{check} ({file})"))
        .collect();
    assert!(
        missing.is_empty(),
        "checks of tollgate-testkit the reading path of docs/providers.md does not name:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_reading_path_names_the_pages_modules_kit_and_example_crates() {
    let guide = guide();
    let path = reading_path(&guide);
    for needed in [
        "`tollgate::provider`",
        "`tollgate::provider::http`",
        "`tollgate-testkit`",
        "WireScript",
        "provider_contract_tests!",
        "`examples/ollama`",
        "`examples/openai-like`",
        "`docs/providers/openai-like.md`",
        "(providers/openai.md)",
        "(providers/anthropic.md)",
    ] {
        assert!(
            path.contains(needed),
            "the reading path does not name {needed}"
        );
    }
}

#[test]
fn the_provider_guide_sends_the_author_to_no_core_source_file_or_application_path() {
    // The core's sources, and the modules a provider crate takes from `tollgate::provider`
    // instead (their paths stay for applications).
    let forbidden = [
        "crates/tollgate/src",
        "tollgate::wire::",
        "tollgate::pipeline::",
        "tollgate::http::",
        "tollgate::limit::",
        "tollgate::sse",
    ];
    let found: Vec<String> = guide()
        .lines()
        .enumerate()
        .flat_map(|(i, line)| {
            forbidden
                .iter()
                .filter(move |path| line.contains(*path))
                .map(move |path| format!("docs/providers.md:{}: `{path}`", i + 1))
        })
        .collect();
    assert!(
        found.is_empty(),
        "the provider guide names core sources or application paths (name the \
         `tollgate::provider` item instead):\n{}",
        found.join("\n")
    );
}
