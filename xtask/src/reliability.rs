//! The reliability tasks (`docs/reliability.md`): the supply-chain check of `test-all`
//! (cargo-deny) and `cargo xtask fuzz`, coverage-guided fuzzing of the targets in `fuzz/`
//! (cargo-fuzz). Their tools are installed once, pinned, under `<target dir>/tools`
//! ([`crate::tools`]). `test-all` does not fuzz: it replays every target's committed corpus
//! as ordinary tests (`tests/fuzz-replay`, the `fuzz replay` step).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::summary::Outcome;
use crate::tools::{self, CARGO_FUZZ};
use crate::{cargo, workspace_root};

/// The fuzz targets, in the order they run (`fuzz/fuzz_targets/<name>.rs`).
pub(crate) const FUZZ_TARGETS: [&str; 11] = [
    "sse",
    "anthropic_response",
    "anthropic_stream",
    "openai_response",
    "openai_stream",
    "bedrock_eventstream",
    "bedrock_converse",
    "gemini_response",
    "gemini_stream",
    "catalog",
    "credentials",
];

/// cargo-fuzz's flags, the same for the build and every run so that a run never rebuilds:
/// no sanitizer (the workspace forbids `unsafe`; what is left to find is panics, overflow,
/// unbounded memory or time, all caught without one, and the targets run ~2x faster),
/// debug assertions on (arithmetic overflow panics).
const FUZZ_FLAGS: [&str; 3] = ["--sanitizer", "none", "--debug-assertions"];

/// The supply-chain step of `test-all`: `cargo deny --offline check bans licenses
/// sources` against `deny.toml`, with `deny` the cargo-deny binary (`None`: it could not
/// be had, which skips the step, or fails it under `CI=true`).
pub(crate) fn supply_chain(deny: Option<&Path>) -> Outcome {
    println!(
        "\n==> xtask test-all: supply chain (cargo deny --offline check bans licenses sources)"
    );
    let Some(deny) = deny else {
        println!("    cargo-deny is not installed and could not be");
        return if tools::in_ci() {
            Outcome::Failed
        } else {
            Outcome::Skipped
        };
    };
    Outcome::from_ok(
        Command::new(deny)
            .current_dir(workspace_root())
            .args(["--offline", "check", "bans", "licenses", "sources"])
            .status()
            .is_ok_and(|s| s.success()),
    )
}

/// `cargo xtask fuzz [--seconds N] [TARGET…]`: builds the fuzz targets and runs each (all
/// by default) for N seconds (default 60), continuing the corpus of earlier runs.
pub(crate) fn fuzz_task(args: &[String]) -> ExitCode {
    let mut seconds = 60;
    let mut targets = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => match args.next().and_then(|s| s.parse().ok()) {
                Some(n) => seconds = n,
                None => {
                    eprintln!("xtask fuzz: --seconds takes a whole number");
                    return ExitCode::FAILURE;
                }
            },
            name => match FUZZ_TARGETS.iter().find(|t| **t == name) {
                Some(target) => targets.push(*target),
                None => {
                    eprintln!(
                        "xtask fuzz: no target `{name}`; the targets: {}",
                        FUZZ_TARGETS.join(", ")
                    );
                    return ExitCode::FAILURE;
                }
            },
        }
    }
    if targets.is_empty() {
        targets = FUZZ_TARGETS.to_vec();
    }
    match fuzz_all(seconds, &targets) {
        Outcome::Failed => ExitCode::FAILURE,
        Outcome::Passed | Outcome::Skipped => ExitCode::SUCCESS,
    }
}

