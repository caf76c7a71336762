//! Benchmark 5: pacing by the provider's rate-limit headers.
//!
//! The simulated provider runs continuous buckets or fixed one-minute windows and sends
//! rate-limit headers the way Anthropic does (`anthropic-ratelimit-*`, the reset an RFC
//! 3339 time when the bucket is full again) or the way OpenAI does (`x-ratelimit-*`, the
//! reset a duration until full), or none. A batch of requests goes out at a fixed
//! concurrency through tollgate's limiter, told the provider's rpm (or twice it: a
//! catalog that is wrong) and its window kind.
//!
//! The client does what the pipeline does with an answer: the headers become
//! [`Signals`] exactly as the transports fill them (`limit`, `remaining`, `reset_in`),
//! and [`Signals::feedback`] goes to the limiter; a 429 is `Feedback::RateLimited` (its
//! call's later 429s `RateLimitedAgain`) and the retry waits the pipeline's
//! [`RetryPolicy`] delay, `retry-after` as a floor.
//!
//! The best possible is computed by replaying the same batch against an oracle that
//! knows the provider's buckets: each request goes at the earliest instant a caller is
//! free and the provider will accept it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tollgate::catalog::{Limits, RateWindow};
use tollgate::limit::{Cost, Feedback, LimiterConfig, TokenBucketRateLimiter};
use tollgate::pipeline::{RetryPolicy, Signals};
use tollgate::{Dimension, Usage};
use tollgate_sim::{
    ContinuousBucket, RetryAfter, SimConfig, SimDimension, SimHeaderStyle, SimHeaders, SimLatency,
    SimLimits, SimProvider, SimRefusal, SimRequest, SimReset, SimRng, SimWindow,
};

use crate::report::{Section, Table, num, ratio};

/// The batch, its concurrency and the provider's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadersConfig {
    /// Requests in the batch.
    pub requests: usize,
    /// Callers sending them (each sends its next when its last is answered).
    pub concurrency: usize,
    /// What the provider serves, requests per minute.
    pub rpm: u64,
    /// Answer time of an accepted call.
    pub latency: Duration,
    /// Attempts per request, first included.
    pub max_attempts: u32,
    /// Seed of the retry jitter.
    pub seed: u64,
}

impl HeadersConfig {
    /// BENCHMARKS.md §5: 60 requests at concurrency 20 against rpm 30.
    pub const FULL: HeadersConfig = HeadersConfig {
        requests: 60,
        concurrency: 20,
        rpm: 30,
        latency: Duration::from_secs(1),
        max_attempts: 10,
        seed: 11,
    };
}

/// One run's setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadersScenario {
    /// How the provider refills (the catalog says the same).
    pub window: SimWindow,
    /// Which headers the provider sends.
    pub style: SimHeaderStyle,
    /// The catalog's rpm over what the provider serves (1 = right, 2 = twice).
    pub catalog_factor: u64,
}

impl HeadersScenario {
    /// Every window, header style (none included) and catalog factor (1, 2).
    pub fn all() -> Vec<HeadersScenario> {
        let mut all = Vec::new();
        for catalog_factor in [1, 2] {
            for window in [SimWindow::Continuous, SimWindow::Fixed] {
                for style in [
                    SimHeaderStyle::Anthropic,
                    SimHeaderStyle::OpenAi,
                    SimHeaderStyle::None,
                ] {
                    all.push(HeadersScenario {
                        window,
                        style,
                        catalog_factor,
                    });
                }
            }
        }
        all
    }

    /// The window's name in tables.
    pub fn window_name(&self) -> &'static str {
        match self.window {
            SimWindow::Continuous => "continuous",
            SimWindow::Fixed => "fixed window",
        }
    }

    /// The header style's name in tables.
    pub fn style_name(&self) -> &'static str {
        match self.style {
            SimHeaderStyle::Anthropic => "anthropic",
            SimHeaderStyle::OpenAi => "openai",
            SimHeaderStyle::None => "none",
        }
    }
}

