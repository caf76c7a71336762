//! Benchmark 5: pacing by the provider's rate-limit headers.
//!
//! The simulated provider runs continuous buckets or fixed one-minute windows and sends
//! rate-limit headers the way Anthropic does (`anthropic-ratelimit-*`, the reset an RFC
//! 3339 time when the bucket is full again) or the way OpenAI does (`x-ratelimit-*`, the
//! reset a duration until full), or none. It behaves as a real server does (issue 22):
//! each request reaches it after a network delay drawn per request, is admitted and
//! given its headers on arrival, and answers after an answer time drawn per request, so
//! requests granted together arrive, and come back, in another order than they were
//! granted. A batch of requests goes out at a fixed concurrency through tollgate's
//! limiter, told the provider's rpm (or twice it: a catalog that is wrong) and its window
//! kind.
//!
//! The client does what the pipeline does with an answer: the headers become
//! [`Signals`] exactly as the transports fill them (`limit`, `remaining`, `reset_in`),
//! and [`Signals::feedback`] goes to the limiter; a 429 is `Feedback::RateLimited` (its
//! call's later 429s `RateLimitedAgain`) and the retry waits the pipeline's
//! [`RetryPolicy`] delay, `retry-after` as a floor.
//!
//! The best possible is computed by replaying the same batch against an oracle that
//! knows the provider's buckets and the delays it will draw: each request is admitted at
//! the earliest instant a caller is free to send it and the provider accepts it on
//! arrival.

mod converge;

pub use converge::{ConvergeConfig, ConvergeReport, converge, converge_section, converge_within};

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tollgate::catalog::{Limits, RateWindow};
use tollgate::limit::{Cost, Feedback, LimiterConfig, TokenBucketRateLimiter};
use tollgate::pipeline::{RetryPolicy, Signals};
use tollgate::{Dimension, Usage};
use tollgate_sim::{
    ContinuousBucket, RetryAfter, SimConfig, SimDelay, SimDimension, SimHeaderStyle, SimHeaders,
    SimLatency, SimLimits, SimProvider, SimRefusal, SimRequest, SimReset, SimRng, SimTimings,
    SimWindow,
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
    /// Answer time of an accepted call, from its admission, drawn per call.
    pub answer_time: SimDelay,
    /// Time from a call's send to its arrival at the provider, drawn per call.
    pub network_delay: SimDelay,
    /// Attempts per request, first included.
    pub max_attempts: u32,
    /// Seed of the retry jitter and of the provider's draws.
    pub seed: u64,
}

/// Answer times as real ones spread: log-normal between 20 and 800 ms (median 126 ms).
pub const ANSWER_TIME: SimDelay = SimDelay::LogNormal {
    min: Duration::from_millis(20),
    max: Duration::from_millis(800),
};

/// The way to the provider: uniform between 0 and 100 ms, so requests sent together
/// arrive in any order.
pub const NETWORK_DELAY: SimDelay = SimDelay::Uniform {
    min: Duration::ZERO,
    max: Duration::from_millis(100),
};

impl HeadersConfig {
    /// BENCHMARKS.md §5: 60 requests at concurrency 20 against rpm 30, answers and
    /// arrivals out of order ([`ANSWER_TIME`], [`NETWORK_DELAY`]).
    pub const FULL: HeadersConfig = HeadersConfig {
        requests: 60,
        concurrency: 20,
        rpm: 30,
        answer_time: ANSWER_TIME,
        network_delay: NETWORK_DELAY,
        max_attempts: 10,
        seed: 11,
    };

    /// [`HeadersConfig::FULL`] with every answer in 1 s and no network delay: answers
    /// come back in the order the requests were granted (the benchmark before issue 22).
    pub const IN_ORDER: HeadersConfig = HeadersConfig {
        answer_time: SimDelay::Fixed(Duration::from_secs(1)),
        network_delay: SimDelay::ZERO,
        ..HeadersConfig::FULL
    };
}

/// A delay as tables say it: `1000 ms`, `uniform 0–100 ms`, `log-normal 20–800 ms`.
pub fn describe(delay: SimDelay) -> String {
    let ms = |d: Duration| d.as_millis();
    match delay {
        SimDelay::Fixed(d) => format!("{} ms", ms(d)),
        SimDelay::Uniform { min, max } => format!("uniform {}–{} ms", ms(min), ms(max)),
        SimDelay::LogNormal { min, max } => format!("log-normal {}–{} ms", ms(min), ms(max)),
    }
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

    /// The first three cells of its table row: provider window, header style, catalog.
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.window_name().to_owned(),
            self.style_name().to_owned(),
            format!("{}x", self.catalog_factor),
        ]
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

