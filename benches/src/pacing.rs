//! Benchmark 2: pacing and goodput against a simulated provider.
//!
//! Callers in a closed loop (each sends its next request when the last one is answered)
//! drive one [`Client`] against one [`SimProvider`] for a fixed simulated time, with seeded
//! request sizes ([`Sizes::PACING`]); one extra request larger than a bucket arrives along
//! the way. A second run sends a fixed batch and measures how long it takes. Everything
//! runs on tokio's paused clock.
//!
//! Two provider profiles ([`profiles`]) bracket real ones: full-minute buckets that charge
//! output at `max_tokens` and count rejected requests (OpenAI-like), and one-second buckets
//! that charge output as produced and do not count rejections (Anthropic-like). Each
//! client is told the published limits and bucket size exactly.
//!
//! Here the profiles and the runs; tollgate's pacing error is measured in
//! [`pacing_error`] (`pacing/error.rs`), and the table written in [`section`]
//! (`pacing/section.rs`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate_sim::{
    OutputCharge, RetryAfter, SimCall, SimCapacity, SimConfig, SimDimension, SimLimits, SimOutcome,
    SimProvider, SimRequest, SimRng,
};

use crate::clients::{Client, ClientConfig, RequestOutcome, RequestRecord, Strategy};
use crate::stats;
use crate::workload::Sizes;

mod error;
mod section;

pub use error::{PacingError, pacing_error};
pub use section::{dimension_name, section};

/// A provider profile: how the simulated provider behaves and what clients are told.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The name in tables.
    pub name: &'static str,
    /// The simulated provider.
    pub provider: SimConfig,
    /// What clients are told.
    pub client: ClientConfig,
    /// A request larger than a bucket.
    pub oversize: SimRequest,
}

/// The two profiles of benchmark 2.
pub fn profiles() -> Vec<Profile> {
    let openai = SimLimits {
        rpm: 500,
        input_tpm: 400_000,
        output_tpm: 150_000,
    };
    let anthropic = SimLimits {
        rpm: 600,
        input_tpm: 1_200_000,
        output_tpm: 300_000,
    };
    vec![
        Profile {
            name: "A: minute buckets, max_tokens charged, 429s counted",
            provider: SimConfig::new(openai)
                .with_capacity(SimCapacity::FullMinute)
                .with_output_charge(OutputCharge::MaxTokens)
                .with_count_rejected(true)
                .with_retry_after(RetryAfter::WholeSeconds),
            client: ClientConfig {
                limits: openai,
                capacity: SimCapacity::FullMinute,
                output_charge: OutputCharge::MaxTokens,
            },
            oversize: SimRequest::new(openai.input_tpm + 1, 256, 256),
        },
        Profile {
            name: "B: second buckets, output charged as produced",
            provider: SimConfig::new(anthropic)
                .with_capacity(SimCapacity::PerSecond)
                .with_output_charge(OutputCharge::Actual)
                .with_count_rejected(false)
                .with_retry_after(RetryAfter::WholeSeconds),
            client: ClientConfig {
                limits: anthropic,
                capacity: SimCapacity::PerSecond,
                output_charge: OutputCharge::Actual,
            },
            oversize: SimRequest::new(
                SimCapacity::PerSecond.tokens(anthropic.input_tpm) + 1,
                256,
                256,
            ),
        },
    ]
}

/// How large a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacingConfig {
    /// Concurrent callers.
    pub callers: usize,
    /// Simulated time of the open run.
    pub duration: Duration,
    /// Requests in the fixed batch (0 skips the batch run).
    pub batch: usize,
    /// When the oversize request arrives.
    pub oversize_at: Duration,
    /// Seed of request sizes and jitter.
    pub seed: u64,
}

impl PacingConfig {
    /// The benchmark: 200 callers, 10 simulated minutes, a batch of 400.
    pub const FULL: PacingConfig = PacingConfig {
        callers: 200,
        duration: Duration::from_secs(600),
        batch: 400,
        oversize_at: Duration::from_secs(30),
        seed: 2,
    };
}

