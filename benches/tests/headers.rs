//! Benchmark 5, and the convergence of issue item 4, reduced: pacing by the provider's
//! rate-limit headers against the simulated provider, on tokio's paused clock, with
//! requests reaching it and answers coming back out of order (issue 22: an estimator that
//! counts a grant both in a report's `remaining` and as made since its request was sent
//! misses the makespan target here). Hard assertions on behaviour; nothing here reads the
//! wall clock.

use std::time::Duration;

use tollgate_bench::headers::{
    self, ConvergeConfig, ConvergeReport, HeadersConfig, HeadersScenario,
};
use tollgate_sim::{SimDelay, SimHeaderStyle, SimWindow};

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

#[tokio::test(start_paused = true)]
async fn throttle_converges_fixed_window_catalog_2x_without_headers_when_answers_come_in_order() {
    let r = headers::converge(
        scenario(SimWindow::Fixed, SimHeaderStyle::None, 2),
        ConvergeConfig::IN_ORDER,
    )
    .await;
    assert_converges_quietly(&r);
}

#[test]
fn best_possible_is_the_provider_replayed_exactly() {
    // Answers in 1 s, no network delay. Continuous rpm 30: 20 at once, 10 more as the
    // first answer, then one every 2 s.
    let (makespan, _) = headers::best_possible(
        scenario(SimWindow::Continuous, SimHeaderStyle::None, 1),
        HeadersConfig::IN_ORDER,
    );
    assert_eq!(makespan, Duration::from_secs(61));
    // Fixed windows: 30 in the first minute, 30 when it turns (20, then 10 a second later).
    let (makespan, _) = headers::best_possible(
        scenario(SimWindow::Fixed, SimHeaderStyle::None, 1),
        HeadersConfig::IN_ORDER,
    );
    assert_eq!(makespan, Duration::from_secs(62));
}

#[test]
fn best_possible_waits_for_each_arrival() {
    let config = HeadersConfig {
        network_delay: SimDelay::Fixed(Duration::from_millis(500)),
        ..HeadersConfig::IN_ORDER
    };
    // Continuous: 20 arrive at 0.5 s, 10 at 2 s (0.75 of a request refilled meanwhile),
    // the next when one has refilled at 2.5 s, then one every 2 s: the last arrives at
    // 60.5 s.
    let (makespan, _) = headers::best_possible(
        scenario(SimWindow::Continuous, SimHeaderStyle::None, 1),
        config,
    );
    assert_eq!(makespan, Duration::from_millis(61_500));
    // Fixed windows: 30 in the first minute; 20 arrive as it turns, 10 when their
    // callers are free again, at 61.5 s.
    let (makespan, _) =
        headers::best_possible(scenario(SimWindow::Fixed, SimHeaderStyle::None, 1), config);
    assert_eq!(makespan, Duration::from_millis(62_500));
}

#[test]
fn best_possible_replays_the_delays_the_provider_draws() {
    // Continuous rpm 30 from a full bucket: the 60th request arrives 60 s after the
    // bucket first lost a request (by 0.1 s), or after the one before it (at most 0.1 s
    // later); then answers in 20 to 800 ms.
    let best = |seed| {
        headers::best_possible(
            scenario(SimWindow::Continuous, SimHeaderStyle::None, 1),
            HeadersConfig {
                seed,
                ..HeadersConfig::FULL
            },
        )
    };
    let (makespan, mean) = best(HeadersConfig::FULL.seed);
    assert!(
        (Duration::from_millis(60_020)..=Duration::from_secs(61)).contains(&makespan),
        "{makespan:?}"
    );
    // Other draws, another best.
    assert_ne!((makespan, mean), best(HeadersConfig::FULL.seed + 1));
}
