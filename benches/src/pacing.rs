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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::limit::Cost;
use tollgate_sim::{
    ContinuousBucket, OutputCharge, RetryAfter, SimCall, SimCapacity, SimConfig, SimDimension,
    SimLimits, SimOutcome, SimProvider, SimRequest, SimRng,
};

use crate::clients::{Client, ClientConfig, LimiterEvent, RequestOutcome, RequestRecord, Strategy};
use crate::report::{Section, Table, num, ratio};
use crate::stats;
use crate::workload::Sizes;

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

/// Pacing error of tollgate's grants against a shadow bucket replaying its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacingError {
    /// Grants replayed.
    pub grants: usize,
    /// Of those, grants that had to wait.
    pub waited: usize,
    /// Median over grants that waited, nanoseconds.
    pub p50_ns: i64,
    /// Smallest over all grants (negative would mean granted too early).
    pub min_ns: i64,
    /// Largest over all grants.
    pub max_ns: i64,
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

/// Replays tollgate's log against exact shadow buckets: for each grant, the earliest
/// instant it could have been granted (not before it asked, not before the grant ahead of
/// it, and when every bucket held its cost), and how much later it was.
pub fn pacing_error(log: &[LimiterEvent], limits: SimLimits, capacity: SimCapacity) -> PacingError {
    let shadow = Shadow::new(limits, capacity);
    let mut checkpoints: Vec<(u64, Shadow)> = vec![(0, shadow)];
    let mut prev_grant = 0u64;
    let mut errors = Vec::new();
    for event in log {
        match *event {
            LimiterEvent::Adjust { at, delta } => {
                let at = ns(at);
                let mut s = checkpoints
                    .last()
                    .map(|c| c.1.clone())
                    .expect("a checkpoint");
                s.refill(at);
                s.adjust([delta.requests, delta.input_tokens, delta.output_tokens]);
                checkpoints.push((at, s));
            }
            LimiterEvent::Grant { joined, at, cost } => {
                let (joined, at) = (ns(joined), ns(at));
                let start = joined.max(prev_grant);
                let first = checkpoints
                    .iter()
                    .rposition(|(t, _)| *t <= start)
                    .unwrap_or(0);
                let mut earliest = u64::MAX;
                for k in first..checkpoints.len() {
                    let from = checkpoints[k].0.max(start);
                    let mut s = checkpoints[k].1.clone();
                    s.refill(from);
                    let candidate = from.saturating_add(s.wait_ns(&cost));
                    let next = checkpoints.get(k + 1).map_or(u64::MAX, |c| c.0);
                    if candidate <= next {
                        earliest = candidate;
                        break;
                    }
                }
                errors.push((at as i64 - earliest as i64, at > start));
                let mut s = checkpoints
                    .last()
                    .map(|c| c.1.clone())
                    .expect("a checkpoint");
                s.refill(at);
                s.take(&cost);
                checkpoints = vec![(at, s)];
                prev_grant = at;
            }
        }
    }
    let waited: Vec<f64> = errors
        .iter()
        .filter(|(_, waited)| *waited)
        .map(|(e, _)| *e as f64)
        .collect();
    PacingError {
        grants: errors.len(),
        waited: waited.len(),
        p50_ns: stats::percentile(&waited, 0.5) as i64,
        min_ns: errors.iter().map(|(e, _)| *e).min().unwrap_or(0),
        max_ns: errors.iter().map(|(e, _)| *e).max().unwrap_or(0),
    }
}

#[derive(Debug, Clone)]
struct Shadow([Option<ContinuousBucket>; 3]);

impl Shadow {
    fn new(limits: SimLimits, capacity: SimCapacity) -> Self {
        let b = |l: u64| (l > 0).then(|| ContinuousBucket::new(l, capacity.tokens(l)));
        Shadow([b(limits.rpm), b(limits.input_tpm), b(limits.output_tpm)])
    }

