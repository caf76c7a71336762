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
//!
//! Here the command itself: the batch read, the model's clients built, the requests fed
//! under `--concurrency`, the summary. Its arguments are in `args.rs`, one request in
//! `request.rs`, its output line in `lines.rs`, Ctrl-C in `interrupts.rs`.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tollgate::SpendCap;
use tollgate::catalog::ModelKind;
use tollgate::clock;
use tollgate::pipeline::FallbackOptions;

use crate::input::{Body, Item, parse_line};
use crate::output;
use crate::progress::{Summary, print_summary, progress};
use crate::record::CliRecorder;
use crate::resume;
use crate::setup::Source;
use crate::{CliResult, EXIT_INTERRUPTED};

mod args;
mod interrupts;
mod lines;
mod request;

pub(crate) use args::{Purpose, RunArgs};
use interrupts::{reached, watch_interrupts};
use lines::LineWriter;
use request::{Shared, one};

/// Runs the batch `args` names with the models of `source`; the exit status says
/// whether every request succeeded, or the run was interrupted.
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
        fallback: args.fallback,
        retries: args.retries,
        priority: args.priority.into(),
        purpose: args.purpose.into(),
        cap: args
            .max_cost
            .map(|usd| SpendCap::new("tollgate run --max-cost", usd)),
        preadmit,
        lines: LineWriter {
            model_id: entry.id.clone(),
            recorder: recorder.clone(),
            out: Mutex::new(out),
            tally: Arc::default(),
            next_id: AtomicU64::new(previous.next_seq),
        },
    });

    let stop = watch_interrupts()?;

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
        shared.lines.tally.clone(),
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
    let tally = shared.lines.tally.lock().unwrap_or_else(|e| e.into_inner());
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
