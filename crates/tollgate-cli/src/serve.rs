//! `tollgate serve`: the OpenAI- and Anthropic-compatible gateway (`tollgate-gateway`)
//! over the command's `Models`, so clients in any language are paced by the catalog.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tollgate::limit::InProcessLimiters;
use tollgate::pipeline::{AttemptRecord, CallRecord, Recorder, SpendLedger};
use tollgate_gateway::{
    BodyTiming, DEFAULT_BODY_LIMIT, FileSpendLedger, Gateway, GatewayMetrics, Keys, ServeOptions,
    TlsConfig, bind, serve_live, shutdown_signal,
};

use crate::CliResult;
use crate::record::CliRecorder;
use crate::serve_log::LogArgs;
use crate::serve_reload::{self, Files};
use crate::setup::Source;

/// Serve the catalog's models over HTTP in the OpenAI and Anthropic formats, every
/// request paced by the model's limits.
///
/// Routes: POST /v1/chat/completions, POST /v1/embeddings, GET /v1/models (OpenAI);
/// POST /v1/messages, POST /v1/messages/count_tokens (Anthropic); GET /health, GET /ready,
/// GET /metrics, GET and HEAD / (an empty 200). Without --keys the gateway is open to anyone
/// who can reach it.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tollgate serve\n  \
    curl -s localhost:4000/v1/chat/completions -H 'content-type: application/json' \\\n    \
    -d '{\"model\":\"demo\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'\n  \
    tollgate --catalog models.toml --credentials secrets.toml serve --keys keys.toml --listen 0.0.0.0:4000")]
pub(crate) struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:4000", value_name = "ADDR")]
    listen: String,
    /// Virtual keys (TOML): ids, SHA-256 hashes of their secrets, models, priority,
    /// max_wait_ms, rpm/tpm caps, budget_usd_per_day. Without it, every request is
    /// accepted.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    /// Where the keys' daily budgets keep what they spent, so a restart remembers it
    /// (without --redis; default: beside the keys file, `<keys>.spend.json`).
    #[arg(long, value_name = "FILE", requires = "keys")]
    budget_state: Option<PathBuf>,
    /// The largest request body accepted, in bytes (larger ones get 413).
    #[arg(long, default_value_t = DEFAULT_BODY_LIMIT, value_name = "BYTES")]
    max_body_bytes: usize,
    /// How long requests in flight may take to finish after SIGTERM or Ctrl-C (requests
    /// still queued are answered 503 with retry-after at once).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    shutdown_grace_secs: u64,
    /// How long a client may take to send a request's headers before its connection is
    /// closed.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    header_read_timeout_secs: u64,
    /// The most connections served at once; at the limit the longest idle one is closed
    /// for a new client (only when all are busy does it wait in the OS backlog, which
    /// is sized to hold this many).
    #[arg(long, default_value_t = ServeOptions::DEFAULT.max_connections, value_name = "N")]
    max_connections: usize,
    /// How long a request body may take to arrive before the rate below counts; a
    /// body that does not arrive in time is answered 408 and its connection closed.
    #[arg(long, default_value_t = BodyTiming::DEFAULT.timeout.as_secs(), value_name = "SECONDS")]
    body_read_timeout_secs: u64,
    /// Each this many bytes of a body received extend its deadline by a second: the
    /// slowest sustained upload rate accepted (0: the timeout alone).
    #[arg(long, default_value_t = BodyTiming::DEFAULT.min_bytes_per_sec, value_name = "BYTES")]
    min_body_bytes_per_sec: u64,
    /// After SIGTERM, once nothing is in flight, how long idle keep-alive connections
    /// stay open so that a late request on one is answered 503, not reset.
    #[arg(long, default_value_t = ServeOptions::DEFAULT.drain_linger.as_secs(), value_name = "SECONDS")]
    drain_linger_secs: u64,
    /// Append every call and attempt record (job `key:<id>` per virtual key) to this
    /// file, for `tollgate usage`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key.
    /// HTTP/2 by ALPN, HTTP/1.1 kept.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The log on stderr: the access log and the gateway's and pipeline's warnings and
    /// errors (a failure masked from its client, with its request id; an accept error; a
    /// grace passed).
    #[command(flatten)]
    log: LogArgs,
}

/// The command's recorder, without keeping records in memory (a server runs for days),
/// and the gateway's metrics, fed by the same records.
#[derive(Debug)]
struct ServeRecorder {
    cli: CliRecorder,
    metrics: Arc<GatewayMetrics>,
}

