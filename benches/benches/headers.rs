//! Benchmark 5: pacing by the provider's rate-limit headers, every window kind, header
//! style and catalog factor, on tokio's paused clock. Prints one table (and writes it
//! where `TOLLGATE_BENCH_OUT` says).

use tollgate_bench::headers::{self, HeadersConfig, HeadersScenario};

fn main() {
    let config = HeadersConfig::FULL;
    let mut reports = Vec::new();
    for scenario in HeadersScenario::all() {
        let report = tollgate_bench::paused_runtime().block_on(headers::run(scenario, config));
        eprintln!(
            "{} / {} / {}x: makespan {:.1} s (best {:.1} s, {:.3}x), {} 429s, mean {:.3}x, {} failed",
            scenario.window_name(),
            scenario.style_name(),
            scenario.catalog_factor,
            report.makespan.as_secs_f64(),
            report.best_makespan.as_secs_f64(),
            report.makespan_ratio(),
            report.rate_limited,
            report.mean_ratio(),
            report.failed,
        );
        reports.push(report);
    }
    let section = headers::section(&reports, config);
    let converge_config = headers::ConvergeConfig::FULL;
    let mut converged = Vec::new();
    for scenario in HeadersScenario::all()
        .into_iter()
        .filter(|s| s.catalog_factor == 2)
    {
        let report =
            tollgate_bench::paused_runtime().block_on(headers::converge(scenario, converge_config));
        eprintln!(
            "converge {} / {}: {:?}, {:.2} 429s/min, goodput {:.3}, factor {:.2}",
            scenario.window_name(),
            scenario.style_name(),
            report.converge,
            report.steady_429_per_min,
            report.goodput,
            report.rate_factor,
        );
        converged.push(report);
    }
    let second = headers::converge_section(&converged, converge_config);
    tollgate_bench::report::emit_all(&[section, second]);
}
