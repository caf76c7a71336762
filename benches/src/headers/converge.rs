//! Benchmark 5b: the convergence of issue item 4, closed-loop callers against the same
//! simulated provider as benchmark 5 (answers and arrivals out of order), the catalog at
//! twice what is served.

use std::time::Duration;

use tollgate_sim::{SimDelay, SimProvider, SimRng, SimWindow};

use super::{
    ANSWER_TIME, HeadersConfig, HeadersScenario, NETWORK_DELAY, describe, limiter_for, one_request,
    provider_config,
};
use crate::report::{Section, Table, num, ratio};

/// The convergence run (issue item 4): closed-loop callers for several minutes against a
/// provider that serves `rpm` while the catalog says `catalog_factor` times that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvergeConfig {
    /// What the provider serves, requests per minute.
    pub rpm: u64,
    /// Closed-loop callers (each sends its next request when its last is answered).
    pub callers: usize,
    /// Answer time of an accepted call, from its admission, drawn per call.
    pub answer_time: SimDelay,
    /// Time from a call's send to its arrival at the provider, drawn per call.
    pub network_delay: SimDelay,
    /// Simulated time.
    pub duration: Duration,
    /// Seed of the retry jitter and of the provider's draws.
    pub seed: u64,
}

impl ConvergeConfig {
    /// 600 rpm served (10 a second), 40 callers answered in 20–800 ms (far more than 10 a
    /// second offered), arriving out of order, six simulated minutes (the second half
    /// three whole fixed windows).
    pub const FULL: ConvergeConfig = ConvergeConfig {
        rpm: 600,
        callers: 40,
        answer_time: ANSWER_TIME,
        network_delay: NETWORK_DELAY,
        duration: Duration::from_secs(360),
        seed: 17,
    };

    /// [`ConvergeConfig::FULL`] with every answer in 1 s and no network delay: answers
    /// come back in the order the requests were granted (the benchmark before issue 22).
    pub const IN_ORDER: ConvergeConfig = ConvergeConfig {
        answer_time: SimDelay::Fixed(Duration::from_secs(1)),
        network_delay: SimDelay::ZERO,
        ..ConvergeConfig::FULL
    };
}

/// What a convergence run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvergeReport {
    /// The setting.
    pub scenario: HeadersScenario,
    /// From the start to the first window of a run of windows, lasting 60 s, whose send
    /// rate is within ±10% of the served rate ([`converge_within`]): 10 s windows against
    /// a continuous provider, the provider's own window (a minute) against a fixed-window
    /// one, which allows its whole limit at once when it turns.
    pub converge: Option<Duration>,
    /// 429s at each second of the run.
    pub rate_limited_at: Vec<Duration>,
    /// 429s per minute over the second half.
    pub steady_429_per_min: f64,
    /// Accepted over served over the second half.
    pub goodput: f64,
    /// The throttle's factor at the end.
    pub rate_factor: f64,
    /// Calls sent per second.
    pub sent_per_second: Vec<u32>,
}

