//! `tollgate run`: a JSONL batch through one model at the fastest rate its limits allow.
//!
//! Each request is one job (`custom_id` is the job id) on one shared spend cap
//! (`--max-cost`): it waits for its reservation on the model's limiter (holding nothing,
//! so `--concurrency` bounds only what is in flight), is sent, retried by error type,
//! recorded and costed by the pipeline, and its line is written the moment it finishes.
//! Requests reserve at `--priority` (default `batch`): a limiter that applies classes
//! grants the interactive callers sharing it first.
//!
//! So an interrupted run loses nothing that was done, and a re-run finishes the batch:
//! it keeps every success and every final failure in the output and sends again what
//! failed for a reason that may pass (see [`crate::resume`]), the output ending with
//! exactly one line per `custom_id`.
//!
//! Ctrl-C once: nothing more is sent; requests still waiting for the limiter are dropped
//! (their reservations given back), those already sent finish and are written. Twice:
//! those in flight are cancelled too. Either way the run ends with its summary and exit
//! status 130.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tollgate::catalog::ModelKind;
use tollgate::clock;
use tollgate::limit::{Admission, Cost, Priority};
use tollgate::pipeline::{CallRecord, DefaultEstimator, FallbackOptions, Outcome, TokenEstimator};
use tollgate::{EmbeddingPurpose, Error, JobContext, Models, SpendCap, Usage};

use crate::input::{Body, Item, parse_line};
use crate::output::{self, ErrorPart, Meta, OutputLine, ResponsePart};
use crate::progress::{Summary, Tally, print_summary, progress};
use crate::record::CliRecorder;
use crate::resume::{self, retry_on_rerun};
use crate::setup::Source;
use crate::{CliResult, EXIT_INTERRUPTED};

/// Run a JSONL batch through a model at the fastest rate its limits allow.
///
/// Input: the OpenAI Batch API format (`custom_id`, `method`, `url`, `body`) for
/// /v1/chat/completions or /v1/embeddings, or plain lines (a prompt, a message list, or
/// {"prompt": ...}). Output: one line per request in the Batch API's output shape, with
/// a `tollgate` object (attempts, usage, cost). Re-running the same command finishes
/// the batch: it keeps the successes and sends again what failed for a reason that may
/// pass (a 429 after every retry, Ctrl-C, the spend cap...); Ctrl-C stops sending and
/// writes everything done.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tollgate run examples/batch.jsonl --model demo -o target/batch-out.jsonl\n  \
    tollgate run prompts.jsonl -m demo -o out.jsonl --max-cost 0.50 --fallback\n  \
    tollgate run prompts.jsonl -m demo -o out.jsonl --retry-failed --priority default\n  \
    tollgate --catalog models.toml --credentials secrets.toml run batch.jsonl -m gpt-4o -o out.jsonl --record calls.jsonl")]
