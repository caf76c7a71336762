//! `tollgate simulate`: runs the `tollgate-simulate` binary found beside this one, with
//! the catalog and every argument, and ends with its exit status.
//!
//! The simulation runs on tokio's paused clock, which needs tokio's `test-util`
//! feature; cargo enables a feature for a package's whole build, so the simulation is a
//! binary apart (crate `tollgate-simulate`) and this one is built without it. See
//! docs/cli.md.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Args;

use crate::CliResult;
use crate::setup::Source;

/// The simulation's binary, looked for beside `tollgate`'s own executable.
pub(crate) const SIMULATE_BINARY: &str = "tollgate-simulate";

/// Simulate a workload against a catalog model's limits: tollgate beside a naive
/// retrying client and the OpenAI cookbook's pacing, on a simulated provider that
/// enforces the limits exactly, on a paused clock. Runs the `tollgate-simulate` binary
/// installed beside tollgate (`tollgate simulate --help` shows its options).
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub(crate) struct SimulateArgs {
    /// The arguments of `tollgate-simulate` (see `tollgate simulate --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<OsString>,
}

/// Why `tollgate simulate` could not run the simulation.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SimulateError {
    /// `tollgate-simulate` is not beside `tollgate`.
    #[error(
        "`tollgate simulate` runs the `{SIMULATE_BINARY}` binary, which is not at {}: \
         install it beside tollgate with `cargo install --path crates/tollgate-simulate` \
         (or build it with `cargo build -p tollgate-simulate`, or run it as \
         `cargo run -p tollgate-simulate -- ARGS`); it is a binary apart so that tollgate \
         is built without tokio's test-util",
        path.display()
    )]
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// This executable's own path could not be read.
    #[error("cannot find tollgate's own executable, beside which `{SIMULATE_BINARY}` is: {0}")]
    OwnPath(#[source] std::io::Error),
    /// It is there but could not be started.
    #[error("cannot run {}: {source}", path.display())]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Runs the simulation binary with `--catalog` (when given) and `args`, returning its
/// exit status.
pub(crate) fn simulate(source: &Source, args: &SimulateArgs) -> CliResult {
    let exe = std::env::current_exe().map_err(SimulateError::OwnPath)?;
    let path = beside(&exe);
    if !path.is_file() {
        return Err(SimulateError::Missing { path }.into());
    }
    let mut command = Command::new(&path);
    if let Some(catalog) = &source.catalog {
        command.arg("--catalog").arg(catalog);
    }
    let status = command.args(&args.args).status().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            SimulateError::Missing { path: path.clone() }
        } else {
            SimulateError::Spawn {
                path: path.clone(),
                source: e,
            }
        }
    })?;
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .map_or(ExitCode::FAILURE, ExitCode::from))
}

/// `tollgate-simulate` (with the platform's executable suffix) in `exe`'s directory.
fn beside(exe: &Path) -> PathBuf {
    exe.with_file_name(format!("{SIMULATE_BINARY}{}", std::env::consts::EXE_SUFFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulation_binary_is_looked_for_in_tollgates_own_directory() {
        let exe = Path::new("/opt/tools/bin/tollgate");
        let expected = format!(
            "/opt/tools/bin/tollgate-simulate{}",
            std::env::consts::EXE_SUFFIX
        );
        assert_eq!(beside(exe), PathBuf::from(expected));
    }
}
