//! Benchmark 3: adaptive convergence when the provider serves a fraction of what it
//! publishes; every controller in every scenario, on tokio's paused clock. Prints one
//! table (and writes it where `TOLLGATE_BENCH_OUT` says).

use tollgate_bench::adaptive::{self, AdaptiveConfig};
use tollgate_bench::clients::Strategy;

fn main() {
    let config = AdaptiveConfig::FULL;
    let mut reports = Vec::new();
    for scenario in adaptive::scenarios() {
        for strategy in Strategy::ADAPTIVE {
            let report = tollgate_bench::paused_runtime()
                .block_on(adaptive::run(strategy, &scenario, config));
            eprintln!(
                "{} / {}: converge {:?}, 429/min {:.1}, goodput {:.3}, cv {:.3}, recover {:?}, {} sends",
                scenario.name,
                strategy.name(),
                report.converge,
                report.steady_429_per_min,
                report.goodput,
                report.oscillation,
                report.recover,
                report.sends
            );
            reports.push(report);
        }
    }
    adaptive::section(&reports, config).emit();
}
