//! Benchmark 1's table: one row per scenario and implementation, its baseline ratio,
//! wake-ups, allocations and latencies, and the section's text (how each row was
//! measured, with the run's sizes).

use super::QueueReport;
use crate::report::{Section, Table, num, ratio};
use crate::stats;

/// Criterion samples per row.
pub const SAMPLES: usize = 20;
/// Tasks in the queue scenarios.
pub const QUEUED: usize = 10_000;
/// Runs of each queue scenario (the median run is reported; latencies are pooled).
pub const QUEUE_RUNS: usize = 5;

/// A row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario (fast path, two threads, clock, floor, queue).
    pub scenario: &'static str,
    /// The implementation measured.
    pub name: String,
    /// Nanoseconds per operation.
    pub ns: f64,
    /// The baseline's nanoseconds, for the ratio.
    pub baseline: Option<f64>,
    /// Wake-ups delivered per grant (queue rows).
    pub wakes: Option<f64>,
    /// Heap allocations per operation.
    pub allocs: Option<f64>,
    /// Available → resumed, p50 and p99 in ns (queue rows).
    pub latency: Option<(f64, f64)>,
}

impl Row {
    /// A row of `ns` per operation, with nothing beside it.
    pub fn new(scenario: &'static str, name: &str, ns: f64) -> Self {
        Row {
            scenario,
            name: name.to_owned(),
            ns,
            baseline: None,
            wakes: None,
            allocs: None,
            latency: None,
        }
    }

    /// Against `baseline` ns per operation.
    pub fn vs(mut self, baseline: f64) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// With `allocs` allocations per operation.
    pub fn allocs(mut self, allocs: f64) -> Self {
        self.allocs = Some(allocs);
        self
    }
}

/// A queue scenario's row from its runs: the median run's time, the worst wake-up
/// count, latencies pooled.
pub fn queue_row(scenario: &'static str, name: &str, runs: &[QueueReport]) -> Row {
    let mut by_speed: Vec<&QueueReport> = runs.iter().collect();
    by_speed.sort_by(|a, b| a.ns_per_task().total_cmp(&b.ns_per_task()));
    let median = by_speed[by_speed.len() / 2];
    let latencies: Vec<f64> = runs.iter().flat_map(|r| r.latencies_ns.clone()).collect();
    Row {
        wakes: Some(
            runs.iter()
                .map(QueueReport::wakes_per_grant)
                .fold(0.0, f64::max),
        ),
        latency: Some((
            stats::percentile(&latencies, 0.5),
            stats::percentile(&latencies, 0.99),
        )),
        ..Row::new(scenario, name, median.ns_per_task())
    }
}

/// Benchmark 1's section of `docs/benchmarks.md`.
pub fn section(rows: &[Row]) -> Section {
    let mut table = Table::new(&[
        "scenario",
        "implementation",
        "ns/op",
        "× baseline",
        "wake-ups / grant",
        "allocations / op",
        "available → resumed p50 / p99",
    ]);
    for r in rows {
        table.row(vec![
            r.scenario.to_owned(),
            r.name.clone(),
            num(r.ns, 1),
            r.baseline.map_or("–".to_owned(), |b| ratio(r.ns / b)),
            r.wakes.map_or("–".to_owned(), |w| num(w, 3)),
            r.allocs.map_or("–".to_owned(), |a| num(a, 2)),
            r.latency.map_or("–".to_owned(), |(p50, p99)| {
                format!("{} / {} µs", num(p50 / 1e3, 1), num(p99 / 1e3, 1))
            }),
        ]);
    }
    Section {
        title: "1. Limiter overhead".to_owned(),
        intro: vec![format!(
            "Fast-path rows are criterion measurements (median of {SAMPLES} samples, 1 s \
             each, after 0.3 s of warm-up); the limiters are sized so that every call \
             succeeds. Queue rows queue {QUEUED} tasks on a paused tokio clock, then release \
             them one at a time; each is run {QUEUE_RUNS} times and the median run reported."
        )],
        table,
        notes: vec![
            "× baseline: the fast path and thread rows against tokio's `Semaphore` doing the \
             same (acquire kept, or acquire and release); the queue rows against leaky-bucket \
             (clock) or `Semaphore(1)` (hand-off); the clock rows against `std::time::Instant`; \
             the floor rows against the semaphore's acquire + `forget`."
                .to_owned(),
            "the floor: what a limiter that is exact (it must know the time of every grant, \
             read from tokio's clock so that paused-clock tests hold) and hands out owned \
             reservations (which give capacity back when dropped, so each holds its limiter) \
             pays before doing any work. On this machine it is above twice the semaphore, so \
             BENCHMARKS.md's target for the fast path (at most 2x the semaphore) is out of reach \
             for such a design; governor's lock-free check of a single limiter is above it too."
                .to_owned(),
            "tollgate's fast-path rows reserve on two buckets (requests and tokens) and read \
             tokio's clock once; the semaphore has one counter and no clock. governor and \
             leaky-bucket get two limiters to cover the same two limits. Governor reads its \
             clock once per limiter: on its default clock (quanta's TSC read) that is the \
             cheapest clock there is; the row on `std::time::Instant` is governor doing equal \
             work, reading the clock tollgate reads (tokio's, which is std's until a clock is \
             paused)."
                .to_owned(),
            "wake-ups / grant: wake-ups delivered to each waiting future through a counting \
             waker, over grants (the worst of the runs). 1.000 means no task was woken in vain."
                .to_owned(),
            "available → resumed: wall time from just before the manual clock is advanced (or \
             the previous holder gives back) to the waiting task running again, pooled over \
             the runs."
                .to_owned(),
            "allocations / op: heap allocations counted by a counting global allocator over \
             100,000 operations."
                .to_owned(),
            "The bench binary enables tokio's test-util (the paused clock needs it). Until a \
             clock is paused in the process, `tokio::time::Instant::now` is a plain read of \
             the system clock; afterwards every read takes a mutex (last row), which is why \
             the queue rows run last."
                .to_owned(),
        ],
    }
}
