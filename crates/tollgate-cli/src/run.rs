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
mod batch;
mod interrupts;
mod lines;
mod request;

pub(crate) use args::{Purpose, RunArgs, Via};
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

    // `--via batch` / `auto` / `--cancel`: the provider's batch API, checked before
    // anything is sent.
    let cap = args
        .max_cost
        .map(|usd| SpendCap::new("tollgate run --max-cost", usd));
    let batch_mode = args.via != Via::Live || args.cancel;
    let batch_run = if batch_mode {
        if wanted != ModelKind::Chat {
            return Err(format!(
                "`--via {}` takes chat requests only; send embeddings with `--via live`",
                via_name(args.via)
            )
            .into());
        }
        let transport = models
            .batch(&entry.id)
            .await
            .map_err(|e| format!("{e}; send the requests with `--via live`"))?;
        let credential = entry.credential.clone().unwrap_or_default();
        Some(batch::BatchRun {
            transport,
            ledger: source.queues.clone(),
            account: format!("{}:{credential}:{}", entry.provider, entry.name),
            caps: tollgate::limit::QueueCaps {
                tokens: entry.batch.queue_tokens,
                batches: entry.batch.max_batches,
            },
            max_requests: entry.batch.max_requests,
            max_bytes: entry.batch.max_bytes,
            price: entry.batch.price(entry.price.as_ref()),
            live_price: entry.price,
            poll_every: args.poll_every,
            state_path: batch::state::path_for(&args.output),
            model_id: entry.id.clone(),
            cancel: args.cancel,
            cap: cap.clone(),
            default_output_tokens: entry.output_limit(None),
        })
    } else {
        None
    };
    // Requests in an earlier run's batches, still at the provider, are never sent live
    // (that would pay for them twice): the batch part collects them.
    let in_batches =
        batch::state::State::load(&batch::state::path_for(&args.output), &entry.id)?.held_ids();
    if args.via == Via::Live
        && !args.cancel
        && todo.iter().any(|i| in_batches.contains(&i.custom_id))
    {
        return Err(format!(
            "{} requests of this output are in batches still at the provider (`{}`): run \
             again with `--via batch` to collect them (or `--cancel` to cancel them); sending \
             them live would pay for them twice",
            in_batches.len(),
            batch::state::path_for(&args.output).display()
        )
        .into());
    }
    let (todo, batched) = match (args.via, args.cancel) {
        (Via::Live, false) => (todo, Vec::new()),
        (Via::Live | Via::Batch, _) | (Via::Auto, true) => (Vec::new(), todo),
        (Via::Auto, false) => {
            let deadline = args.deadline.ok_or(
                "`--via auto` needs `--deadline` (how long the live part may take, e.g. 20m)",
            )?;
            let (held, free): (Vec<Item>, Vec<Item>) = todo
                .into_iter()
                .partition(|i| in_batches.contains(&i.custom_id));
            let (live, mut batched) = split_by_deadline(free, deadline, &entry);
            batched.extend(held);
            (live, batched)
        }
    };
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
        cap,
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
        ProgressBar::new((todo.len() + batched.len()) as u64)
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
    let batch_part = async {
        match &batch_run {
            Some(run) => batch::run_batches(run, batched, &shared.lines, stop.clone(), &bar)
                .await
                .map(Some),
            None => Ok(None),
        }
    };
    let live_count = todo.len();
    let live_part = async {
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
        not_sent
    };
    let (not_sent, batch_tally) = tokio::join!(live_part, batch_part);
    let batch_tally = batch_tally?;
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
        not_sent: not_sent + batch_tally.as_ref().map_or(0, |b| b.not_sent as usize),
        batched: batch_tally.as_ref().map_or(0, |b| b.requests + b.refused),
        output: &args.output,
    });
    if let (Some(b), Some(run)) = (&batch_tally, &batch_run) {
        print_batch_summary(b, run, &args, live_count, &tally);
    }
    let failed: u64 = tally.failed.values().sum();
    let in_flight = batch_tally.as_ref().is_some_and(|b| b.in_flight > 0);
    Ok(if interrupted || in_flight {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if failed > 0 || previous.kept_failures > 0 || !bad.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `--via`'s name for `via`.
fn via_name(via: Via) -> &'static str {
    match via {
        Via::Live => "live",
        Via::Batch => "batch",
        Via::Auto => "auto",
    }
}

/// `--via auto`: the first requests, in input order, that the model's live limits can
/// take within `deadline` (by its rpm, and by its tpm or input_tpm at the requests' mean
/// estimated size) go live; the rest go as batches.
fn split_by_deadline(
    items: Vec<Item>,
    deadline: std::time::Duration,
    entry: &tollgate::catalog::ModelEntry,
) -> (Vec<Item>, Vec<Item>) {
    use tollgate::pipeline::{DefaultEstimator, TokenEstimator};
    let minutes = deadline.as_secs_f64() / 60.0;
    let sizes: Vec<u64> = items
        .iter()
        .map(|i| match &i.body {
            Body::Chat(r) => {
                DefaultEstimator.estimate_request(r)
                    + entry
                        .output_limit(r.sampling_params().max_output_tokens())
                        .unwrap_or(0)
            }
            Body::Embed(texts) => texts.iter().map(|t| t.len() as u64 / 4 + 1).sum(),
        })
        .collect();
    let mean = sizes.iter().sum::<u64>() as f64 / sizes.len().max(1) as f64;
    let mut capacity = f64::INFINITY;
    if entry.limits.rpm > 0 {
        capacity = capacity.min(entry.limits.rpm as f64 * minutes);
    }
    let tpm = if entry.limits.tpm > 0 {
        entry.limits.tpm
    } else {
        entry.limits.input_tpm
    };
    if tpm > 0 && mean > 0.0 {
        capacity = capacity.min(tpm as f64 * minutes / mean);
    }
    let live = if capacity.is_finite() {
        (capacity.floor() as usize).min(items.len())
    } else {
        items.len()
    };
    let mut items = items;
    let batched = items.split_off(live);
    (items, batched)
}

/// The batch part's lines of the summary: where the requests went, what they cost, and
/// what the same answers would have cost live.
fn print_batch_summary(
    b: &batch::BatchTally,
    run: &batch::BatchRun,
    args: &RunArgs,
    live_count: usize,
    tally: &crate::progress::Tally,
) {
    let via_batch = b.requests + b.refused;
    if args.via == Via::Auto {
        println!(
            "  via        {live_count} live (what the live limits take in {}), {via_batch} batch",
            humantime::format_duration(args.deadline.unwrap_or_default())
        );
    }
    println!(
        "  batches    {} submitted, {} collected, {} still at the provider; {} requests answered from batches, {} refused before upload",
        b.submitted, b.collected, b.in_flight, b.requests, b.refused
    );
    if run.price.is_some() {
        let live_part = tally.cost_usd - b.cost_usd;
        let all_live = live_part + b.live_cost_usd;
        println!(
            "  batch cost ${:.6} at the batch price (live ${:.6}); this run ${:.6}, all live ${:.6}, saved ${:.6}",
            b.cost_usd,
            b.live_cost_usd,
            tally.cost_usd,
            all_live,
            all_live - tally.cost_usd
        );
    }
    if b.in_flight > 0 {
        println!(
            "  {} batch(es) are still at the provider (`{}`): run the same command again to collect them, or add --cancel",
            b.in_flight,
            run.state_path.display()
        );
    }
}
