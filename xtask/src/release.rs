//! The `tollgate` binary is built without tokio's `test-util`: the feature lets code
//! pause and step tokio's clock (`tokio::time::pause`), test machinery that a production
//! binary must not carry. `tollgate simulate`'s paused clock lives in the
//! `tollgate-simulate` binary instead.
//!
//! "The release binary" is what `cargo build --release -p tollgate-cli` and
//! `cargo install --path crates/tollgate-cli` build: that package alone, its normal
//! dependencies (cargo unifies features over every package a build selects, so a
//! workspace-wide `cargo build` also turns on what `tollgate-testkit` and
//! `tollgate-simulate` ask for). Two checks:
//!
//! - `cargo tree -p tollgate-cli -e normal` (about half a second): tokio's features in
//!   that build, external crates included, must not contain `test-util`;
//! - every crate's manifest, so that the failure names the file: no `[dependencies]`
//!   (nor `[target.….dependencies]`, `[build-dependencies]`, `[features]`, the root's
//!   `[workspace.dependencies]`) turns on `tokio/test-util`, except the crates in
//!   [`TEST_UTIL_CRATES`]. `[dev-dependencies]` may.

use std::fs;
use std::path::Path;
use std::process::Command;

/// Crates whose normal dependencies may turn on `tokio/test-util`, with why; no product
/// crate depends on them.
const TEST_UTIL_CRATES: &[(&str, &str)] = &[
    (
        "tollgate-testkit",
        "the test kit: its checks run on the paused clock",
    ),
    (
        "tollgate-simulate",
        "`tollgate simulate`'s paused clock, a binary apart from `tollgate`",
    ),
];

/// The package of the `tollgate` binary.
const RELEASE_PACKAGE: &str = "tollgate-cli";

/// Runs both checks over the workspace at `root`.
pub(crate) fn check(root: &Path, problems: &mut Vec<String>) {
    check_manifests(root, problems);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["tree", "-p", RELEASE_PACKAGE, "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}|{f}"])
        .output();
    match out {
        Ok(out) if out.status.success() => {
            problems.extend(tree_problems(&String::from_utf8_lossy(&out.stdout)));
        }
        Ok(out) => problems.push(format!(
            "cargo tree -p {RELEASE_PACKAGE} failed, so the release binary's features are unchecked: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => problems.push(format!(
            "cargo tree could not run, so the release binary's features are unchecked: {e}"
        )),
    }
}

/// What is wrong in `cargo tree --prefix none --format '{p}|{f}'` output: tokio built
/// with `test-util`, or no tokio at all (the check would prove nothing).
fn tree_problems(tree: &str) -> Vec<String> {
    let tokio: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_once('|'))
        .filter(|(package, _)| package.split_whitespace().next() == Some("tokio"))
        .map(|(_, features)| features.split_whitespace().next().unwrap_or(""))
        .collect();
    if tokio.is_empty() {
        return vec![format!(
            "cargo tree -p {RELEASE_PACKAGE} lists no tokio: the release binary's test-util check proves nothing; fix xtask/src/release.rs"
        )];
    }
    if tokio.iter().any(|f| f.split(',').any(|f| f == "test-util")) {
        return vec![format!(
            "the `tollgate` binary (cargo build --release -p {RELEASE_PACKAGE}) builds tokio with `test-util`: a crate in its normal dependencies turns it on (see `cargo tree -p {RELEASE_PACKAGE} -e normal,features -i tokio`); move it to [dev-dependencies]"
        )];
    }
    Vec::new()
}

fn check_manifests(root: &Path, problems: &mut Vec<String>) {
    let mut manifests = vec![("Cargo.toml".to_owned(), root.join("Cargo.toml"))];
    if let Ok(entries) = fs::read_dir(root.join("crates")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !TEST_UTIL_CRATES.iter().any(|(c, _)| *c == name) {
                let rel = format!("crates/{name}/Cargo.toml");
                manifests.push((rel, entry.path().join("Cargo.toml")));
            }
        }
    }
    manifests.sort();
    for (rel, path) in manifests {
        if let Ok(text) = fs::read_to_string(&path) {
            problems.extend(manifest_problems(&text).into_iter().map(|table| {
                format!(
                    "{rel}: `{table}` turns on tokio's `test-util`, which the `tollgate` binary must be built without; put it under [dev-dependencies] (or, for a crate of tests only, list it in TEST_UTIL_CRATES in xtask/src/release.rs)"
                )
            }));
        }
    }
}

/// The tables of a manifest that turn on `tokio/test-util` outside dev-dependencies.
fn manifest_problems(manifest: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut table = String::new();
    // The key the current line belongs to (a value may span lines).
    let mut key = String::new();
    for line in manifest.lines() {
        let l = line.split_once('#').map_or(line, |(code, _)| code).trim();
        if let Some(header) = l.strip_prefix('[') {
            table = header.trim_end_matches(']').trim().to_owned();
            key.clear();
            continue;
        }
        if let Some((k, _)) = l.split_once('=')
            && !k.contains('"')
        {
            key = k.trim().to_owned();
        }
        let normal = !table.contains("dev-dependencies")
            && (table.ends_with("dependencies")
                || table.ends_with("dependencies.tokio")
                || table == "features");
        let names_tokio = table.ends_with(".tokio") || key == "tokio" || table == "features";
        let enables = if table == "features" {
            l.contains("\"tokio/test-util\"") || l.contains("\"tokio?/test-util\"")
        } else {
            l.contains("\"test-util\"")
        };
        if normal && names_tokio && enables && !found.contains(&table) {
            found.push(table.clone());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokio_with_test_util_in_the_release_tree_is_a_problem() {
        let tree = "tollgate-cli v0.1.0 (/w)|default\ntokio v1.54.1|rt,test-util,time\n";
        assert_eq!(tree_problems(tree).len(), 1);
        let tree = "tollgate-cli v0.1.0 (/w)|default\ntokio v1.54.1|rt,time\n";
        assert!(tree_problems(tree).is_empty());
        assert!(tree_problems("tollgate-cli v0.1.0|default\n")[0].contains("no tokio"));
    }

    #[test]
    fn test_util_in_normal_dependencies_or_features_is_found_but_not_in_dev_dependencies() {
        let manifest = r#"
[dependencies]
tokio = { workspace = true, features = ["rt",
    "test-util"] }
serde = "1"

[dev-dependencies]
tokio = { workspace = true, features = ["test-util"] }

[target.'cfg(unix)'.dependencies.tokio]
features = ["test-util"]

[features]
paused = ["tokio/test-util"]
"#;
        assert_eq!(
            manifest_problems(manifest),
            [
                "dependencies",
                "target.'cfg(unix)'.dependencies.tokio",
                "features"
            ]
        );
        let fine = "[dependencies]\ntokio = { workspace = true }\n# \"test-util\"\n\
                    [dev-dependencies]\ntokio = { workspace = true, features = [\"test-util\"] }\n";
        assert!(manifest_problems(fine).is_empty());
    }

    #[test]
    fn the_workspaces_tollgate_binary_is_built_without_test_util() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut problems = Vec::new();
        check(root, &mut problems);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
