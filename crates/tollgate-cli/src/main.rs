//! `tollgate`: the command over tollgate's `Models`, every provider crate linked.
//!
//! How a command flows: [`setup`] loads the catalog (`--catalog FILE`, else
//! `tollgate.toml` here, else the embedded demo catalog on the `sim` and `fake`
//! providers) and the credentials file, and builds one `Models`; the subcommand then makes
//! every call through it, so every call is reserved before it is sent, retried by type,
//! recorded and costed. The main job is [`run`]: a JSONL batch at the fastest rate the
//! model's limits allow, resumable, with a live progress bar. See `docs/cli.md`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// Every provider crate, linked so that its registration is kept.
use tollgate_anthropic as _;
use tollgate_azure as _;
use tollgate_bedrock as _;
use tollgate_cohere as _;
use tollgate_deepseek as _;
use tollgate_fake as _;
use tollgate_gemini as _;
use tollgate_groq as _;
use tollgate_mistral as _;
use tollgate_openai as _;
use tollgate_perplexity as _;
use tollgate_sim as _;
use tollgate_together as _;
use tollgate_xai as _;

mod chat;
mod embed;
mod input;
mod models;
mod output;
#[cfg(test)]
mod priority_tests;
mod progress;
mod record;
mod resume;
mod run;
mod serve;
mod serve_log;
mod serve_reload;
mod setup;
mod simulate;
mod usage;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

/// Exit status when a run was interrupted with Ctrl-C (128 + SIGINT).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Rate-limit-aware LLM client: run a batch at the limit, chat, embed, list models,
/// read usage, simulate.
///
/// With no --catalog and no tollgate.toml in the current directory, tollgate runs on an
/// embedded demo catalog (models `demo`, `demo-backup`, `demo-slow`, `demo-embed`) that
/// needs no keys and no network.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version, propagate_version = true)]
#[command(after_help = "Examples:\n  \
    tollgate run examples/batch.jsonl --model demo -o out.jsonl\n  \
    tollgate chat -m demo 'Why reserve before sending?'\n  \
    tollgate models\n  \
    tollgate --redis redis://127.0.0.1:6379/ run batch.jsonl -m demo -o out.jsonl\n  \
    tollgate --catalog models.toml --credentials secrets.toml chat -m claude-sonnet -i")]
pub(crate) struct Cli {
    /// The catalog (TOML). Default: tollgate.toml if present, else the embedded demo.
    #[arg(long, global = true, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// The credentials file (TOML, `id = "secret"` lines), read on every lookup.
    #[arg(long, global = true, value_name = "FILE")]
    credentials: Option<PathBuf>,
    /// Keep every model's rate limits in this Redis (redis://host:port/), shared with
    /// every other process using it: several `tollgate run`s on one key pace as one. A
    /// Redis Cluster: redis+cluster://host:port, or seeds redis://a:7000,redis://b:7001.
    #[arg(long, global = true, value_name = "URL")]
    redis: Option<String>,
    /// The prefix of every key --redis writes (default `tollgate`): deployments that
    /// share one Redis but not their quotas (staging, production) each take their own.
    #[arg(long, global = true, value_name = "PREFIX", requires = "redis")]
    redis_prefix: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(run::RunArgs),
    Chat(chat::ChatArgs),
    Embed(embed::EmbedArgs),
    Models(models::ModelsArgs),
    #[command(subcommand)]
    Catalog(models::CatalogCommand),
    Usage(usage::UsageArgs),
    Simulate(simulate::SimulateArgs),
    Serve(serve::ServeArgs),
}

/// mimalloc, not glibc's malloc: a request through `tollgate serve` makes many small
/// allocations, and glibc's malloc and free were a tenth of its CPU in a profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tollgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let prefix = cli.redis_prefix.as_deref();
    let redis = match cli
        .redis
        .as_deref()
        .map(|url| setup::redis(url, prefix))
        .transpose()
    {
        Ok(redis) => redis,
        Err(e) => {
            eprintln!("tollgate: {e}");
            return ExitCode::FAILURE;
        }
    };
    let source = setup::Source {
        catalog: cli.catalog,
        credentials: cli.credentials,
        spend: redis
            .as_ref()
            .map(|r| Arc::new(r.spend()) as Arc<dyn tollgate::pipeline::SpendLedger>),
        queues: match &redis {
            Some(r) => Arc::new(r.queue()),
            None => Arc::new(tollgate::limit::MemoryQueueLedger::new()),
        },
        limiters: redis.map(|r| Arc::new(r) as Arc<dyn tollgate::limit::LimiterFactory>),
    };
    let result = match cli.command {
        Command::Run(args) => runtime.block_on(run::run(&source, args)),
        Command::Chat(args) => runtime.block_on(chat::chat(&source, args)),
        Command::Embed(args) => runtime.block_on(embed::embed(&source, args)),
        Command::Models(args) => models::list(&source, &args),
        Command::Catalog(cmd) => models::catalog(cmd),
        Command::Usage(args) => usage::usage(&source, &args),
        Command::Simulate(args) => simulate::simulate(&source, &args),
        Command::Serve(args) => runtime.block_on(serve::serve(&source, args)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tollgate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a subcommand fails with: a message for the user.
pub(crate) type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;