/// Runs callers in a closed loop for `config.duration`. Must run on a paused clock.
pub async fn converge(scenario: HeadersScenario, config: ConvergeConfig) -> ConvergeReport {
    let batch = HeadersConfig {
        requests: usize::MAX,
        concurrency: config.callers,
        rpm: config.rpm,
        answer_time: config.answer_time,
        network_delay: config.network_delay,
        max_attempts: 10,
        seed: config.seed,
    };
    let provider = SimProvider::new(provider_config(scenario, batch));
    let limiter = limiter_for(scenario, batch);
    let mut seeds = SimRng::new(config.seed);
    let tasks: Vec<_> = (0..config.callers)
        .map(|_| {
            let (provider, limiter) = (provider.clone(), limiter.clone());
            let mut jitter = seeds.fork();
            tokio::spawn(async move {
                loop {
                    one_request(&provider, &limiter, batch, &mut jitter).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(config.duration).await;
    for t in &tasks {
        t.abort();
    }
    let journal = provider.journal();
    let seconds = usize::try_from(config.duration.as_secs()).unwrap_or(usize::MAX);
    let mut sent = vec![0u32; seconds];
    for c in &journal {
        if let Some(n) = usize::try_from(c.at.as_secs())
            .ok()
            .and_then(|s| sent.get_mut(s))
        {
            *n += 1;
        }
    }
    let served_per_second = config.rpm as f64 / 60.0;
    let half = config.duration / 2;
    let steady: Vec<_> = journal.iter().filter(|c| c.at >= half).collect();
    let steady_429 = steady
        .iter()
        .filter(|c| matches!(c.outcome, tollgate_sim::SimOutcome::RateLimited { .. }))
        .count() as f64;
    let accepted = steady
        .iter()
        .filter(|c| c.outcome == tollgate_sim::SimOutcome::Accepted)
        .count() as f64;
    let window = match scenario.window {
        SimWindow::Continuous => crate::adaptive::WINDOW,
        SimWindow::Fixed => Duration::from_secs(60),
    };
    ConvergeReport {
        scenario,
        converge: converge_within(&sent, config.duration, served_per_second, window),
        rate_limited_at: journal
            .iter()
            .filter(|c| matches!(c.outcome, tollgate_sim::SimOutcome::RateLimited { .. }))
            .map(|c| c.at)
            .collect(),
        steady_429_per_min: steady_429 / (half.as_secs_f64() / 60.0),
        goodput: accepted / (served_per_second * half.as_secs_f64()),
        rate_factor: limiter.snapshot().rate_factor,
        sent_per_second: sent,
    }
}

/// The convergence section: one row per window and header style, catalog at 2x.
pub fn converge_section(reports: &[ConvergeReport], config: ConvergeConfig) -> Section {
    let mut table = Table::new(&[
        "provider",
        "headers",
        "catalog",
        "time to converge",
        "steady 429s / min",
        "goodput",
        "throttle at end",
    ]);
    for r in reports {
        let mut row = r.scenario.cells();
        row.extend([
            r.converge
                .map_or("never".to_owned(), |d| format!("{} s", d.as_secs())),
            num(r.steady_429_per_min, 1),
            ratio(r.goodput),
            num(r.rate_factor, 2),
        ]);
        table.row(row);
    }
    Section {
        title: "5b. Convergence with the catalog at 2x what is served".to_owned(),
        intro: vec![format!(
            "{} closed-loop callers (network delay {}, answers in {}) for {} simulated seconds \
             against the same simulated provider serving {} requests per minute, the catalog \
             saying twice that.",
            config.callers,
            describe(config.network_delay),
            describe(config.answer_time),
            config.duration.as_secs(),
            config.rpm
        )],
        table,
        notes: vec![
            "time to converge: to the start of the first window of a run of windows, lasting \
             60 s, whose send rate (accepted or refused) is within ±10% of the served rate; 10 s \
             windows against the continuous provider, the provider's own one-minute window \
             against the fixed-window one (which allows its whole minute at once when it turns, \
             so a client that uses it well sends in bursts). Target: within 60 s, and fewer \
             than one 429 a minute in steady state (the second half, three whole windows)."
                .to_owned(),
        ],
    }
}

/// The start of the first `window` after which every sliding `window`, for
/// [`crate::adaptive::HOLD`], sends within [`crate::adaptive::BAND`] of `target` per
/// second; `None` if none in `[0, to)`.
pub fn converge_within(
    per_second: &[u32],
    to: Duration,
    target: f64,
    window: Duration,
) -> Option<Duration> {
    let w = usize::try_from(window.as_secs()).unwrap_or(usize::MAX);
    let hold = usize::try_from(crate::adaptive::HOLD.as_secs()).unwrap_or(usize::MAX);
    let to = usize::try_from(to.as_secs()).unwrap_or(usize::MAX);
    let rate = |end: usize| f64::from(per_second[end - w..end].iter().sum::<u32>()) / w as f64;
    let good = |end: usize| (rate(end) - target).abs() <= crate::adaptive::BAND * target;
    (w..=to.saturating_sub(hold))
        .find(|end| (*end..=end + hold).all(good))
        .map(|end| Duration::from_secs((end - w) as u64))
}
