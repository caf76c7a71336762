//! Benchmark 5, and the convergence of issue item 4, reduced: pacing by the provider's
//! rate-limit headers against the simulated provider, on tokio's paused clock. Hard
//! assertions on behaviour; nothing here reads the wall clock.

use std::time::Duration;

use tollgate_bench::headers::{
    self, ConvergeConfig, ConvergeReport, HeadersConfig, HeadersScenario,
};
use tollgate_sim::{SimHeaderStyle, SimWindow};

fn scenario(window: SimWindow, style: SimHeaderStyle, catalog_factor: u64) -> HeadersScenario {
    HeadersScenario {
        window,
        style,
        catalog_factor,
    }
}

const STYLES: [SimHeaderStyle; 2] = [SimHeaderStyle::Anthropic, SimHeaderStyle::OpenAi];
const WINDOWS: [SimWindow; 2] = [SimWindow::Continuous, SimWindow::Fixed];

#[tokio::test(start_paused = true)]
async fn headers_pace_60_requests_at_rpm_30_at_the_best_makespan_without_a_429() {
    for window in WINDOWS {
        for style in STYLES {
            let r = headers::run(scenario(window, style, 1), HeadersConfig::FULL).await;
            let what = format!("{window:?} {style:?}: {r:?}");
            assert_eq!(r.failed, 0, "{what}");
            assert_eq!(r.rate_limited, 0, "{what}");
            assert!(r.makespan_ratio() <= 1.03, "{what}");
            assert!(r.mean_ratio() <= 1.1, "{what}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn headers_correct_a_catalog_at_twice_the_served_rate() {
    for window in WINDOWS {
        for style in STYLES {
            let r = headers::run(scenario(window, style, 2), HeadersConfig::FULL).await;
            let what = format!("{window:?} {style:?}: {r:?}");
            assert_eq!(r.failed, 0, "{what}");
            assert!(r.rate_limited <= 3, "{what}");
            assert!(r.makespan_ratio() <= 1.1, "{what}");
        }
    }
}

/// Item 4's targets: within ±10% of the served rate inside 60 s, and fewer than one 429
/// a minute in steady state.
fn assert_converges_quietly(r: &ConvergeReport) {
    let what = format!(
        "{:?}: converge {:?}, {} 429s/min, goodput {}, factor {}, 429s at {:?}",
        r.scenario, r.converge, r.steady_429_per_min, r.goodput, r.rate_factor, r.rate_limited_at
    );
    let converge = r.converge.expect(&what);
    assert!(converge <= Duration::from_secs(60), "{what}");
    assert!(r.steady_429_per_min < 1.0, "{what}");
}

#[tokio::test(start_paused = true)]
async fn throttle_converges_continuous_catalog_2x_with_headers() {
    for style in STYLES {
        let r = headers::converge(
            scenario(SimWindow::Continuous, style, 2),
            ConvergeConfig::FULL,
        )
        .await;
        assert_converges_quietly(&r);
    }
}

#[tokio::test(start_paused = true)]
async fn throttle_converges_continuous_catalog_2x_without_headers() {
    let r = headers::converge(
        scenario(SimWindow::Continuous, SimHeaderStyle::None, 2),
        ConvergeConfig::FULL,
    )
    .await;
    let what = format!("{r:?}");
    // Converged within a minute, every send in band after it. Steady state costs a
    // probe's 429 per cycle plus, now and then, a clump of a few one `retry-after` apart:
    // 1.0 a minute against the target of fewer than one (not met yet, see
    // docs/rate-limiting.md), bounded here so that it cannot get worse unnoticed.
    let converge = r.converge.expect(&what);
    assert!(converge <= Duration::from_secs(60), "{what}");
    assert!(r.steady_429_per_min <= 1.5, "{what}");
    assert!(r.goodput >= 0.95, "{what}");
}

#[tokio::test(start_paused = true)]
async fn throttle_converges_fixed_window_catalog_2x_with_headers() {
    for style in STYLES {
        let r = headers::converge(scenario(SimWindow::Fixed, style, 2), ConvergeConfig::FULL).await;
        assert_converges_quietly(&r);
    }
}

#[tokio::test(start_paused = true)]
async fn throttle_converges_fixed_window_catalog_2x_without_headers() {
    let r = headers::converge(
        scenario(SimWindow::Fixed, SimHeaderStyle::None, 2),
        ConvergeConfig::FULL,
    )
    .await;
    assert_converges_quietly(&r);
}

#[test]
fn best_possible_is_the_provider_replayed_exactly() {
    // Continuous rpm 30: 20 at once, 10 more as the first answer, then one every 2 s.
    let (makespan, _) = headers::best_possible(
        scenario(SimWindow::Continuous, SimHeaderStyle::None, 1),
        HeadersConfig::FULL,
    );
    assert_eq!(makespan, Duration::from_secs(61));
    // Fixed windows: 30 in the first minute, 30 when it turns (20, then 10 a second later).
    let (makespan, _) = headers::best_possible(
        scenario(SimWindow::Fixed, SimHeaderStyle::None, 1),
        HeadersConfig::FULL,
    );
    assert_eq!(makespan, Duration::from_secs(62));
}
