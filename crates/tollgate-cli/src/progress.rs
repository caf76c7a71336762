//! `tollgate run`'s progress bar and its summary at the end.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::ProgressBar;
use tokio::time::Instant;
use tollgate::Usage;
use tollgate::catalog::Limits;
use tollgate::clock;
use tollgate::limit::LimiterBackend;

use crate::record::CliRecorder;
use crate::resume::Previous;

/// Counts for the progress bar and the summary.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) succeeded: u64,
    pub(crate) failed: BTreeMap<String, u64>,
    pub(crate) usage: Usage,
    pub(crate) cost_usd: f64,
    pub(crate) attempts: u64,
}

/// How often the progress bar's figures are refreshed.
const PROGRESS_TICK: Duration = Duration::from_millis(250);
/// The window over which the bar's request rate is measured.
const RATE_WINDOW: Duration = Duration::from_secs(10);

/// Refreshes the progress bar's figures until aborted: the request rate of the last ten
/// seconds against the model's rpm, callers waiting for `limiter`, 429s and cost.
pub(crate) async fn progress(
    tally: Arc<Mutex<Tally>>,
    recorder: Arc<CliRecorder>,
    limiter: Option<Arc<dyn LimiterBackend>>,
    bar: ProgressBar,
    limits: Limits,
) {
    let mut window: VecDeque<(Instant, u64)> = VecDeque::new();
    loop {
        bar.tick();
        let now = clock::now();
        let (done, cost) = {
            let t = tally.lock().unwrap_or_else(|e| e.into_inner());
            (t.succeeded + t.failed.values().sum::<u64>(), t.cost_usd)
        };
        window.push_back((now, done));
        while window.len() > 1 && now - window[0].0 > RATE_WINDOW {
            window.pop_front();
        }
        let (t0, d0) = window[0];
        let secs = (now - t0).as_secs_f64();
        let rate = if secs > 0.5 {
            (done - d0) as f64 * 60.0 / secs
        } else {
            0.0
        };
        let waiting = match &limiter {
            Some(l) => l.snapshot().await.map(|s| s.queued).unwrap_or(0),
            None => 0,
        };
        let limit = if limits.rpm > 0 {
            format!("{rate:.0}/{} rpm", limits.rpm)
        } else {
            format!("{rate:.0}/min")
        };
        bar.set_message(format!(
            "{limit} · {waiting} waiting · 429s {} · ${cost:.4}",
            recorder.rate_limited()
        ));
        tokio::time::sleep(PROGRESS_TICK).await;
    }
}

/// What the summary at the end of a run says.
pub(crate) struct Summary<'a> {
    pub(crate) model: &'a str,
    pub(crate) provider: &'a str,
    /// Requests in the input.
    pub(crate) total: usize,
    /// Of those, already done by an earlier run (their lines kept).
    pub(crate) skipped: usize,
    /// What the earlier output held.
    pub(crate) previous: &'a Previous,
    pub(crate) bad: usize,
    pub(crate) tally: &'a Tally,
    pub(crate) makespan: Duration,
    pub(crate) rpm: u64,
    pub(crate) rate_limited: u64,
    pub(crate) overloaded: u64,
    pub(crate) retries: u64,
    pub(crate) not_sent: usize,
    /// Of those done, the lines written from a provider's batch (`--via batch`), which
    /// the live rate leaves out.
    pub(crate) batched: u64,
    pub(crate) output: &'a std::path::Path,
}

/// Prints the summary on stdout.
pub(crate) fn print_summary(s: &Summary<'_>) {
    let t = s.tally;
    let failed: u64 = t.failed.values().sum();
    let done = t.succeeded + failed;
    println!(
        "tollgate run: {} requests for `{}` ({}): {} already done, {} bad lines",
        s.total, s.model, s.provider, s.skipped, s.bad
    );
    let p = s.previous;
    if !p.kept.is_empty() || p.retried > 0 || p.discarded > 0 {
        let mut parts = vec![format!("{} lines kept", p.kept.len())];
        if p.kept_failures > 0 {
            parts.push(format!(
                "{} of them failures that a re-run would meet again (--retry-failed sends them)",
                p.kept_failures
            ));
        }
        if p.retried > 0 {
            parts.push(format!("{} failed earlier and sent again", p.retried));
        }
        if p.discarded > 0 {
            parts.push(format!("{} cut short or repeated, dropped", p.discarded));
        }
        println!("  resumed    {}", parts.join("; "));
    }
    println!("  succeeded  {}", t.succeeded);
    let kinds = t
        .failed
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if failed > 0 {
        println!("  failed     {failed} ({kinds})");
    } else {
        println!("  failed     0");
    }
    println!(
        "  tokens     {} in ({} cached), {} out",
        t.usage.total_input_tokens(),
        t.usage.cache_read_tokens,
        t.usage.output_tokens
    );
    println!("  cost       ${:.6}", t.cost_usd);
    let secs = s.makespan.as_secs_f64();
    let live = done.saturating_sub(s.batched);
    let rate = if secs > 0.0 {
        live as f64 * 60.0 / secs
    } else {
        0.0
    };
    let share = if s.rpm > 0 {
        format!(" = {:.0}% of {} rpm", rate * 100.0 / s.rpm as f64, s.rpm)
    } else {
        String::new()
    };
    if live > 0 || s.batched == 0 {
        println!("  makespan   {secs:.1} s ({rate:.0} requests/min{share})");
    } else {
        println!("  makespan   {secs:.1} s (through the batch API)");
    }
    println!(
        "  429s       {} (529s {}, retries {}, attempts {})",
        s.rate_limited, s.overloaded, s.retries, t.attempts
    );
    if s.not_sent > 0 {
        println!(
            "  interrupted: {} not sent; run the same command again to resume",
            s.not_sent
        );
    }
    println!("  output     {}", s.output.display());
}
