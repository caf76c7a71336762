//! The table of first-party keys that the unknown-provider hint names crates from
//! (`tollgate::catalog::FIRST_PARTY`), checked against what every first-party provider
//! crate registers: all of them are linked into this test binary, so the table cannot
//! drift from the crates' own registrations.

use std::collections::BTreeSet;
use std::path::Path;

use tollgate::catalog::{FIRST_PARTY, KnownProviders};
use tollgate_anthropic as _;
use tollgate_azure as _;
use tollgate_bedrock as _;
use tollgate_cohere as _;
use tollgate_deepseek as _;
use tollgate_fake as _;
use tollgate_gemini as _;
use tollgate_groq as _;
use tollgate_mistral as _;
use tollgate_openai as _;
use tollgate_perplexity as _;
use tollgate_sim as _;
use tollgate_together as _;
use tollgate_xai as _;

/// Every (key, crate) registered in this binary, each crate as it named itself.
fn registered() -> BTreeSet<(String, String)> {
    let known = KnownProviders::linked();
    tollgate::provider::linked_providers()
        .iter()
        .map(|p| {
            let crate_name = known.crate_name(p.key()).expect("a linked key is known");
            (p.key().to_owned(), crate_name.to_owned())
        })
        .collect()
}

#[test]
fn the_first_party_table_is_exactly_what_the_first_party_crates_register() {
    let table: BTreeSet<(String, String)> = FIRST_PARTY
        .iter()
        .map(|(k, c)| ((*k).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(table, registered());
}

#[test]
fn every_provider_crate_in_the_workspace_is_linked_here() {
    // A crate under `crates/` whose sources register a provider is first-party: a new one
    // must be linked above (and so its keys enter the table).
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut registering = BTreeSet::new();
    for entry in std::fs::read_dir(&crates).expect("crates/") {
        let dir = entry.expect("an entry").path();
        let name = dir
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        if name != "tollgate" && registers_a_provider(&dir.join("src")) {
            registering.insert(name);
        }
    }
    let linked: BTreeSet<String> = registered().into_iter().map(|(_, c)| c).collect();
    assert_eq!(registering, linked);
}

fn registers_a_provider(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            registers_a_provider(&path)
        } else {
            path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path)
                    .is_ok_and(|t| t.contains("tollgate::register_provider!(|"))
        }
    })
}

#[test]
fn every_first_party_key_not_linked_gets_a_hint_naming_its_crate() {
    for (key, crate_name) in registered() {
        let hint = KnownProviders::hint_for(&key);
        assert!(
            hint.contains(&format!("`{crate_name}`"))
                && hint.contains(&format!("use {} as _;", crate_name.replace('-', "_"))),
            "{key}: {hint}"
        );
    }
}
