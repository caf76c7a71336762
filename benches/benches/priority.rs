//! Benchmark 4: priority classes, interactive queue delay under a saturating batch load,
//! one FIFO queue against `Interactive` / `Batch`, on tokio's paused clock. Prints one
//! table (and writes it where `TOLLGATE_BENCH_OUT` says).

use tollgate_bench::priority::{self, PriorityConfig, Queueing};

fn main() {
    let config = PriorityConfig::FULL;
    let reports: Vec<_> = Queueing::ALL
        .iter()
        .map(|queueing| {
            let r = tollgate_bench::paused_runtime().block_on(priority::run(*queueing, config));
            eprintln!(
                "{}: interactive p50 {:.3} s, p99 {:.3} s ({} calls); batch {:.1} / min",
                queueing.name(),
                r.interactive_delay(0.5),
                r.interactive_delay(0.99),
                r.interactive,
                r.batch_per_min
            );
            r
        })
        .collect();
    priority::section(&reports, config).emit();
}
