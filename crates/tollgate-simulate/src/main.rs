//! `tollgate-simulate`, which `tollgate simulate` runs: a catalog model's limits and a
//! workload against the simulated provider on tokio's paused clock ([`simulate`]).
//!
//! A binary of its own because the paused clock needs tokio's `test-util` feature, and
//! cargo turns a feature on for the whole of a package's build: the `tollgate` binary is
//! built without it, and finds this one beside its own executable. The catalog is read
//! as `tollgate` reads it: `--catalog FILE`, else `tollgate.toml` here, else the embedded
//! demo catalog, with every provider crate linked so that any catalog checks alike.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// Every provider crate, linked so that a catalog naming one is accepted.
use tollgate_anthropic as _;
use tollgate_bedrock as _;
use tollgate_fake as _;
use tollgate_gemini as _;
use tollgate_openai as _;
use tollgate_sim as _;

mod simulate;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use tollgate::Catalog;

/// `tollgate`'s embedded demo catalog, the one read without `--catalog` or a
/// `tollgate.toml`.
const DEMO_CATALOG: &str = include_str!("../../tollgate-cli/src/demo.toml");

/// The catalog read when `--catalog` is not given, if it exists.
const DEFAULT_CATALOG: &str = "tollgate.toml";

/// Simulate a workload against a catalog model's limits: tollgate beside a naive
/// retrying client and the OpenAI cookbook's pacing, on a simulated provider that
/// enforces the limits exactly. Runs on a paused clock: ten simulated minutes take
/// about a second. `tollgate simulate ARGS` runs this binary with the same ARGS.
#[derive(Debug, Parser)]
#[command(name = "tollgate-simulate", version)]
#[command(after_help = "Examples:\n  \
    tollgate simulate -m demo\n  \
    tollgate simulate -m demo --callers 64 --duration 600 --input-tokens 800 --output-tokens 200 -o sim.svg\n  \
    tollgate --catalog models.toml simulate -m claude-sonnet --callers 100")]
struct Cli {
    /// The catalog (TOML). Default: tollgate.toml if present, else the embedded demo.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    #[command(flatten)]
    args: simulate::SimulateArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match catalog(cli.catalog.as_deref()).and_then(|c| simulate::simulate(&c, &cli.args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tollgate simulate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The catalog: `path`, else `tollgate.toml` here if it exists, else the demo.
fn catalog(path: Option<&Path>) -> Result<Catalog, Box<dyn std::error::Error>> {
    let default = Path::new(DEFAULT_CATALOG);
    match path.or(default.exists().then_some(default)) {
        Some(p) => Ok(Catalog::from_toml_file(p)?),
        None => Ok(Catalog::from_toml_str(DEMO_CATALOG)?),
    }
}
