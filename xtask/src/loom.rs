//! The `test-all` step that model-checks the in-process limiter with loom
//! (`crates/tollgate/tests/loom.rs`, `docs/reliability.md`): the core built with
//! `--cfg tollgate_loom`, in release mode (loom runs thousands of interleavings), into
//! `<target dir>/loom` so that the other steps' builds are left alone.

use std::process::Command;
use std::time::Instant;

use crate::{cargo, workspace_root};

/// Runs the loom model check; whether it passed. Prints its time.
// The step's timing is for the person reading the log, so the wall clock is right here.
#[allow(clippy::disallowed_methods)]
pub(crate) fn loom_step() -> bool {
    let args = ["test", "-p", "tollgate", "--test", "loom", "--release"];
    println!(
        "\n==> xtask test-all: loom model check of the limiter (RUSTFLAGS=\"--cfg tollgate_loom\" cargo {})",
        args.join(" ")
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), Into::into)
        .join("loom");
    let rustflags = std::env::var("RUSTFLAGS").map_or_else(
        |_| "--cfg tollgate_loom".to_owned(),
        |flags| format!("{flags} --cfg tollgate_loom"),
    );
    let started = Instant::now();
    let ok = Command::new(cargo())
        .args(args)
        .env("RUSTFLAGS", rustflags)
        .env("CARGO_TARGET_DIR", target)
        .status()
        .is_ok_and(|s| s.success());
    println!(
        "==> loom model check {} in {:.1}s",
        if ok { "ok" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    ok
}