    fn refill(&mut self, at: u64) {
        self.0.iter_mut().flatten().for_each(|b| b.refill(at));
    }

    fn adjust(&mut self, delta: [i64; 3]) {
        for (b, d) in self.0.iter_mut().zip(delta) {
            if let Some(b) = b {
                if d < 0 {
                    b.give(d.unsigned_abs());
                } else {
                    b.take(d.unsigned_abs());
                }
            }
        }
    }

    fn amounts(cost: &Cost) -> [u64; 3] {
        [cost.requests, cost.input_tokens, cost.output_tokens]
    }

    fn take(&mut self, cost: &Cost) {
        for (b, n) in self.0.iter_mut().zip(Self::amounts(cost)) {
            if let Some(b) = b {
                b.take(n);
            }
        }
    }

    fn wait_ns(&self, cost: &Cost) -> u64 {
        self.0
            .iter()
            .zip(Self::amounts(cost))
            .filter_map(|(b, n)| b.as_ref().map(|b| b.wait_ns(n).unwrap_or(u64::MAX)))
            .max()
            .unwrap_or(0)
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Benchmark 2's section: one row per profile and client.
pub fn section(reports: &[PacingReport], config: PacingConfig) -> Section {
    let mut table = Table::new(&[
        "profile",
        "client",
        "goodput",
        "of the most possible",
        "lost by the provider: idle / refunds",
        "429s / 1k sends",
        "quota wasted",
        "pacing error p50 / max",
        "max 60 s window / (L+C)",
        "batch makespan (× tollgate)",
        "queue delay p50 / p99",
        "Jain",
        "FIFO violations",
        "oversize request",
    ]);
    for r in reports {
        let tollgate_makespan = reports
            .iter()
            .find(|t| t.profile == r.profile && t.strategy == Strategy::Tollgate)
            .and_then(|t| t.batch.and_then(|b| b.makespan));
        let makespan = match r.batch {
            Some(BatchReport {
                makespan: Some(m),
                failed,
                bound,
            }) => {
                let times =
                    tollgate_makespan.map_or(f64::NAN, |t| m.as_secs_f64() / t.as_secs_f64());
                let failed = if failed > 0 {
                    format!(", {failed} failed")
                } else {
                    String::new()
                };
                format!(
                    "{:.0} s ({}×, bound {:.0} s){failed}",
                    m.as_secs_f64(),
                    ratio(times),
                    bound.as_secs_f64()
                )
            }
            Some(BatchReport { makespan: None, .. }) => "unfinished".to_owned(),
            None => "–".to_owned(),
        };
        let oversize = match r.oversize.outcome {
            Some(RequestOutcome::TooLarge) if r.oversize.sends == 0 => {
                format!(
                    "refused at once, 0 sends ({:.0} s)",
                    r.oversize.after.as_secs_f64()
                )
            }
            Some(outcome) => format!(
                "{:?} after {} sends, {:.0} s",
                outcome,
                r.oversize.sends,
                r.oversize.after.as_secs_f64()
            ),
            None => format!(
                "still waiting after {:.0} s, {} sends",
                r.oversize.after.as_secs_f64(),
                r.oversize.sends
            ),
        };
        table.row(vec![
            r.profile.split(':').next().unwrap_or(r.profile).to_owned(),
            r.strategy.name().to_owned(),
            format!("{} ({})", num(r.goodput, 3), dimension_name(r.binding)),
            num(r.goodput_of_possible, 3),
            format!(
                "{}% / {}%",
                num(r.spilled.0 * 100.0, 1),
                num(r.spilled.1 * 100.0, 1)
            ),
            num(r.rate_limited as f64 * 1000.0 / r.sends.max(1) as f64, 1),
            format!("{}%", num(r.wasted * 100.0, 1)),
            r.pacing_error.map_or("–".to_owned(), |p| {
                format!(
                    "{} / {} ms",
                    num(p.p50_ns as f64 / 1e6, 2),
                    num(p.max_ns as f64 / 1e6, 2)
                )
            }),
            num(r.window_ratio, 3),
            makespan,
            format!("{} / {} s", num(r.delay_p50, 1), num(r.delay_p99, 1)),
            num(r.jain, 3),
            r.fifo_violations.to_string(),
            oversize,
        ]);
    }
    let profiles = profiles();
    let describe = |p: &Profile| {
        let l = p.client.limits;
        format!(
            "**{}**: {} rpm, {} input tpm, {} output tpm",
            p.name, l.rpm, l.input_tpm, l.output_tpm
        )
    };
    Section {
        title: "2. Pacing and goodput against a simulated provider".to_owned(),
        intro: vec![
            format!(
                "{} callers in a closed loop for {} simulated minutes on tokio's paused clock, \
                 against `tollgate_sim::SimProvider` (answers in 300 ms + 15 ms per output \
                 token). Seeded sizes: input 200–8,000 tokens, output limit 256–4,096, output \
                 produced 20–100% of the limit. One request larger than the input bucket arrives \
                 at {} s. A second run sends a fixed batch of {} requests through the same callers.",
                config.callers,
                config.duration.as_secs() / 60,
                config.oversize_at.as_secs(),
                config.batch
            ),
            format!(
                "Profiles: {}; {}.",
                describe(&profiles[0]),
                describe(&profiles[1])
            ),
        ],
        table,
        notes: vec![
            "goodput (BENCHMARKS.md's measure, the target ≥ 0.98): what the provider counted \
             against the binding limit (named) per minute, over the limit. A bucket that starts \
             full lets the first minute take a whole extra bucket, so with minute buckets \
             (profile A) it exceeds 1. of the most possible: the same over `limit × minutes + \
             capacity`, the most the provider accepts in the run from any client."
                .to_owned(),
            "lost by the provider: capacity the provider's bucket of the binding limit lost, \
             over the most possible, which no client can use. idle: refill arriving while the \
             bucket was full (nobody was waiting, e.g. every caller was waiting for an answer). \
             refunds: output given back after an answer (profile B) that overflowed the bucket \
             (output limits of up to 4,096 tokens against a 5,000-token one-second bucket). \
             Goodput of the most possible plus these is 1.00 for tollgate: its pacing loses \
             nothing the provider could have accepted."
                .to_owned(),
            "quota wasted: tokens the provider charged for refused sends (profile A counts them) \
             over tokens of accepted sends."
                .to_owned(),
            "pacing error: grant time minus the earliest time an exact bucket replaying the \
             limiter's grants and settlements allows (not before the request asked, nor before \
             the grant ahead of it); p50 over grants that waited, max over all grants (a \
             negative value would be a grant too early); tollgate only, in runs without 429s."
                .to_owned(),
            "max 60 s window: the most sent (accepted or refused) in any closed 60 s window over \
             `limit + capacity`, highest over requests, input and (profile A) output; ≤ 1.00 \
             means the bound held. In profile B output is refunded after the answer, so output \
             sent may legitimately exceed it."
                .to_owned(),
            "batch makespan: from the first send to the last answer (or give-up), and its ratio \
             to tollgate's; bound: the binding limit's refill time for what the batch charges \
             beyond one bucket (the last answer's own time, up to 62 s, comes on top)."
                .to_owned(),
            "queue delay: from issuing a request to the provider accepting it, retries included; \
             Jain: fairness of accepted tokens per caller (1 = equal); FIFO violations: pairs of \
             requests accepted in the opposite order to their issue."
                .to_owned(),
            "naive retry and governor sleep `retry-after` (whole seconds) after a 429; the \
             cookbook pauses every caller 15 s. Every client makes at most 6 sends per request."
                .to_owned(),
        ],
    }
}

/// A dimension's short name.
pub fn dimension_name(d: SimDimension) -> &'static str {
    match d {
        SimDimension::Requests => "rpm",
        SimDimension::InputTokens => "input",
        SimDimension::OutputTokens => "output",
    }
}