/// How the oversize request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OversizeResult {
    /// Sends to the provider.
    pub sends: u32,
    /// How it ended, or `None` if still waiting when the run ended.
    pub outcome: Option<RequestOutcome>,
    /// From arrival to the end (or to the end of the run).
    pub after: Duration,
}

/// One client's results on one profile.
#[derive(Debug, Clone)]
pub struct PacingReport {
    /// The client.
    pub strategy: Strategy,
    /// The profile.
    pub profile: &'static str,
    /// Logical requests finished in the open run.
    pub requests: usize,
    /// Sends to the provider.
    pub sends: u64,
    /// 429s.
    pub rate_limited: u64,
    /// Requests given up after every attempt was refused.
    pub gave_up: usize,
    /// Accepted charge on the binding limit per minute, over the limit (BENCHMARKS.md's
    /// goodput; a bucket that starts full can take it above 1).
    pub goodput: f64,
    /// Accepted charge on the binding limit over the most the provider can accept in the
    /// run: `limit × minutes + capacity`.
    pub goodput_of_possible: f64,
    /// What the provider's bucket of the binding limit lost to overflow (refill while
    /// full, refunds over capacity), over `limit × minutes + capacity`: lost to any client.
    pub spilled: (f64, f64),
    /// Which limit binds (the highest utilization).
    pub binding: SimDimension,
    /// Tokens the provider charged for refused sends, over tokens of accepted ones.
    pub wasted: f64,
    /// tollgate only, and only without refusals (which change its rate).
    pub pacing_error: Option<PacingError>,
    /// The most sent (accepted or not) in any 60 s window, over `limit + capacity`,
    /// highest over the limits whose charge is final when sent.
    pub window_ratio: f64,
    /// Queueing delay (issue to accepted send), seconds: p50.
    pub delay_p50: f64,
    /// p99.
    pub delay_p99: f64,
    /// Jain's index of accepted tokens per caller.
    pub jain: f64,
    /// Pairs of answered requests accepted in the opposite order to their issue.
    pub fifo_violations: u64,
    /// The oversize request.
    pub oversize: OversizeResult,
    /// The batch run, if any.
    pub batch: Option<BatchReport>,
}

/// The fixed batch's results.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchReport {
    /// From start to the last answer or give-up, or `None` past the time limit.
    pub makespan: Option<Duration>,
    /// Requests not answered.
    pub failed: usize,
    /// A lower bound: the time the binding limit needs to refill what the batch charges
    /// beyond one bucket.
    pub bound: Duration,
}

/// The oversize request's caller number.
const OVERSIZE_CALLER: usize = usize::MAX;
/// A batch that has not finished after this long is reported as unfinished.
const BATCH_TIME_LIMIT: Duration = Duration::from_secs(4 * 3600);

/// Runs `strategy` on `profile`: the open run, then the batch. Must run on a paused clock.
pub async fn run(strategy: Strategy, profile: &Profile, config: PacingConfig) -> PacingReport {
    let mut report = run_open(strategy, profile, config).await;
    if config.batch > 0 {
        report.batch = Some(run_batch(strategy, profile, config).await);
    }
    report
}

