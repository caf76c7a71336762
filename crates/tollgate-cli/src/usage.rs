//! `tollgate usage`.
use std::path::PathBuf;

/// Summarize a records file.
#[derive(Debug, clap::Args)]
pub(crate) struct UsageArgs {
    /// The records file.
    file: PathBuf,
}

pub(crate) fn usage(args: &UsageArgs) -> crate::CliResult {
    Err(format!("usage of {} is not written yet", args.file.display()).into())
}
