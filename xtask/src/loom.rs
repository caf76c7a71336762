//! The `test-all` step that model-checks the in-process limiter with loom
//! (`crates/tollgate/tests/loom.rs`, `docs/reliability.md`): the core built with its
//! internal `loom-model` feature, which rebuilds the core alone (the dependencies are
//! the test step's, already built), in the same target dir.

use std::process::Command;
use std::time::Instant;

use crate::cargo;

/// Runs the loom model check; whether it passed. Prints its time.
// The step's timing is for the person reading the log, so the wall clock is right here.
#[allow(clippy::disallowed_methods)]
pub(crate) fn loom_step() -> bool {
    let args = [
        "test",
        "-p",
        "tollgate",
        "--features",
        "loom-model",
        "--test",
        "loom",
    ];
    println!(
        "\n==> xtask test-all: loom model check of the limiter (cargo {})",
        args.join(" ")
    );
    let started = Instant::now();
    let ok = Command::new(cargo())
        .args(args)
        .status()
        .is_ok_and(|s| s.success());
    println!(
        "==> loom model check {} in {:.1}s",
        if ok { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    ok
}
