//! Benchmark 3: adaptive convergence when a provider serves less than it publishes.
//!
//! The provider publishes `L` requests per minute (one-second buckets) but serves only a
//! fraction α of it ([`scenarios`]): a fixed α for ten minutes, a step from α = 1 to 0.3
//! and back, and α = 1 with 5% of calls refused as overloaded (529) at random. Closed-loop
//! callers offer about twice `L`; each controller is told `L` and must find αL from the
//! provider's answers. A controller's rate is what it *sends* (accepted or refused), per
//! second, judged over trailing 10 s windows: judging what is accepted would call a client
//! that floods the provider converged, since the provider never accepts more than αL.

use std::sync::Arc;
use std::time::Duration;

use tollgate_sim::{
    OutputCharge, RetryAfter, SimCapacity, SimConfig, SimLimits, SimOutcome, SimProvider, SimRng,
};

use crate::clients::{Client, ClientConfig, Strategy};
use crate::report::{Section, Table, num, ratio};
use crate::stats;
use crate::workload::Sizes;

/// How close the 10 s throughput must stay to αL to count as converged.
pub const BAND: f64 = 0.10;
/// How long it must stay in the band.
pub const HOLD: Duration = Duration::from_secs(60);
/// The throughput window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// One served-fraction scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The name in tables.
    pub name: String,
    /// From each offset, the fraction served (the first at zero).
    pub phases: Vec<(Duration, f64)>,
    /// Probability of a 529 per call.
    pub overload: f64,
    /// Simulated time.
    pub duration: Duration,
    /// Which phase convergence is measured in.
    pub converge_phase: usize,
    /// Which phase recovery is measured in (a step back up), if any.
    pub recover_phase: Option<usize>,
    /// The steady-state window `[from, to)`.
    pub steady: (Duration, Duration),
}

impl Scenario {
    /// α served from the start for `duration`; steady state is the second half.
    pub fn fixed(alpha: f64, duration: Duration) -> Self {
        Scenario {
            name: format!("α = {alpha}"),
            phases: vec![(Duration::ZERO, alpha)],
            overload: 0.0,
            duration,
            converge_phase: 0,
            recover_phase: None,
            steady: (duration / 2, duration),
        }
    }

    fn alpha_at(&self, t: Duration) -> f64 {
        self.phases
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .map_or(1.0, |(_, a)| *a)
    }
}

/// Benchmark 3's scenarios, ten simulated minutes each.
pub fn scenarios() -> Vec<Scenario> {
    let ten = Duration::from_secs(600);
    let s = Duration::from_secs;
    let mut all: Vec<Scenario> = [0.9, 0.5, 0.2, 0.1, 0.05]
        .iter()
        .map(|a| Scenario::fixed(*a, ten))
        .collect();
    all.push(Scenario {
        name: "step 1.0 → 0.3 → 1.0".to_owned(),
        phases: vec![(s(0), 1.0), (s(120), 0.3), (s(360), 1.0)],
        overload: 0.0,
        duration: ten,
        converge_phase: 1,
        recover_phase: Some(2),
        steady: (s(240), s(360)),
    });
    all.push(Scenario {
        name: "α = 1, 5% random 529s".to_owned(),
        overload: 0.05,
        ..Scenario::fixed(1.0, ten)
    });
    all
}

/// What the provider publishes and how hard callers push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveConfig {
    /// The published requests per minute `L`.
    pub published_rpm: u64,
    /// Closed-loop callers.
    pub callers: usize,
    /// Seed of sizes, jitter and 529s.
    pub seed: u64,
}

impl AdaptiveConfig {
    /// The benchmark: `L` = 6,000 rpm (100/s), 200 callers.
    pub const FULL: AdaptiveConfig = AdaptiveConfig {
        published_rpm: 6_000,
        callers: 200,
        seed: 3,
    };
}

/// Request sizes: only requests are limited; the output sets the answer time
/// (0.5–1.3 s).
pub const SIZES: Sizes = Sizes {
    input: (200, 2_000),
    max_output: (64, 64),
    actual_percent: (20, 100),
};