/// One run's results.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadersReport {
    /// The setting.
    pub scenario: HeadersScenario,
    /// When the last request was answered.
    pub makespan: Duration,
    /// The oracle's makespan.
    pub best_makespan: Duration,
    /// Mean time to each request's answer.
    pub mean_completion: Duration,
    /// The oracle's mean.
    pub best_mean_completion: Duration,
    /// 429s received.
    pub rate_limited: u64,
    /// Requests that were never answered.
    pub failed: usize,
    /// The throttle's factor at the end.
    pub rate_factor: f64,
}

impl HeadersReport {
    /// Makespan over the best possible.
    pub fn makespan_ratio(&self) -> f64 {
        self.makespan.as_secs_f64() / self.best_makespan.as_secs_f64()
    }

    /// Mean completion over the best possible.
    pub fn mean_ratio(&self) -> f64 {
        self.mean_completion.as_secs_f64() / self.best_mean_completion.as_secs_f64()
    }
}

fn provider_config(scenario: HeadersScenario, config: HeadersConfig) -> SimConfig {
    SimConfig::new(SimLimits {
        rpm: config.rpm,
        ..SimLimits::default()
    })
    .with_window(scenario.window)
    .with_headers(scenario.style)
    .with_retry_after(RetryAfter::WholeSeconds)
    .with_latency(SimLatency {
        base: config.latency,
        per_output_token: Duration::ZERO,
        refusal: Duration::ZERO,
    })
}

/// Fills `signals` from the simulated headers as the transports fill them from the real
/// ones: Anthropic's reset is a time (the transport subtracts the wall clock; here the
/// provider's clock), OpenAI's a duration.
pub fn fill_signals(headers: &SimHeaders, now: Duration, signals: &Signals) {
    for h in &headers.limits {
        let dimension = match h.dimension {
            SimDimension::Requests => Dimension::Requests,
            SimDimension::InputTokens => Dimension::InputTokens,
            SimDimension::OutputTokens => Dimension::OutputTokens,
        };
        signals.limit(dimension, h.limit);
        signals.remaining(dimension, h.remaining);
        signals.reset_in(
            dimension,
            match h.reset {
                SimReset::At(at) => at.saturating_sub(now),
                SimReset::In(d) => d,
            },
        );
    }
}

/// Runs the batch in `scenario`. Must run on a paused clock.
pub async fn run(scenario: HeadersScenario, config: HeadersConfig) -> HeadersReport {
    let provider = SimProvider::new(provider_config(scenario, config));
    let limiter = limiter_for(scenario, config);
    let next = Arc::new(AtomicUsize::new(0));
    let mut seeds = SimRng::new(config.seed);
    let tasks: Vec<_> = (0..config.concurrency)
        .map(|_| {
            let (provider, limiter, next) = (provider.clone(), limiter.clone(), next.clone());
            let mut jitter = seeds.fork();
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut rate_limited = 0u64;
                while next.fetch_add(1, Ordering::Relaxed) < config.requests {
                    let (answered, refusals) =
                        one_request(&provider, &limiter, config, &mut jitter).await;
                    rate_limited += refusals;
                    done.extend(answered);
                }
                (done, rate_limited)
            })
        })
        .collect();
    let (mut completions, mut rate_limited) = (Vec::new(), 0);
    for t in tasks {
        let (done, refusals) = t.await.expect("a caller");
        completions.extend(done);
        rate_limited += refusals;
    }
    let (best_makespan, best_mean_completion) = best_possible(scenario, config);
    let failed = config.requests - completions.len();
    HeadersReport {
        scenario,
        makespan: completions.iter().copied().max().unwrap_or_default(),
        best_makespan,
        mean_completion: mean(&completions),
        best_mean_completion,
        rate_limited,
        failed,
        rate_factor: limiter.snapshot().rate_factor,
    }
}