/// `cargo fuzz <args>` in `fuzz/`, with cargo-fuzz from the tools directory and the fuzz
/// crate's own target directory. The toolchain is the one running this task (stable
/// builds the targets: with `--sanitizer none` cargo-fuzz passes no `-Z` flag), or
/// `TOLLGATE_FUZZ_TOOLCHAIN` (e.g. `nightly`) when set.
fn cargo_fuzz(cargo_fuzz: &Path) -> Command {
    let root = workspace_root();
    let bin = cargo_fuzz
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&path));
    let mut command = match std::env::var("TOLLGATE_FUZZ_TOOLCHAIN") {
        Ok(toolchain) if !toolchain.is_empty() => {
            let mut c = Command::new("rustup");
            c.args(["run", &toolchain, "cargo"]);
            // The outer cargo's variables would point that cargo at this toolchain.
            for var in ["CARGO", "RUSTC", "RUSTDOC", "RUSTUP_TOOLCHAIN"] {
                c.env_remove(var);
            }
            c
        }
        _ => Command::new(cargo()),
    };
    command
        .arg("fuzz")
        .current_dir(root.join("fuzz"))
        .env("PATH", std::env::join_paths(paths).unwrap_or(path))
        .env("CARGO_TARGET_DIR", root.join("fuzz").join("target"));
    command
}

