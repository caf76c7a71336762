//! Benchmark 2: pacing and goodput against the simulated provider, every client on every
//! profile, on tokio's paused clock. Prints one table (and writes it where
//! `TOLLGATE_BENCH_OUT` says).

use tollgate_bench::clients::Strategy;
use tollgate_bench::pacing::{self, PacingConfig};

fn main() {
    let config = PacingConfig::FULL;
    let mut reports = Vec::new();
    for profile in pacing::profiles() {
        for strategy in Strategy::PACING {
            let report =
                tollgate_bench::paused_runtime().block_on(pacing::run(strategy, &profile, config));
            eprintln!(
                "{} / {}: goodput {:.3}, {} sends, {} 429s, batch {:?}",
                profile.name,
                strategy.name(),
                report.goodput,
                report.sends,
                report.rate_limited,
                report.batch.map(|b| (b.makespan, b.failed, b.bound))
            );
            reports.push(report);
        }
    }
    pacing::section(&reports, config).emit();
}
