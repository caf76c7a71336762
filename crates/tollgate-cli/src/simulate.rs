//! `tollgate simulate`.

/// Simulate.
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {}

pub(crate) fn simulate(_source: &crate::setup::Source, _args: &SimulateArgs) -> crate::CliResult {
    Err("simulate is not written yet".into())
}