pub(crate) struct RunArgs {
    /// The requests, one JSON object (or plain prompt) per line.
    input: PathBuf,
    /// The catalog model every request goes to.
    #[arg(short, long)]
    model: String,
    /// Where results go, one line per request (appended; a re-run keeps the ids done).
    #[arg(short, long, value_name = "OUTPUT")]
    output: PathBuf,
    /// Stop sending when the run's cost would pass this many USD (checked at worst-case
    /// cost before each request).
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// When the model cannot serve a request now, send it to the catalog's `fallbacks`.
    #[arg(long)]
    fallback: bool,
    /// Requests in flight at once, at most (they still wait for the limiter).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Retries per request (429, 529, 5xx, timeouts), across its attempts.
    #[arg(long, default_value_t = 8)]
    retries: u32,
    /// Also append every call and attempt record to this file (for `tollgate usage`).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// For embeddings lines: what the texts are for.
    #[arg(long, value_enum, default_value_t = Purpose::Document)]
    purpose: Purpose,
    /// Also send again the requests whose earlier failure was final (a refusal, an
    /// invalid request, a context overflow), not only those that may pass.
    #[arg(long)]
    retry_failed: bool,
    /// The class the requests wait in on the model's limiter: `interactive` callers are
    /// granted first, `batch` last.
    #[arg(long, value_enum, default_value_t = PriorityArg::Batch)]
    priority: PriorityArg,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
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

/// How far Ctrl-C has gone: 0 running, 1 stop sending, 2 cancel what is in flight.
type StopLevel = watch::Receiver<u8>;

async fn reached(stop: &mut StopLevel, level: u8) {
    let _ = stop.wait_for(|l| *l >= level).await;
}

struct Shared {
    models: Models,
    model_id: String,
    args_fallback: bool,
    retries: u32,
    priority: Priority,
    purpose: EmbeddingPurpose,
    cap: Option<SpendCap>,
    recorder: Arc<CliRecorder>,
    out: Mutex<std::fs::File>,
    tally: Arc<Mutex<Tally>>,
    next_id: AtomicU64,
    /// Whether requests reserve before the pipeline (and so can be dropped unsent).
    preadmit: bool,
}

pub(crate) async fn run(source: &Source, args: RunArgs) -> CliResult {
    let text = std::fs::read_to_string(&args.input)
        .map_err(|e| format!("cannot read `{}`: {e}", args.input.display()))?;
    let mut items = Vec::new();
    let mut bad = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        match parse_line(i + 1, line, &args.model) {
            Ok(Some(item)) => {
                if let Some(first) = seen.get(&item.custom_id) {
                    bad.push(crate::input::BadLine {
                        line: i + 1,
                        reason: format!("custom_id `{}` repeats line {first}", item.custom_id),
                    });
                } else {
                    seen.insert(item.custom_id.clone(), i + 1);
                    items.push(item);
                }
            }
            Ok(None) => {}
            Err(b) => bad.push(b),
        }
    }
    for b in &bad {
        eprintln!(
            "tollgate: {}: line {}: {}; skipped",
            args.input.display(),
            b.line,
            b.reason
        );
    }

    let recorder = Arc::new(CliRecorder::with_file(args.record.as_deref())?);
    let (models, _) = source.models(recorder.clone())?;
    let entry = models.catalog().get(&args.model)?.clone();
    let wanted = if items.iter().any(|i| matches!(i.body, Body::Embed(_))) {
        ModelKind::Embeddings
    } else {
        ModelKind::Chat
    };
    if !items.is_empty() && entry.kind != wanted {
        return Err(format!(
            "model `{}` is a {} model and the batch asks for {}",
            entry.id,
            entry.kind.as_str(),
            wanted.as_str()
        )
        .into());
    }
    let mut needed = vec![entry.id.clone()];
    if args.fallback {
        needed.extend(entry.fallbacks.iter().cloned());
    }
    source.check_credentials(&models, &needed).await?;