impl Recorder for ServeRecorder {
    fn record_call(&self, record: &CallRecord) {
        self.metrics.record_call(record);
        self.cli.record_call(record);
        if let Some(job) = &record.job_id {
            self.cli.take(job);
        }
    }

    fn record_attempt(&self, record: &AttemptRecord) {
        self.metrics.record_attempt(record);
        self.cli.record_attempt(record);
    }
}

/// The ledger of the keys' daily budgets without --redis: `state`, else
/// `<keys>.spend.json` beside the keys file; none when no key has a budget.
fn budget_state(
    state: Option<&Path>,
    keys_file: &Path,
    keys: &Keys,
) -> Result<Option<Arc<dyn SpendLedger>>, Box<dyn std::error::Error>> {
    if keys.iter().all(|k| k.budget_usd_per_day().is_none()) {
        return Ok(None);
    }
    let path = state.map_or_else(|| keys_file.with_extension("spend.json"), Path::to_path_buf);
    let ledger = FileSpendLedger::open(&path)?;
    println!(
        "tollgate serve: the keys' daily spend is kept in {}",
        path.display()
    );
    Ok(Some(Arc::new(ledger)))
}

pub(crate) async fn serve(source: &Source, args: ServeArgs) -> CliResult {
    // Held to the end of `serve`: dropping it writes the lines still buffered.
    let _log = args.log.install()?;
    let metrics = Arc::new(GatewayMetrics::new());
    let recorder = ServeRecorder {
        cli: CliRecorder::with_file(args.record.as_deref())?,
        metrics: metrics.clone(),
    };
    let (models, origin) = source.models(Arc::new(recorder))?;
    let count = models.catalog().models().count();
    let timing = BodyTiming {
        timeout: Duration::from_secs(args.body_read_timeout_secs),
        min_bytes_per_sec: args.min_body_bytes_per_sec,
    };
    let mut gateway = Gateway::new(models)
        .with_body_limit(args.max_body_bytes)
        .with_body_timing(timing)
        .with_metrics(metrics);
    match &args.keys {
        Some(path) => {
            let keys = Keys::from_toml_file(path)?;
            println!(
                "tollgate serve: {} virtual keys from {}",
                keys.len(),
                path.display()
            );
            // The keys' own rpm/tpm caps and daily budgets live where the models'
            // buckets do: in Redis with --redis, shared by every replica; else in this
            // process, the budgets' spend in a state file that outlives it.
            gateway = match &source.limiters {
                Some(factory) => {
                    if args.budget_state.is_some() {
                        return Err("--budget-state is for a gateway without --redis: with \
                                    --redis the keys' budgets are kept in Redis"
                            .into());
                    }
                    gateway.with_keys_on(keys, factory.clone(), source.spend.clone())?
                }
                None => {
                    // Checked before the state file is made, so a refused start leaves none.
                    keys.check_against(gateway.models().catalog())?;
                    let ledger = budget_state(args.budget_state.as_deref(), path, &keys)?;
                    gateway.with_keys_on(keys, Arc::new(InProcessLimiters), ledger)?
                }
            };
        }
        None => eprintln!(
            "tollgate serve: warning: no --keys, so the gateway is open: anyone who can reach \
             it can spend the catalog's provider quota"
        ),
    }
    let listen: std::net::SocketAddr = tokio::net::lookup_host(&args.listen)
        .await
        .ok()
        .and_then(|mut all| all.next())
        .ok_or_else(|| {
            format!(
                "--listen {}: not an address to listen on (HOST:PORT)",
                args.listen
            )
        })?;
    // Read before binding, so a bad file refuses the start with nothing listening.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsConfig::from_pem_files(cert, key)?),
        _ => None,
    };
    let listener = bind(listen, args.max_connections)
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let address = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("tollgate serve: listening on {scheme}://{address} ({count} models from {origin})");
    let mut options = ServeOptions::DEFAULT
        .with_grace(Duration::from_secs(args.shutdown_grace_secs))
        .with_header_read_timeout(Duration::from_secs(args.header_read_timeout_secs))
        .with_max_connections(args.max_connections)
        .with_drain_linger(Duration::from_secs(args.drain_linger_secs));
    options.tls = tls;
    let files = Files {
        catalog: source.catalog_file(),
        keys: args.keys.clone(),
    };
    let live = serve_reload::live(gateway, files);
    tokio::spawn(serve_reload::reload_on_hangup(live.clone()));
    serve_live(listener, live, shutdown_signal(), options).await?;
    println!("tollgate serve: stopped");
    Ok(ExitCode::SUCCESS)
}
