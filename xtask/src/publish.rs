//! The `test-all` step that keeps every library crate publishable (`docs/reliability.md`,
//! "Publishing"): `cargo publish --workspace --dry-run --no-verify` packages each crate
//! not marked `publish = false` in dependency order, checking its manifest (metadata,
//! no path-only dependency, versions that resolve), then each package's file list
//! (`cargo package --list -p NAME`) is checked here: its `README.md` and license files are
//! in it, and every file its `src/` or `build.rs` reads with `include_str!`,
//! `include_bytes!` or `include!` is in it. That is what `--no-verify` skips compiling
//! for: a file outside the package (`include_str!("../../other/x.toml")`) would break
//! every build from crates.io, and compiling all the packages again in `target/package`
//! took minutes on two cores.
//!
//! Outside CI (`CI` unset) the dry run passes `--allow-dirty`: a working tree with
//! uncommitted edits is the normal case there, and CI checks a clean clone strictly.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::summary::Outcome;
use crate::{cargo, tools, workspace_root};

/// Files every published package carries, beside its sources.
const REQUIRED_FILES: &[&str] = &["README.md", "LICENSE-MIT", "LICENSE-APACHE"];

/// The macros whose string literal names a file read at compile time.
const INCLUDE_MACROS: &[&str] = &["include_str!(", "include_bytes!(", "include!("];

/// Runs the dry run, then the file-list checks; prints what is wrong.
pub(crate) fn publish_step() -> Outcome {
    let mut args = vec!["publish", "--workspace", "--dry-run", "--no-verify"];
    if !tools::in_ci() {
        args.push("--allow-dirty");
    }
    println!(
        "\n==> xtask test-all: publish dry run (cargo {})",
        args.join(" ")
    );
    let root = workspace_root();
    let dry_run = Command::new(cargo())
        .current_dir(&root)
        .args(&args)
        .status()
        .is_ok_and(|s| s.success());
    let problems = package_problems(&root);
    for problem in &problems {
        eprintln!("publish: {problem}");
    }
    Outcome::from_ok(dry_run && problems.is_empty())
}

/// What is wrong in the file lists of the workspace's publishable crates (`crates/*`
/// without `publish = false`).
pub(crate) fn package_problems(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for dir in publishable_crates(root) {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = Command::new(cargo())
            .current_dir(root)
            .args(["package", "--list", "--allow-dirty", "-p", &name])
            .output();
        let listed: Vec<String> = match out {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect(),
            Ok(out) => {
                problems.push(format!(
                    "cargo package --list -p {name} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                continue;
            }
            Err(e) => {
                problems.push(format!("cargo package --list could not run: {e}"));
                continue;
            }
        };
        problems.extend(list_problems(&name, &listed, |file| {
            fs::read_to_string(dir.join(file)).ok()
        }));
    }
    problems
}

/// The directories of `crates/*` whose manifest does not say `publish = false`.
fn publishable_crates(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root.join("crates")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|dir| {
            fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|m| {
                !m.lines()
                    .any(|l| l.split('#').next().unwrap_or("").trim() == "publish = false")
            })
        })
        .collect();
    dirs.sort();
    dirs
}

/// What is wrong in package `name`'s file list `listed` (paths relative to the package
/// root, as `cargo package --list` prints them); `read` reads a listed file.
fn list_problems(
    name: &str,
    listed: &[String],
    read: impl Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for required in REQUIRED_FILES {
        if !listed.iter().any(|f| f == required) {
            problems.push(format!(
                "{name}: the package has no {required}; add it to the crate's directory (the license files as links to the root's)"
            ));
        }
    }
    let compiled = listed
        .iter()
        .filter(|f| f.ends_with(".rs") && (f.starts_with("src/") || f.as_str() == "build.rs"));
    for file in compiled {
        let Some(source) = read(file) else { continue };
        for include in included_files(&source) {
            match resolve(file, &include) {
                Some(path) if listed.contains(&path) => {}
                _ => problems.push(format!(
                    "{name}: {file} reads \"{include}\", which is not in the package (`cargo package --list -p {name}`): a build from crates.io would fail; move the file into the crate"
                )),
            }
        }
    }
    problems
}

