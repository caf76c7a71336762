//! The arguments of `tollgate run`: `--priority` and `--purpose` as the limiter and the
//! embeddings clients know them.

use std::path::PathBuf;

use clap::Args;
use tollgate::EmbeddingPurpose;
use tollgate::limit::Priority;

/// Run a JSONL batch through a model at the fastest rate its limits allow.
///
/// Input: the OpenAI Batch API format (`custom_id`, `method`, `url`, `body`) for
/// /v1/chat/completions or /v1/embeddings, or plain lines (a prompt, a message list, or
/// {"prompt": ...}). Output: one line per request in the Batch API's output shape, with
/// a `tollgate` object (attempts, usage, cost). Re-running the same command finishes
/// the batch: it keeps the successes and sends again what failed for a reason that may
/// pass (a 429 after every retry, Ctrl-C, the spend cap...); Ctrl-C stops sending and
/// writes everything done. `--via batch` sends them through the provider's batch API
/// instead (same input, same output), keeping its batches in `<OUTPUT>.batches.json` so
/// that the same command collects them later.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tollgate run examples/batch.jsonl --model demo -o target/batch-out.jsonl\n  \
    tollgate run prompts.jsonl -m demo -o out.jsonl --max-cost 0.50 --fallback\n  \
    tollgate run prompts.jsonl -m demo -o out.jsonl --retry-failed --priority default\n  \
    tollgate run prompts.jsonl -m gpt-4o-mini -o out.jsonl --via batch\n  \
    tollgate run prompts.jsonl -m gpt-4o-mini -o out.jsonl --via auto --deadline 20m\n  \
    tollgate run prompts.jsonl -m gpt-4o-mini -o out.jsonl --cancel\n  \
    tollgate --catalog models.toml --credentials secrets.toml run batch.jsonl -m gpt-4o -o out.jsonl --record calls.jsonl")]
pub(crate) struct RunArgs {
    /// The requests, one JSON object (or plain prompt) per line.
    pub(super) input: PathBuf,
    /// The catalog model every request goes to.
    #[arg(short, long)]
    pub(super) model: String,
    /// Where results go, one line per request (appended; a re-run keeps the ids done).
    #[arg(short, long, value_name = "OUTPUT")]
    pub(super) output: PathBuf,
    /// Stop sending when the run's cost would pass this many USD (checked at worst-case
    /// cost before each request).
    #[arg(long, value_name = "USD")]
    pub(super) max_cost: Option<f64>,
    /// When the model cannot serve a request now, send it to the catalog's `fallbacks`.
    #[arg(long)]
    pub(super) fallback: bool,
    /// Requests in flight at once, at most (they still wait for the limiter).
    #[arg(long, default_value_t = 64)]
    pub(super) concurrency: usize,
    /// Retries per request (429, 529, 5xx, timeouts), across its attempts.
    #[arg(long, default_value_t = 8)]
    pub(super) retries: u32,
    /// Also append every call and attempt record to this file (for `tollgate usage`).
    #[arg(long, value_name = "FILE")]
    pub(super) record: Option<PathBuf>,
    /// For embeddings lines: what the texts are for.
    #[arg(long, value_enum, default_value_t = Purpose::Document)]
    pub(super) purpose: Purpose,
    /// Also send again the requests whose earlier failure was final (a refusal, an
    /// invalid request, a context overflow), not only those that may pass.
    #[arg(long)]
    pub(super) retry_failed: bool,
    /// The class the requests wait in on the model's limiter: `interactive` callers are
    /// granted first, `batch` last.
    #[arg(long, value_enum, default_value_t = PriorityArg::Batch)]
    pub(super) priority: PriorityArg,
    /// No progress bar.
    #[arg(long)]
    pub(super) quiet: bool,
    /// How the requests go: `live` (each sent now, at the limit), `batch` (through the
    /// provider's batch API: about half the price, answered within a day, paced by its
    /// queue limits, resumable), or `auto` (live what the live limit can take within
    /// `--deadline`, the rest as batches).
    #[arg(long, value_enum, default_value_t = Via::Live)]
    pub(super) via: Via,
    /// With `--via auto`: how long the live part may take (e.g. `10m`, `2h`); the
    /// requests the live limits cannot take by then go as batches.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub(super) deadline: Option<std::time::Duration>,
    /// With `--via batch` or `auto`: how often the provider's batches are polled.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub(super) poll_every: std::time::Duration,
    /// Cancel this output's batches still at the provider (see `<OUTPUT>.batches.json`),
    /// write what they finished, and submit nothing new.
    #[arg(long)]
    pub(super) cancel: bool,
}

/// `--via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Via {
    /// Every request sent now, at the fastest rate the model's limits allow.
    Live,
    /// Every request through the provider's batch API.
    Batch,
    /// Live what fits within `--deadline`, batched the rest.
    Auto,
}

/// `--priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PriorityArg {
    /// A person is waiting: granted first.
    Interactive,
    /// Ordinary calls.
    Default,
    /// Background work: granted after the other classes.
    Batch,
}

impl From<PriorityArg> for Priority {
    fn from(p: PriorityArg) -> Self {
        match p {
            PriorityArg::Interactive => Priority::Interactive,
            PriorityArg::Default => Priority::Default,
            PriorityArg::Batch => Priority::Batch,
        }
    }
}

/// `--purpose`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Purpose {
    /// Text to be stored and searched.
    Document,
    /// Text searched with.
    Query,
}

impl From<Purpose> for EmbeddingPurpose {
    fn from(p: Purpose) -> Self {
        match p {
            Purpose::Document => EmbeddingPurpose::Document,
            Purpose::Query => EmbeddingPurpose::Query,
        }
    }
}