/// One request through the limiter, retried like the pipeline retries; its completion
/// time if answered, and the 429s it met.
async fn one_request(
    provider: &SimProvider,
    limiter: &TokenBucketRateLimiter,
    config: HeadersConfig,
    jitter: &mut SimRng,
) -> (Option<Duration>, u64) {
    let policy = RetryPolicy::default();
    let request = SimRequest::new(100, 10, 10);
    let mut refusals = 0u64;
    for attempt in 0..config.max_attempts {
        let mut reservation = limiter
            .reserve(Cost::call(request.input_tokens, request.max_output))
            .await
            .expect("fits the bucket");
        reservation.mark_sent();
        let mark = limiter.send_mark();
        let (result, headers) = provider.call_with_headers(request).await;
        let signals = Signals::default();
        fill_signals(&headers, provider.elapsed(), &signals);
        match result {
            Ok(answer) => {
                reservation.settle(
                    &Usage {
                        input_tokens: answer.input_tokens,
                        output_tokens: answer.output_tokens,
                        ..Usage::default()
                    },
                    Default::default(),
                );
                for f in signals.feedback_since(mark) {
                    limiter.feedback(f);
                }
                limiter.feedback(Feedback::Success);
                return (Some(answer.finished_at), refusals);
            }
            Err(SimRefusal::RateLimited { retry_after }) => {
                limiter.feedback(if refusals == 0 {
                    Feedback::RateLimited { retry_after }
                } else {
                    Feedback::RateLimitedAgain { retry_after }
                });
                refusals += 1;
                reservation.settle_counted(Cost {
                    requests: 1,
                    input_tokens: 0,
                    output_tokens: 0,
                });
                for f in signals.feedback_since(mark) {
                    limiter.feedback(f);
                }
                if attempt + 1 < config.max_attempts {
                    let wait = policy
                        .delay(attempt, retry_after, jitter.unit())
                        .unwrap_or(policy.max_retry_after);
                    tokio::time::sleep(wait).await;
                }
            }
            Err(SimRefusal::Overloaded) => unreachable!("no overloads in this benchmark"),
        }
    }
    (None, refusals)
}

fn mean(values: &[Duration]) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.iter().sum::<Duration>() / u32::try_from(values.len()).unwrap_or(u32::MAX)
}

/// The oracle: each request in turn goes at the earliest instant a caller is free and the
/// provider's bucket (replayed exactly) accepts it. Returns the makespan and the mean
/// completion.
pub fn best_possible(scenario: HeadersScenario, config: HeadersConfig) -> (Duration, Duration) {
    let limit = config.rpm;
    let mut bucket = match scenario.window {
        SimWindow::Continuous => ContinuousBucket::new(limit, limit),
        SimWindow::Fixed => ContinuousBucket::fixed_window(limit, limit),
    };
    let latency = u64::try_from(config.latency.as_nanos()).unwrap_or(u64::MAX);
    let mut free = vec![0u64; config.concurrency];
    let mut completions = Vec::with_capacity(config.requests);
    let mut last = 0u64;
    for _ in 0..config.requests {
        let (slot, at) = free
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|(_, t)| *t)
            .unwrap_or_default();
        // In order: never before the previous request went.
        let at = at.max(last);
        bucket.refill(at);
        let admitted = at + bucket.wait_ns(1).unwrap_or(0);
        bucket.refill(admitted);
        bucket.take(1);
        last = admitted;
        free[slot] = admitted + latency;
        completions.push(Duration::from_nanos(admitted + latency));
    }
    (
        completions.iter().copied().max().unwrap_or_default(),
        mean(&completions),
    )
}