/// The simulated provider of a run (the oracle replays its draws).
pub fn provider_config(scenario: HeadersScenario, config: HeadersConfig) -> SimConfig {
    SimConfig::new(SimLimits {
        rpm: config.rpm,
        ..SimLimits::default()
    })
    .with_window(scenario.window)
    .with_headers(scenario.style)
    .with_retry_after(RetryAfter::WholeSeconds)
    .with_latency(SimLatency {
        base: Duration::ZERO,
        per_output_token: Duration::ZERO,
        refusal: Duration::ZERO,
    })
    .with_answer_time(config.answer_time)
    .with_network_delay(config.network_delay)
    .with_seed(config.seed)
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

/// Every request of the batch: 100 input tokens, 10 output.
const REQUEST: SimRequest = SimRequest {
    input_tokens: 100,
    max_output: 10,
    actual_output: 10,
};

/// One request through the limiter, retried like the pipeline retries; its completion
/// time if answered, and the 429s it met.
pub(crate) async fn one_request(
    provider: &SimProvider,
    limiter: &TokenBucketRateLimiter,
    config: HeadersConfig,
    jitter: &mut SimRng,
) -> (Option<Duration>, u64) {
    let policy = RetryPolicy::default();
    let request = REQUEST;
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

/// The oracle: whenever a caller is free it sends the next request, which arrives after
/// its network delay, or later, held back to arrive at the earliest instant the
/// provider's bucket (replayed exactly) accepts it; it answers after its answer time and
/// frees its caller. The network delays and answer times are those the run's provider
/// draws ([`SimTimings`]: the n-th request sent gets the n-th network delay, the n-th
/// admitted the n-th answer time; a run without 429s sends and admits exactly as many).
/// Returns the makespan and the mean completion.
pub fn best_possible(scenario: HeadersScenario, config: HeadersConfig) -> (Duration, Duration) {
    // Events in time order; at the same instant a caller frees before a request arrives,
    // and requests arrive in the order they were sent.
    const FREE: u8 = 0;
    const ARRIVE: u8 = 1;
    let limit = config.rpm;
    let mut bucket = match scenario.window {
        SimWindow::Continuous => ContinuousBucket::new(limit, limit),
        SimWindow::Fixed => ContinuousBucket::fixed_window(limit, limit),
    };
    let mut timings = SimTimings::new(&provider_config(scenario, config));
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut events: BinaryHeap<Reverse<(u64, u8, usize)>> = (0..config.concurrency)
        .map(|_| Reverse((0, FREE, 0)))
        .collect();
    let mut sent = 0;
    let mut completions = Vec::with_capacity(config.requests);
    while let Some(Reverse((at, kind, n))) = events.pop() {
        if kind == FREE {
            if sent < config.requests {
                let arrives = at + ns(timings.next_network_delay());
                events.push(Reverse((arrives, ARRIVE, sent)));
                sent += 1;
            }
            continue;
        }
        bucket.refill(at);
        match bucket.wait_ns(1) {
            Some(0) | None => {
                bucket.take(1);
                let done = at + ns(timings.next_answer_time(REQUEST.actual_output));
                completions.push(Duration::from_nanos(done));
                events.push(Reverse((done, FREE, 0)));
            }
            // Sent later, to arrive when there is room.
            Some(wait) => events.push(Reverse((at + wait, ARRIVE, n))),
        }
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
        let mut row = r.scenario.cells();
        row.extend([
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
        table.row(row);
    }
    Section {
        title: "5. Pacing by the provider's headers".to_owned(),
        intro: vec![format!(
            "{} requests at concurrency {} against a simulated provider serving {} requests per \
             minute (a full minute's bucket; 429s with `retry-after` in whole seconds), on \
             tokio's paused clock. Each request reaches the provider after a network delay \
             ({}), is admitted (or refused) and given its headers on arrival, and is answered \
             after an answer time ({}), both drawn per request: requests granted together \
             arrive, and come back, in another order. The provider refills continuously or in fixed \
             one-minute windows, and sends rate-limit headers as Anthropic does (reset = the RFC \
             3339 time the bucket is full), as OpenAI does (reset = the duration until full), or \
             none. tollgate's limiter is told the window kind (`window` in the catalog) and the \
             rpm, right (1x) or twice what is served (2x); the client turns headers into \
             `Signals` as the transports do and hands `Signals::feedback()` to the limiter, and \
             retries as the pipeline does (`RetryPolicy`'s delay, `retry-after` as a floor).",
            config.requests,
            config.concurrency,
            config.rpm,
            describe(config.network_delay),
            describe(config.answer_time),
        )],
        table,
        notes: vec![
            "best: each request admitted at the earliest instant a caller is free to send it and \
             the provider's bucket, replayed exactly, accepts it on arrival; with the network \
             delays and answer times the provider draws. Targets (BENCHMARKS.md §5): with headers and \
             the catalog right, makespan ≤ 1.03x, 0 429s, mean completion ≤ 1.1x; with the \
             catalog at 2x, ≤ 3 429s and makespan ≤ 1.1x."
                .to_owned(),
            "headers `none`: only 429s and their `retry-after` teach the limiter (the adaptive \
             throttle), shown for comparison; no target."
                .to_owned(),
        ],
    }
}

pub(crate) fn limiter_for(
    scenario: HeadersScenario,
    config: HeadersConfig,
) -> TokenBucketRateLimiter {
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