    if let Some(parent) = args.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create `{}`: {e}", parent.display()))?;
    }
    let previous = resume::prepare(&args.output, args.retry_failed, |id| seen.contains_key(id))?;
    let total_items = items.len();
    let todo: Vec<Item> = items
        .into_iter()
        .filter(|i| !previous.kept.contains(&i.custom_id))
        .collect();
    let skipped = total_items - todo.len();
    let out = output::open_append(&args.output)
        .map_err(|e| format!("cannot write `{}`: {e}", args.output.display()))?;

    // The provider's client is built on the first call: build it now, so that no request
    // of the opening burst holds its reservation while the client is made (its late
    // arrival would meet a 429 from a provider that has not refilled what we counted).
    if !todo.is_empty() {
        match (wanted, args.fallback) {
            (ModelKind::Embeddings, _) => drop(models.embeddings(&entry.id).await?),
            (_, true) => drop(
                models
                    .chat_with_fallbacks(&entry.id, FallbackOptions::default())
                    .await?,
            ),
            (_, false) => drop(models.chat(&entry.id).await?),
        }
    }
    let preadmit =
        !args.fallback && wanted == ModelKind::Chat && models.limiters(&entry.id)?.len() == 1;
    let shared = Arc::new(Shared {
        models: models.clone(),
        model_id: entry.id.clone(),
        args_fallback: args.fallback,
        retries: args.retries,
        priority: args.priority.into(),
        purpose: args.purpose.into(),
        cap: args
            .max_cost
            .map(|usd| SpendCap::new("tollgate run --max-cost", usd)),
        recorder: recorder.clone(),
        out: Mutex::new(out),
        tally: Arc::default(),
        next_id: AtomicU64::new(previous.next_seq),
        preadmit,
    });

    let (stop_tx, stop) = watch::channel(0u8);
    let mut interrupts = Interrupts::new()?;
    tokio::spawn(async move {
        while interrupts.next().await {
            let level = (*stop_tx.borrow() + 1).min(2);
            if level == 1 {
                eprintln!(
                    "\ntollgate: stopping: nothing more is sent; finishing what is in flight \
                     (Ctrl-C again to cancel it)"
                );
            } else {
                eprintln!("tollgate: cancelling what is in flight");
            }
            let _ = stop_tx.send(level);
        }
    });

    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(todo.len() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} [{bar:20}] {pos}/{len} ETA {eta} {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    let ticker = tokio::spawn(progress(
        shared.tally.clone(),
        recorder.clone(),
        models.limiter(&entry.id).ok().cloned(),
        bar.clone(),
        entry.limits,
    ));

    let started = clock::now();
    let permits = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let mut tasks = JoinSet::new();
    let mut not_sent = 0usize;
    let mut stop_feed = stop.clone();
    for (n, item) in todo.iter().enumerate() {
        let permit = tokio::select! {
            biased;
            _ = reached(&mut stop_feed, 1) => None,
            p = permits.clone().acquire_owned() => p.ok(),
        };
        let Some(permit) = permit else {
            not_sent = todo.len() - n;
            break;
        };
        let shared = shared.clone();
        let item = item.clone();
        let stop = stop.clone();
        let bar = bar.clone();
        tasks.spawn(async move {
            let sent = one(&shared, item, stop).await;
            if sent {
                bar.inc(1);
            }
            drop(permit);
            sent
        });
    }
    while let Some(joined) = tasks.join_next().await {
        if let Ok(false) = joined {
            not_sent += 1;
        }
    }
    let makespan = started.elapsed();
    ticker.abort();
    bar.finish_and_clear();

    let interrupted = *stop.borrow() > 0;
    let tally = shared.tally.lock().unwrap_or_else(|e| e.into_inner());
    print_summary(&Summary {
        model: &entry.id,
        provider: &entry.provider,
        total: total_items,
        skipped,
        previous: &previous,
        bad: bad.len(),
        tally: &tally,
        makespan,
        rpm: entry.limits.rpm,
        rate_limited: recorder.rate_limited(),
        overloaded: recorder.overloaded(),
        retries: recorder.retries(),
        not_sent,
        output: &args.output,
    });
    let failed: u64 = tally.failed.values().sum();
    Ok(if interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if failed > 0 || previous.kept_failures > 0 || !bad.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs one request and writes its line; false if it was dropped unsent by Ctrl-C.
async fn one(shared: &Shared, item: Item, mut stop: StopLevel) -> bool {
    let mut job =
        JobContext::new(item.custom_id.clone(), shared.retries).with_priority(shared.priority);
    if let Some(cap) = &shared.cap {
        job = job.with_spend_cap(cap.clone());
    }
    let started = clock::now();
    if shared.preadmit
        && let Body::Chat(request) = &item.body
        && let Ok(limiter) = shared.models.limiter(&shared.model_id)
    {
        // Wait for the reservation here, where Ctrl-C can drop it unsent; the pipeline
        // takes the grant for the first attempt.
        let entry = shared.models.catalog().get(&shared.model_id).ok();
        let output = entry
            .and_then(|e| e.output_limit(request.sampling_params().max_output_tokens()))
            .unwrap_or(0);
        let cost = Cost::call(DefaultEstimator.estimate_request(request), output);
        let admission = Admission::new(limiter.clone());
        let grant = tokio::select! {
            biased;
            _ = reached(&mut stop, 1) => return false,
            g = admission.admit_with(cost, shared.priority) => g,
        };
        match grant {
            Ok(grant) => job = job.with_admitted(grant),
            Err(e) => {
                write_line(shared, &item, Err(e), started.elapsed());
                return true;
            }
        }
    } else if *stop.borrow() >= 1 {
        return false;
    }
    let models = shared.models.for_job(job);
    let call = async {
        match &item.body {
            Body::Chat(request) => {
                let client = if shared.args_fallback {
                    models
                        .chat_with_fallbacks(&shared.model_id, FallbackOptions::default())
                        .await
                } else {
                    models.chat(&shared.model_id).await
                };
                let response = client?.single_response(request).await?;
                Ok(Answer::Chat(response))
            }
            Body::Embed(texts) => {
                let client = models.embeddings(&shared.model_id).await?;
                let vectors = client.embed_batch(texts, shared.purpose).await?;
                Ok(Answer::Embed(
                    vectors.into_iter().map(|v| v.into_vec()).collect(),
                ))
            }
        }
    };
    let result = tokio::select! {
        biased;
        _ = reached(&mut stop, 2) => Err(Error::Cancelled),
        r = call => r,
    };
    write_line(shared, &item, result, started.elapsed());
    true
}

enum Answer {
    Chat(tollgate::LlmResponse),
    Embed(Vec<Vec<f32>>),
}

fn write_line(shared: &Shared, item: &Item, result: Result<Answer, Error>, latency: Duration) {
    let records: Vec<CallRecord> = shared.recorder.take(&item.custom_id);
    let mut usage = Usage::default();
    let mut attempts = 0;
    let mut cost: Option<f64> = None;
    let mut model = shared.model_id.clone();
    for r in &records {
        usage = add(usage, r.usage);
        attempts += r.attempts;
        if let Some(c) = r.cost_usd {
            cost = Some(cost.unwrap_or(0.0) + c);
        }
        if r.outcome == Outcome::Success {
            model.clone_from(&r.model_id);
        }
    }
    let n = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let request_id = format!("req_{:06}", n);
    let (response, error) = match &result {
        Ok(Answer::Chat(r)) => {
            let body = output::chat_body(
                &request_id,
                r.model(),
                &r.text(),
                output::finish_reason(r.stop_reason()),
                &usage,
            );
            (
                Some(ResponsePart {
                    status_code: 200,
                    request_id: request_id.clone(),
                    body,
                }),
                None,
            )
        }
        Ok(Answer::Embed(vectors)) => {
            let body = output::embeddings_body(&model, vectors, &usage);
            (
                Some(ResponsePart {
                    status_code: 200,
                    request_id: request_id.clone(),
                    body,
                }),
                None,
            )
        }
        Err(e) => (
            None,
            Some(ErrorPart {
                code: code(e).to_owned(),
                message: e.to_string(),
                retryable: retry_on_rerun(e),
            }),
        ),
    };
    let line = OutputLine {
        id: format!("batch_{request_id}"),
        custom_id: item.custom_id.clone(),
        response,
        error: error.clone(),
        tollgate: Meta {
            model,
            attempts,
            usage,
            cost_usd: cost,
            latency_ms: latency.as_millis() as u64,
            line: item.line,
        },
    };
    {
        let mut tally = shared.tally.lock().unwrap_or_else(|e| e.into_inner());
        match &error {
            None => tally.succeeded += 1,
            Some(e) => *tally.failed.entry(e.code.clone()).or_default() += 1,
        }
        tally.usage = add(tally.usage, usage);
        tally.cost_usd += cost.unwrap_or(0.0);
        tally.attempts += u64::from(attempts);
    }
    if let Ok(mut text) = serde_json::to_string(&line) {
        text.push('\n');
        let mut out = shared.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            eprintln!(
                "tollgate: cannot write the result of `{}`: {e}",
                item.custom_id
            );
        }
    }
}

/// The error's stable kind, as records name it.
fn code(e: &Error) -> &'static str {
    e.kind()
}

fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        cache_read_tokens: a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
        cache_write_1h_tokens: a.cache_write_1h_tokens + b.cache_write_1h_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
    }
}

/// Ctrl-C presses, each one seen: the stream is registered once, so a second press
/// that comes while the first is handled is not lost.
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> std::io::Result<Self> {
        Ok(Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
        })
    }

    /// The next press; false when no more can come.
    async fn next(&mut self) -> bool {
        #[cfg(unix)]
        return self.signal.recv().await.is_some();
        #[cfg(not(unix))]
        return tokio::signal::ctrl_c().await.is_ok();
    }
}