/// The string literals given to `include_str!`, `include_bytes!` and `include!` in
/// `source` (a path built by `concat!` or `env!` is not a literal and is not listed).
fn included_files(source: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        for mac in INCLUDE_MACROS {
            let mut rest = code;
            while let Some(at) = rest.find(mac) {
                rest = &rest[at + mac.len()..];
                if let Some(literal) = rest.trim_start().strip_prefix('"')
                    && let Some((path, _)) = literal.split_once('"')
                {
                    files.push(path.to_owned());
                }
            }
        }
    }
    files
}

/// `include`, read from the package file `file`, as a path from the package root; `None`
/// when it leaves the package (or is absolute).
fn resolve(file: &str, include: &str) -> Option<String> {
    let mut parts: Vec<String> = Path::new(file)
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for component in Path::new(include).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(files: &[&str]) -> Vec<String> {
        files.iter().map(|f| (*f).to_owned()).collect()
    }

    #[test]
    fn includes_are_read_from_literals_and_not_from_comments() {
        let source = "const A: &str = include_str!(\"demo.toml\");\n\
                      static B: &[u8] = include_bytes!( \"../data/b.bin\" );\n\
                      // include_str!(\"commented.md\")\n\
                      include!(concat!(env!(\"OUT_DIR\"), \"/gen.rs\"));\n";
        assert_eq!(included_files(source), ["demo.toml", "../data/b.bin"]);
    }

    #[test]
    fn a_path_is_resolved_from_the_including_file_and_none_outside_the_package() {
        assert_eq!(
            resolve("src/setup.rs", "demo.toml").as_deref(),
            Some("src/demo.toml")
        );
        assert_eq!(
            resolve("src/a/b.rs", "../../README.md").as_deref(),
            Some("README.md")
        );
        assert_eq!(resolve("src/main.rs", "../../other/src/demo.toml"), None);
        assert_eq!(resolve("src/main.rs", "/etc/passwd"), None);
    }

    #[test]
    fn a_source_reading_a_file_outside_the_package_is_a_problem() {
        let listed = list(&[
            "Cargo.toml",
            "README.md",
            "LICENSE-MIT",
            "LICENSE-APACHE",
            "src/main.rs",
        ]);
        let problems = list_problems("x", &listed, |_| {
            Some("const D: &str = include_str!(\"../../cli/src/demo.toml\");".to_owned())
        });
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("../../cli/src/demo.toml"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_source_reading_a_packaged_file_and_tests_reading_anything_are_fine() {
        let listed = list(&[
            "README.md",
            "LICENSE-MIT",
            "LICENSE-APACHE",
            "src/lib.rs",
            "src/limiter.lua",
            "tests/docs.rs",
        ]);
        let problems = list_problems("x", &listed, |file| match file {
            "src/lib.rs" => Some("const L: &str = include_str!(\"limiter.lua\");".to_owned()),
            _ => Some("const P: &str = include_str!(\"../../../docs/x.md\");".to_owned()),
        });
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_package_without_its_readme_or_license_files_is_a_problem() {
        let problems = list_problems("x", &list(&["Cargo.toml", "src/lib.rs"]), |_| None);
        assert_eq!(problems.len(), REQUIRED_FILES.len(), "{problems:?}");
        assert!(problems[0].contains("README.md"), "{problems:?}");
    }

    #[test]
    fn the_workspaces_publishable_crates_package_what_they_read() {
        let root = workspace_root();
        let crates = publishable_crates(&root);
        assert!(
            crates.iter().any(|c| c.ends_with("tollgate")),
            "the core crate is publishable: {crates:?}"
        );
        assert!(
            !crates.iter().any(|c| c.ends_with("tollgate-simulate")),
            "tollgate-simulate reads tollgate-cli's demo catalog and is not published"
        );
        let problems = package_problems(&root);
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
