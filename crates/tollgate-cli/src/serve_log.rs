//! `tollgate serve`'s log on stderr: the gateway's access log (one line per request) and
//! every warning and error of the gateway and the pipeline, filtered as `RUST_LOG` says
//! (or `--log-filter`), as text or as JSON lines.

use clap::Args;
use tollgate_gateway::ACCESS_TARGET;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

/// The log's options.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// Which log lines to write on stderr, in RUST_LOG's syntax (over RUST_LOG; without
    /// either: `warn,tollgate::access=info`, the access log and every warning and error;
    /// `warn` silences the access log).
    #[arg(long, value_name = "FILTER")]
    log_filter: Option<String>,
    /// How the log's lines are written: text, or json (one object per line).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, value_name = "FORMAT")]
    log_format: LogFormat,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Lines of text: time, level, target, message, then the fields as `name=value`.
    Text,
    /// One JSON object per line, the event's fields at its top level.
    Json,
}

/// The filter without `--log-filter` or `RUST_LOG`: the access log (INFO) and every
/// warning and error.
fn default_filter() -> String {
    format!("warn,{ACCESS_TARGET}=info")
}

impl LogArgs {
    /// Installs the log as the process's `tracing` subscriber; fails on a filter that
    /// does not parse, naming where it came from. The lines go through a buffer that a
    /// thread of their own writes to stderr whenever no line waits (so a burst is one
    /// write, and a quiet gateway's line is out at once); a request never drops a line
    /// (it waits for room instead). Keep the guard until the end: dropping it writes
    /// what is left.
    pub(crate) fn install(&self) -> Result<WorkerGuard, String> {
        let (directives, source) = match &self.log_filter {
            Some(filter) => (filter.clone(), "--log-filter"),
            None => match std::env::var("RUST_LOG") {
                Ok(filter) if !filter.trim().is_empty() => (filter, "RUST_LOG"),
                _ => (default_filter(), "the default log filter"),
            },
        };
        let filter = EnvFilter::builder()
            .parse(&directives)
            .map_err(|e| format!("{source} `{directives}` is not a log filter: {e}"))?;
        let (writer, guard) = NonBlockingBuilder::default()
            .lossy(false)
            .thread_name("tollgate-log")
            .finish(std::io::BufWriter::new(std::io::stderr()));
        let log = tracing_subscriber::fmt()
            .with_writer(writer)
            .with_env_filter(filter);
        // A subscriber already installed (none is, in the binary) keeps its place.
        let _ = match self.log_format {
            LogFormat::Text => log.try_init(),
            LogFormat::Json => log.json().flatten_event(true).try_init(),
        };
        Ok(guard)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_filter_parses_and_names_the_access_target() {
        let filter = super::default_filter();
        assert!(filter.contains(tollgate_gateway::ACCESS_TARGET));
        assert!(
            tracing_subscriber::EnvFilter::builder()
                .parse(&filter)
                .is_ok()
        );
    }
}