async fn run_open(strategy: Strategy, profile: &Profile, config: PacingConfig) -> PacingReport {
    let provider = SimProvider::new(profile.provider.clone());
    let client = Client::new(strategy, provider.clone(), &profile.client);
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut seeds = SimRng::new(config.seed);
    let mut tasks = Vec::new();
    for caller in 0..config.callers {
        let (mut sizes, mut jitter) = (seeds.fork(), seeds.fork());
        let (client, records) = (client.clone(), records.clone());
        let end = config.duration;
        tasks.push(tokio::spawn(async move {
            while client.provider().elapsed() < end {
                let request = Sizes::PACING.draw(&mut sizes);
                let record = client.run(caller, request, &mut jitter).await;
                lock(&records).push(record);
            }
        }));
    }
    let oversize = {
        let client = client.clone();
        let (at, request, mut jitter) = (config.oversize_at, profile.oversize, seeds.fork());
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            client.run(OVERSIZE_CALLER, request, &mut jitter).await
        })
    };
    tokio::time::sleep(config.duration).await;
    for t in &tasks {
        t.abort();
    }
    let oversize = if oversize.is_finished() {
        let r = oversize.await.expect("the oversize task panicked");
        OversizeResult {
            sends: r.sends,
            outcome: Some(r.outcome),
            after: r.finished_at - r.issued_at,
        }
    } else {
        oversize.abort();
        OversizeResult {
            sends: provider
                .journal()
                .iter()
                .filter(|c| c.request == profile.oversize)
                .count() as u32,
            outcome: None,
            after: config.duration - config.oversize_at,
        }
    };
    let records: Vec<RequestRecord> = lock(&records)
        .iter()
        .filter(|r| r.caller != OVERSIZE_CALLER)
        .copied()
        .collect();
    let journal: Vec<SimCall> = provider
        .journal()
        .into_iter()
        .filter(|c| c.at <= config.duration)
        .collect();
    let minutes = config.duration.as_secs_f64() / 60.0;
    let capacity = provider.capacity();
    let limits = profile.client.limits;
    let limit_of = |d: SimDimension| match d {
        SimDimension::Requests => limits.rpm,
        SimDimension::InputTokens => limits.input_tpm,
        SimDimension::OutputTokens => limits.output_tpm,
    };
    let accepted: Vec<&SimCall> = journal
        .iter()
        .filter(|c| c.outcome == SimOutcome::Accepted)
        .collect();
    let possible = |d: SimDimension| limit_of(d) as f64 * minutes + capacity.on(d) as f64;
    // The binding limit: the one the accepted calls used the largest share of.
    let (used, binding) = SimDimension::ALL
        .iter()
        .filter(|d| limit_of(**d) > 0)
        .map(|d| {
            (
                accepted.iter().map(|c| c.charged.on(*d)).sum::<u64>() as f64,
                *d,
            )
        })
        .max_by(|a, b| (a.0 / possible(a.1)).total_cmp(&(b.0 / possible(b.1))))
        .unwrap_or((0.0, SimDimension::Requests));
    let goodput = used / (limit_of(binding) as f64 * minutes);
    let goodput_of_possible = used / possible(binding);
    let spilled = provider.spilled(binding);
    let spilled = (
        spilled.refill as f64 / possible(binding),
        spilled.refunds as f64 / possible(binding),
    );
    let tokens = |c: &SimCall| c.charged.input_tokens + c.charged.output_tokens;
    let rate_limited = journal
        .iter()
        .filter(|c| matches!(c.outcome, SimOutcome::RateLimited { .. }))
        .count() as u64;
    let wasted = journal
        .iter()
        .filter(|c| c.outcome != SimOutcome::Accepted)
        .map(tokens)
        .sum::<u64>() as f64
        / accepted.iter().map(|c| tokens(c)).sum::<u64>().max(1) as f64;
    let window_ratio = SimDimension::ALL
        .iter()
        .filter(|d| limit_of(**d) > 0)
        .filter(|d| {
            **d != SimDimension::OutputTokens
                || profile.client.output_charge == OutputCharge::MaxTokens
        })
        .map(|d| {
            let sent: Vec<(Duration, u64)> = journal
                .iter()
                .map(|c| {
                    let charge = match d {
                        SimDimension::Requests => 1,
                        SimDimension::InputTokens => c.request.input_tokens,
                        SimDimension::OutputTokens => c.request.max_output,
                    };
                    (c.at, charge)
                })
                .collect();
            stats::max_in_window(&sent, Duration::from_secs(60)) as f64
                / (limit_of(*d) + capacity.on(*d)) as f64
        })
        .fold(0.0, f64::max);
    let answered: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.outcome == RequestOutcome::Answered)
        .collect();
    let delays: Vec<f64> = answered
        .iter()
        .filter_map(|r| r.accepted_at.map(|a| (a - r.issued_at).as_secs_f64()))
        .collect();
    let mut per_caller = vec![0.0; config.callers];
    for r in &answered {
        per_caller[r.caller] += (r.request.input_tokens + r.request.actual_output) as f64;
    }
    let order: Vec<(Duration, Duration)> = answered
        .iter()
        .filter_map(|r| r.accepted_at.map(|a| (r.issued_at, a)))
        .collect();
    let refusals = provider.stats().rate_limited + provider.stats().overloaded;
    let pacing_error = (strategy.is_tollgate() && refusals == 0)
        .then(|| pacing_error(&client.limiter_log(), limits, profile.client.capacity));
    PacingReport {
        strategy,
        profile: profile.name,
        requests: records.len(),
        sends: journal.len() as u64,
        rate_limited,
        gave_up: records
            .iter()
            .filter(|r| r.outcome == RequestOutcome::GaveUp)
            .count(),
        goodput,
        goodput_of_possible,
        spilled,
        binding,
        wasted,
        pacing_error,
        window_ratio,
        delay_p50: stats::percentile(&delays, 0.5),
        delay_p99: stats::percentile(&delays, 0.99),
        jain: stats::jain(&per_caller),
        fifo_violations: stats::fifo_violations(&order),
        oversize,
        batch: None,
    }
}