/// Builds the fuzz targets, then runs each in `targets` for `seconds`. The corpus each run
/// grows is kept in `fuzz/target/corpus/<target>` (the committed seeds in
/// `fuzz/corpus/<target>` are read, never written); a crash leaves its input in
/// `fuzz/artifacts/<target>/` and fails.
// Step timings are for the person reading the log.
#[allow(clippy::disallowed_methods)]
fn fuzz_all(seconds: u64, targets: &[&str]) -> Outcome {
    println!(
        "\n==> xtask: fuzz ({} targets, {seconds} s each; cargo fuzz)",
        targets.len()
    );
    let started = Instant::now();
    // libFuzzer itself is C++, built by libfuzzer-sys.
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned());
    let has_cxx = Command::new(&cxx)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_cxx {
        println!("==> fuzz SKIPPED: no C++ compiler (`{cxx}`) to build libFuzzer with");
        return Outcome::Skipped;
    }
    let Some(fuzz) = CARGO_FUZZ.get() else {
        println!("==> fuzz SKIPPED: cargo-fuzz is not installed and could not be");
        return Outcome::Skipped;
    };
    let built = cargo_fuzz(&fuzz)
        .arg("build")
        .args(FUZZ_FLAGS)
        .status()
        .is_ok_and(|s| s.success());
    println!(
        "    fuzz build {} in {:.1}s",
        if built { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if !built {
        return Outcome::Failed;
    }
    let root = workspace_root().join("fuzz");
    let mut failed = Vec::new();
    let mut table = String::from(
        "| target | executions | exec/s | result | with no crash, all runs |\n\
         |---|---:|---:|---|---:|\n",
    );
    // Two at a time on a machine with two cores or more: each target is one process.
    let jobs = std::env::var("TOLLGATE_FUZZ_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(2)))
        .max(1);
    for batch in targets.chunks(jobs) {
        let run_started = Instant::now();
        let children: Vec<_> = batch
            .iter()
            .map(|target| {
                let (mut command, log_path) = fuzz_run(&fuzz, &root, target, seconds);
                (*target, log_path, command.spawn().ok())
            })
            .collect();
        for (target, log_path, child) in children {
            let ok = child
                .and_then(|mut c| c.wait().ok())
                .is_some_and(|s| s.success());
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let runs = final_stat(&text, "stat::number_of_executed_units:");
            let rate = final_stat(&text, "stat::average_exec_per_sec:");
            let total = ok.then(|| add_to_total(&root, target, runs.unwrap_or(0)));
            let result = fuzz_result(ok, &text);
            println!(
                "    {target}: {} in {:.0}s, {} executions ({} exec/s)",
                if ok { "no crash" } else { result },
                run_started.elapsed().as_secs_f64(),
                runs.map_or("?".into(), |n| n.to_string()),
                rate.map_or("?".into(), |n| n.to_string()),
            );
            table.push_str(&format!(
                "| `{target}` | {} | {} | {} | {} |\n",
                runs.map_or("?".into(), |n| n.to_string()),
                rate.map_or("?".into(), |n| n.to_string()),
                if ok {
                    "no crash".to_owned()
                } else {
                    format!("**{result}**")
                },
                total.map_or("-".into(), |n| n.to_string()),
            ));
            if !ok {
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                for line in tail.into_iter().rev() {
                    println!("      {line}");
                }
                println!("      (full log: {})", log_path.display());
                failed.push(target);
            }
        }
    }
    println!("\n{table}");
    println!(
        "==> fuzz {} in {:.1}s",
        if failed.is_empty() {
            "ok".to_owned()
        } else {
            format!("FAILED ({})", failed.join(", "))
        },
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}

/// The `cargo fuzz run` of `target` for `seconds`, its output going to the returned log.
fn fuzz_run(fuzz: &Path, root: &Path, target: &str, seconds: u64) -> (Command, PathBuf) {
    let work = root.join("target").join("corpus").join(target);
    let logs = root.join("target").join("logs");
    let _ = std::fs::create_dir_all(&work);
    let _ = std::fs::create_dir_all(&logs);
    let log_path = logs.join(format!("{target}.log"));
    let seeds = root.join("corpus").join(target);
    let mut command = cargo_fuzz(fuzz);
    command.args(["run", target]).args(FUZZ_FLAGS).arg(&work);
    if seeds.is_dir() {
        command.arg(seeds);
    }
    command.args([
        "--",
        &format!("-max_total_time={seconds}"),
        "-timeout=10",
        "-rss_limit_mb=2048",
        "-max_len=65536",
        "-print_final_stats=1",
    ]);
    if let Some((out, err)) = std::fs::File::create(&log_path)
        .ok()
        .and_then(|l| Some((l.try_clone().ok()?, l)))
    {
        command.stdout(Stdio::from(out)).stderr(Stdio::from(err));
    }
    (command, log_path)
}

/// Adds `runs` to the executions `target` has run with no crash on this checkout
/// (`fuzz/target/executions/<target>`), and returns the new total.
fn add_to_total(fuzz: &Path, target: &str, runs: u64) -> u64 {
    let dir = fuzz.join("target").join("executions");
    let path = dir.join(target);
    let total = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + runs;
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&path, format!("{total}\n"));
    total
}

/// What a failed run of one target was, from its log: a crash (libFuzzer or a sanitizer
/// reported one and kept its input), the target failing to build (`cargo fuzz run`
/// builds first), or some other failure (e.g. it could not start).
fn fuzz_result(ok: bool, log: &str) -> &'static str {
    const CRASH: [&str; 4] = [
        "ERROR: libFuzzer",
        "ERROR: AddressSanitizer",
        "Test unit written to",
        "Failing input",
    ];
    if ok {
        "no crash"
    } else if CRASH.iter().any(|m| log.contains(m)) {
        "crash"
    } else if log.contains("error: could not compile") || log.contains("error[E") {
        "build failed"
    } else {
        "failed"
    }
}

/// A `-print_final_stats` figure from a libFuzzer log.
fn final_stat(log: &str, name: &str) -> Option<u64> {
    log.lines()
        .rev()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::{FUZZ_TARGETS, fuzz_result};
    use crate::workspace_root;

    #[test]
    fn fuzz_targets_are_exactly_the_binaries_of_fuzz() {
        let mut binaries: Vec<String> =
            std::fs::read_dir(workspace_root().join("fuzz/fuzz_targets"))
                .unwrap()
                .filter_map(|e| {
                    e.ok()?
                        .file_name()
                        .to_str()?
                        .strip_suffix(".rs")
                        .map(str::to_owned)
                })
                .collect();
        binaries.sort();
        let mut listed = FUZZ_TARGETS.to_vec();
        listed.sort_unstable();
        assert_eq!(binaries, listed);
    }

    #[test]
    fn fuzz_result_tells_a_crash_from_a_build_failure() {
        assert_eq!(fuzz_result(true, ""), "no crash");
        let crash = "==12== ERROR: libFuzzer: deadly signal\nTest unit written to ./a/crash-1";
        assert_eq!(fuzz_result(false, crash), "crash");
        let build = "error[E0425]: cannot find value `x`\nerror: could not compile `fuzz`";
        assert_eq!(fuzz_result(false, build), "build failed");
        assert_eq!(fuzz_result(false, "no such file"), "failed");
    }
}
