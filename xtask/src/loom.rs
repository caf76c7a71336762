//! The `test-all` step that model-checks the in-process limiter with loom
//! (`crates/tollgate/tests/loom.rs`, `docs/reliability.md`): the core built with its
//! internal `loom-model` feature, which rebuilds the core alone (the dependencies are
//! the test step's, already built), in the same target dir.

use std::process::Command;

use crate::cargo;
use crate::summary::Outcome;

/// Runs the loom model check. Its closing line, with the time, is the summary's
/// ([`crate::summary::Summary::time`]).
pub(crate) fn loom_step() -> Outcome {
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
    Outcome::from_ok(
        Command::new(cargo())
            .args(args)
            .status()
            .is_ok_and(|s| s.success()),
    )
}