async fn run_batch(strategy: Strategy, profile: &Profile, config: PacingConfig) -> BatchReport {
    let provider = SimProvider::new(profile.provider.clone());
    let client = Client::new(strategy, provider.clone(), &profile.client);
    let mut sizes = SimRng::new(config.seed.wrapping_add(1));
    let batch: VecDeque<SimRequest> = (0..config.batch)
        .map(|_| Sizes::PACING.draw(&mut sizes))
        .collect();
    let bound = batch_bound(&batch, profile, &provider);
    let queue = Arc::new(Mutex::new(batch));
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut seeds = SimRng::new(config.seed.wrapping_add(2));
    let mut tasks = Vec::new();
    for caller in 0..config.callers {
        let (client, queue, records) = (client.clone(), queue.clone(), records.clone());
        let mut jitter = seeds.fork();
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(request) = lock(&queue).pop_front() else {
                    break;
                };
                let record = client.run(caller, request, &mut jitter).await;
                lock(&records).push(record);
            }
        }));
    }
    let finished = tokio::time::timeout(BATCH_TIME_LIMIT, async {
        for t in tasks {
            t.await.expect("a batch caller panicked");
        }
    })
    .await
    .is_ok();
    let records = lock(&records).clone();
    BatchReport {
        makespan: finished.then(|| {
            records
                .iter()
                .map(|r| r.finished_at)
                .max()
                .unwrap_or_default()
        }),
        failed: config.batch
            - records
                .iter()
                .filter(|r| r.outcome == RequestOutcome::Answered)
                .count(),
        bound,
    }
}

fn batch_bound(
    batch: &VecDeque<SimRequest>,
    profile: &Profile,
    provider: &SimProvider,
) -> Duration {
    let limits = profile.client.limits;
    let capacity = provider.capacity();
    let output = |r: &SimRequest| match profile.client.output_charge {
        OutputCharge::MaxTokens => r.max_output,
        OutputCharge::Actual => r.actual_output,
    };
    let totals = [
        (limits.rpm, batch.len() as u64, capacity.requests),
        (
            limits.input_tpm,
            batch.iter().map(|r| r.input_tokens).sum(),
            capacity.input_tokens,
        ),
        (
            limits.output_tpm,
            batch.iter().map(output).sum(),
            capacity.output_tokens,
        ),
    ];
    let minutes = totals
        .iter()
        .filter(|(limit, _, _)| *limit > 0)
        .map(|(limit, total, cap)| total.saturating_sub(*cap) as f64 / *limit as f64)
        .fold(0.0, f64::max);
    Duration::from_secs_f64(minutes * 60.0)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