/// Benchmark 5's section: one row per window, header style and catalog factor.
pub fn section(reports: &[HeadersReport], config: HeadersConfig) -> Section {
    let mut table = Table::new(&[
        "provider",
        "headers",
        "catalog",
        "makespan / best",
        "429s",
        "mean completion / best",
        "makespan",
        "best",
        "throttle at end",
    ]);
    for r in reports {
        table.row(vec![
            r.scenario.window_name().to_owned(),
            r.scenario.style_name().to_owned(),
            format!("{}x", r.scenario.catalog_factor),
            ratio(r.makespan_ratio()),
            if r.failed > 0 {
                format!("{} ({} failed)", r.rate_limited, r.failed)
            } else {
                r.rate_limited.to_string()
            },
            ratio(r.mean_ratio()),
            format!("{} s", num(r.makespan.as_secs_f64(), 1)),
            format!("{} s", num(r.best_makespan.as_secs_f64(), 1)),
            num(r.rate_factor, 2),
        ]);
    }
    Section {
        title: "5. Pacing by the provider's headers".to_owned(),
        intro: vec![format!(
            "{} requests at concurrency {} against a simulated provider serving {} requests per \
             minute (a full minute's bucket; answers in {} s; 429s with `retry-after` in whole \
             seconds), on tokio's paused clock. The provider refills continuously or in fixed \
             one-minute windows, and sends rate-limit headers as Anthropic does (reset = the RFC \
             3339 time the bucket is full), as OpenAI does (reset = the duration until full), or \
             none. tollgate's limiter is told the window kind (`window` in the catalog) and the \
             rpm, right (1x) or twice what is served (2x); the client turns headers into \
             `Signals` as the transports do and hands `Signals::feedback()` to the limiter, and \
             retries as the pipeline does (`RetryPolicy`'s delay, `retry-after` as a floor).",
            config.requests,
            config.concurrency,
            config.rpm,
            config.latency.as_secs_f64()
        )],
        table,
        notes: vec![
            "best: each request sent at the earliest instant a caller is free and the provider's \
             bucket, replayed exactly, accepts it. Targets (BENCHMARKS.md §5): with headers and \
             the catalog right, makespan ≤ 1.03x, 0 429s, mean completion ≤ 1.1x; with the \
             catalog at 2x, ≤ 3 429s and makespan ≤ 1.1x."
                .to_owned(),
            "headers `none`: only 429s and their `retry-after` teach the limiter (the adaptive \
             throttle), shown for comparison; no target."
                .to_owned(),
        ],
    }
}

/// The convergence run (issue item 4): closed-loop callers for several minutes against a
/// provider that serves `rpm` while the catalog says `catalog_factor` times that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvergeConfig {
    /// What the provider serves, requests per minute.
    pub rpm: u64,
    /// Closed-loop callers (each sends its next request when its last is answered).
    pub callers: usize,
    /// Answer time of an accepted call.
    pub latency: Duration,
    /// Simulated time.
    pub duration: Duration,
    /// Seed of the retry jitter.
    pub seed: u64,
}

impl ConvergeConfig {
    /// 600 rpm served (10 a second), 40 callers answered in 1 s (up to 40 a second
    /// offered), six simulated minutes (the second half three whole fixed windows).
    pub const FULL: ConvergeConfig = ConvergeConfig {
        rpm: 600,
        callers: 40,
        latency: Duration::from_secs(1),
        duration: Duration::from_secs(360),
        seed: 17,
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
        latency: config.latency,
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

fn limiter_for(scenario: HeadersScenario, config: HeadersConfig) -> TokenBucketRateLimiter {
    TokenBucketRateLimiter::new(
        LimiterConfig::new(
            "sim",
            Limits {
                rpm: config.rpm * scenario.catalog_factor,
                ..Limits::default()
            },
        )
        .with_window(match scenario.window {
            SimWindow::Continuous => RateWindow::Continuous,
            SimWindow::Fixed => RateWindow::Fixed,
        }),
    )
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
        table.row(vec![
            r.scenario.window_name().to_owned(),
            r.scenario.style_name().to_owned(),
            format!("{}x", r.scenario.catalog_factor),
            r.converge
                .map_or("never".to_owned(), |d| format!("{} s", d.as_secs())),
            num(r.steady_429_per_min, 1),
            ratio(r.goodput),
            num(r.rate_factor, 2),
        ]);
    }
    Section {
        title: "5b. Convergence with the catalog at 2x what is served".to_owned(),
        intro: vec![format!(
            "{} closed-loop callers (answers in {} s) for {} simulated seconds against the same \
             simulated provider serving {} requests per minute, the catalog saying twice that.",
            config.callers,
            config.latency.as_secs_f64(),
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
