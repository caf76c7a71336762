//! Repository tasks, run as `cargo xtask <task>`.
//!
//! - `test-all`: everything CI checks — formatting, clippy with warnings denied, every
//!   example built, doc tests, then every workspace test (cargo-nextest when installed,
//!   else `cargo test`). Services that tests need are started before and stopped after.
//!
//! Plain `std` only, so it compiles in a second.

use std::process::{Command, ExitCode};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test-all") => test_all(),
        Some("help" | "--help" | "-h") | None => {
            println!(
                "usage: cargo xtask test-all\n\n  test-all  fmt, clippy, examples, doc tests and every workspace test"
            );
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown task `{other}`; run `cargo xtask help`");
            ExitCode::FAILURE
        }
    }
}

/// One step of `test-all`: a name and the cargo arguments.
struct Step {
    name: &'static str,
    args: Vec<&'static str>,
}

// Step timings are for the person reading the log, so the wall clock is right here.
#[allow(clippy::disallowed_methods)]
fn test_all() -> ExitCode {
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
                "--",
                "-D",
                "warnings",
            ],
        },
        Step {
            name: "examples",
            args: vec!["build", "--workspace", "--examples"],
        },
        Step {
            name: "doc tests",
            args: vec!["test", "--workspace", "--doc"],
        },
    ];
    // The test step runs last so that its summary is the run's closing test line.
    steps.push(if nextest {
        Step {
            name: "tests (nextest)",
            args: vec!["nextest", "run", "--workspace", "--no-fail-fast"],
        }
    } else {
        Step {
            name: "tests (cargo test)",
            args: vec![
                "test",
                "--workspace",
                "--lib",
                "--bins",
                "--tests",
                "--no-fail-fast",
            ],
        }
    });

    // Tests so far need no outside service (Redis, conformance mocks); when they do,
    // they are started here, idempotently, and stopped after the steps.
    let mut failed = Vec::new();
    for step in &steps {
        println!(
            "\n==> xtask test-all: {} (cargo {})",
            step.name,
            step.args.join(" ")
        );
        let started = Instant::now();
        let ok = Command::new(cargo())
            .args(&step.args)
            .status()
            .is_ok_and(|s| s.success());
        println!(
            "==> {} {} in {:.1}s",
            step.name,
            if ok { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(step.name);
        }
    }
    if failed.is_empty() {
        println!("\nxtask test-all: every step succeeded");
        ExitCode::SUCCESS
    } else {
        eprintln!("\nxtask test-all: failed steps: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}

fn cargo() -> String {
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