/// One controller's results in one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveReport {
    /// The controller.
    pub strategy: Strategy,
    /// The scenario's name.
    pub scenario: String,
    /// From the start of the measured phase to the start of the first 10 s window of a
    /// run of windows whose send rate is within ±10% of αL, lasting 60 s; `None` if never.
    pub converge: Option<Duration>,
    /// The same after the step back up.
    pub recover: Option<Duration>,
    /// 429s per minute in the steady window.
    pub steady_429_per_min: f64,
    /// Accepted over served (αL) in the steady window.
    pub goodput: f64,
    /// Coefficient of variation of the 10 s send rate in the steady window.
    pub oscillation: f64,
    /// Mean send rate in the steady window over αL.
    pub sent_ratio: f64,
    /// Accepted calls per second of the run.
    pub accepted_per_second: Vec<u32>,
    /// Calls sent per second of the run.
    pub sent_per_second: Vec<u32>,
    /// Calls sent.
    pub sends: u64,
}

/// Runs `strategy` in `scenario`. Must run on a paused clock.
pub async fn run(
    strategy: Strategy,
    scenario: &Scenario,
    config: AdaptiveConfig,
) -> AdaptiveReport {
    let limits = SimLimits {
        rpm: config.published_rpm,
        ..SimLimits::default()
    };
    let mut provider_config = SimConfig::new(limits)
        .with_capacity(SimCapacity::PerSecond)
        .with_retry_after(RetryAfter::WholeSeconds)
        .with_served(scenario.phases[0].1)
        .with_overloads(scenario.overload, config.seed);
    for (at, alpha) in &scenario.phases[1..] {
        provider_config = provider_config.with_served_step(*at, *alpha);
    }
    let provider = SimProvider::new(provider_config);
    let client = Client::new(
        strategy,
        provider.clone(),
        &ClientConfig {
            limits,
            capacity: SimCapacity::PerSecond,
            output_charge: OutputCharge::MaxTokens,
        },
    );
    let mut seeds = SimRng::new(config.seed);
    let tasks: Vec<_> = (0..config.callers)
        .map(|caller| {
            let client: Arc<Client> = client.clone();
            let (mut sizes, mut jitter) = (seeds.fork(), seeds.fork());
            let end = scenario.duration;
            tokio::spawn(async move {
                while client.provider().elapsed() < end {
                    let request = SIZES.draw(&mut sizes);
                    client.run(caller, request, &mut jitter).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(scenario.duration).await;
    for t in &tasks {
        t.abort();
    }
    let journal = provider.journal();
    let seconds = scenario.duration.as_secs() as usize;
    let (mut accepted, mut sent) = (vec![0u32; seconds], vec![0u32; seconds]);
    for c in &journal {
        let second = c.at.as_secs() as usize;
        if let Some(n) = sent.get_mut(second) {
            *n += 1;
        }
        if c.outcome == SimOutcome::Accepted
            && let Some(n) = accepted.get_mut(second)
        {
            *n += 1;
        }
    }
    let served_per_second = |t: Duration| scenario.alpha_at(t) * config.published_rpm as f64 / 60.0;
    let phase_span = |i: usize| {
        let from = scenario.phases[i].0;
        let to = scenario
            .phases
            .get(i + 1)
            .map_or(scenario.duration, |p| p.0);
        (from, to)
    };
    let converge_in = |i: usize| {
        let (from, to) = phase_span(i);
        converge(&sent, from, to, served_per_second(from))
    };
    let (from, to) = scenario.steady;
    let steady_429 = journal
        .iter()
        .filter(|c| c.at >= from && c.at < to)
        .filter(|c| matches!(c.outcome, SimOutcome::RateLimited { .. }))
        .count() as f64;
    let minutes = (to - from).as_secs_f64() / 60.0;
    let served = served_per_second(from) * (to - from).as_secs_f64();
    let steady_accepted: u32 = accepted[from.as_secs() as usize..to.as_secs() as usize]
        .iter()
        .sum();
    let rates: Vec<f64> = (from.as_secs() as usize + WINDOW.as_secs() as usize
        ..=to.as_secs() as usize)
        .map(|t| window_rate(&sent, t))
        .collect();
    let steady_sent: u32 = sent[from.as_secs() as usize..to.as_secs() as usize]
        .iter()
        .sum();
    AdaptiveReport {
        strategy,
        scenario: scenario.name.clone(),
        converge: converge_in(scenario.converge_phase),
        recover: scenario.recover_phase.and_then(converge_in),
        steady_429_per_min: steady_429 / minutes,
        goodput: f64::from(steady_accepted) / served,
        oscillation: stats::coefficient_of_variation(&rates),
        sent_ratio: f64::from(steady_sent) / served,
        accepted_per_second: accepted,
        sent_per_second: sent,
        sends: journal.len() as u64,
    }
}

/// Calls per second over the 10 s window ending at second `end`.
fn window_rate(per_second: &[u32], end: usize) -> f64 {
    let w = WINDOW.as_secs() as usize;
    f64::from(per_second[end - w..end].iter().sum::<u32>()) / w as f64
}

/// The first window start in `[from, to)` after which every 10 s window, for [`HOLD`], is
/// within [`BAND`] of `target` per second; measured from `from`.
pub fn converge(per_second: &[u32], from: Duration, to: Duration, target: f64) -> Option<Duration> {
    let (from, to) = (from.as_secs() as usize, to.as_secs() as usize);
    let (w, hold) = (WINDOW.as_secs() as usize, HOLD.as_secs() as usize);
    let good = |end: usize| (window_rate(per_second, end) - target).abs() <= BAND * target;
    (from + w..=to.saturating_sub(hold))
        .find(|end| (*end..=end + hold).all(good))
        .map(|end| Duration::from_secs((end - w - from) as u64))
}

/// Benchmark 3's section: one row per scenario and controller.
pub fn section(reports: &[AdaptiveReport], config: AdaptiveConfig) -> Section {
    let mut table = Table::new(&[
        "scenario",
        "controller",
        "time to converge",
        "steady 429s / min",
        "goodput / αL",
        "goodput vs tollgate",
        "sent / αL",
        "oscillation (CV)",
        "recovery after step up",
    ]);
    let secs = |d: Option<Duration>| d.map_or("never".to_owned(), |d| format!("{} s", d.as_secs()));
    for r in reports {
        let ours = reports
            .iter()
            .find(|t| t.scenario == r.scenario && t.strategy == Strategy::Tollgate)
            .map_or(f64::NAN, |t| t.goodput);
        table.row(vec![
            r.scenario.clone(),
            r.strategy.name().to_owned(),
            secs(r.converge),
            num(r.steady_429_per_min, 1),
            ratio(r.goodput),
            ratio(r.goodput / ours),
            ratio(r.sent_ratio),
            format!("{}%", num(r.oscillation * 100.0, 1)),
            if r.scenario.starts_with("step") {
                secs(r.recover)
            } else {
                "–".to_owned()
            },
        ]);
    }
    Section {
        title: "3. Adaptive throttle convergence".to_owned(),
        intro: vec![format!(
            "The simulated provider publishes L = {} requests per minute (one-second buckets, \
             `retry-after` in whole seconds, answers in 0.5–1.3 s) but serves only αL. {} \
             closed-loop callers offer about twice L for 10 simulated minutes per scenario, on \
             tokio's paused clock. Every controller is told L. tollgate feeds each answer to \
             `TokenBucketRateLimiter::feedback`; the AWS port, AIMD and naive retry are described \
             in `benches/src/clients/`.",
            config.published_rpm, config.callers
        )],
        table,
        notes: vec![
            format!(
                "time to converge: from the start of the phase (α's change) to the start of the \
                 first 10 s window of a run of windows whose send rate (accepted or refused) is \
                 within ±{:.0}% of αL, lasting {} s; `never` if there is none. A client that \
                 floods never converges even though the provider accepts αL from it.",
                BAND * 100.0,
                HOLD.as_secs()
            ),
            "steady state: the second half of each run (for the step, 240–360 s, the second \
             half of the α = 0.3 phase). goodput / αL: accepted over served there; sent / αL: \
             every send, refused ones included, over served; oscillation: coefficient of \
             variation of the 10 s send rate there."
                .to_owned(),
            "recovery: time to converge again after the step back up to α = 1 at 360 s.".to_owned(),
            "α = 0.05 is below tollgate's floor (the throttle never slows more than 10x), so \
             tollgate cannot converge there by design; it sends twice αL and leans on \
             `retry-after` pauses."
                .to_owned(),
        ],
    }
}
