//! Benchmark 4: priority classes. One model's limiter under a saturating batch load (many
//! closed-loop callers) and a seeded Poisson stream of interactive calls, run twice: every
//! call at [`Priority::Default`] (one FIFO queue) and interactive calls at
//! [`Priority::Interactive`], batch calls at [`Priority::Batch`]. Reported: the interactive
//! calls' queue delay (from `reserve` to grant) and the batch throughput. Only the limiter
//! is measured (no provider): a granted call is "answered" after a seeded service time.

use std::sync::Arc;
use std::time::Duration;

use tollgate::clock;

use tollgate::catalog::Limits;
use tollgate::limit::{Cost, LimiterBackend, LimiterConfig, Priority, TokenBucketRateLimiter};
use tollgate_sim::SimRng;

use crate::report::{Section, Table, num};
use crate::stats;

/// How the calls are classed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queueing {
    /// Every call at [`Priority::Default`]: one FIFO queue.
    Fifo,
    /// Interactive calls at [`Priority::Interactive`], batch calls at [`Priority::Batch`].
    Priorities,
}

impl Queueing {
    /// Both, FIFO first.
    pub const ALL: [Queueing; 2] = [Queueing::Fifo, Queueing::Priorities];

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Queueing::Fifo => "FIFO (every call `Default`)",
            Queueing::Priorities => "priorities (`Interactive` / `Batch`)",
        }
    }

    fn classes(self) -> (Priority, Priority) {
        match self {
            Queueing::Fifo => (Priority::Default, Priority::Default),
            Queueing::Priorities => (Priority::Interactive, Priority::Batch),
        }
    }
}

/// The load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriorityConfig {
    /// The model's requests per minute (the only limit; full-minute bucket).
    pub rpm: u64,
    /// Closed-loop batch callers: each reserves, is served, and reserves again.
    pub batch_callers: usize,
    /// A batch call's service time, drawn uniformly from this range (ms, inclusive).
    pub service_ms: (u64, u64),
    /// Mean interactive arrivals per minute (Poisson).
    pub interactive_per_min: f64,
    /// Simulated time.
    pub duration: Duration,
    /// Measured from here on (the full bucket drains first).
    pub warmup: Duration,
    /// Seed of arrivals and service times.
    pub seed: u64,
}

impl PriorityConfig {
    /// The benchmark: 600 rpm, 100 batch callers (served in 1–3 s), 60 interactive calls
    /// a minute, 10 simulated minutes of which the first is warm-up.
    pub const FULL: PriorityConfig = PriorityConfig {
        rpm: 600,
        batch_callers: 100,
        service_ms: (1_000, 3_000),
        interactive_per_min: 60.0,
        duration: Duration::from_secs(600),
        warmup: Duration::from_secs(60),
        seed: 3,
    };

    /// The same load on a shared backend (Redis) in real time: 2 minutes, the first 30 s of
    /// warm-up.
    pub const REAL_TIME: PriorityConfig = PriorityConfig {
        duration: Duration::from_secs(120),
        warmup: Duration::from_secs(30),
        ..PriorityConfig::FULL
    };

    /// The limiter configuration of the benchmark's model.
    pub fn limiter_config(&self, model_id: &str) -> LimiterConfig {
        LimiterConfig::new(
            model_id,
            Limits {
                rpm: self.rpm,
                ..Limits::default()
            },
        )
        .with_adaptive(false)
        // Only the limiter is measured: requests "arrive" when granted.
        .with_arrival_allowance(Duration::ZERO)
    }

    fn measured_minutes(&self) -> f64 {
        (self.duration - self.warmup).as_secs_f64() / 60.0
    }
}

/// One run's results.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorityReport {
    /// How calls were classed.
    pub queueing: Queueing,
    /// Interactive calls that arrived after the warm-up (each was granted).
    pub interactive: usize,
    /// Their queue delays (reserve to grant), in seconds.
    pub interactive_delays: Vec<f64>,
    /// Batch calls granted after the warm-up, per minute.
    pub batch_per_min: f64,
    /// Batch queue delays (reserve to grant) after the warm-up, in seconds.
    pub batch_delays: Vec<f64>,
    /// Every call granted after the warm-up, per minute.
    pub total_per_min: f64,
}

impl PriorityReport {
    /// The `q`-quantile of the interactive queue delay, in seconds.
    pub fn interactive_delay(&self, q: f64) -> f64 {
        stats::percentile(&self.interactive_delays, q)
    }

    /// The `q`-quantile of the batch queue delay, in seconds.
    pub fn batch_delay(&self, q: f64) -> f64 {
        stats::percentile(&self.batch_delays, q)
    }
}

/// Runs the load against one in-process limiter with calls classed by `queueing`. Must
/// run on a paused clock.
pub async fn run(queueing: Queueing, config: PriorityConfig) -> PriorityReport {
    let limiter = TokenBucketRateLimiter::new(config.limiter_config("m"));
    run_on(Arc::new(limiter), queueing, config).await
}

/// Runs the load against `limiter` (any backend) with calls classed by `queueing`.
pub async fn run_on(
    limiter: Arc<dyn LimiterBackend>,
    queueing: Queueing,
    config: PriorityConfig,
) -> PriorityReport {
    let (interactive_class, batch_class) = queueing.classes();
    let start = clock::now();
    let (warmup, end) = (config.warmup, config.duration);
    let mut seeds = SimRng::new(config.seed);

    // Batch: closed loop until the end; each caller returns (granted at, delay) per call.
    let batch: Vec<_> = (0..config.batch_callers)
        .map(|_| {
            let limiter = limiter.clone();
            let mut rng = seeds.fork();
            let (lo, hi) = config.service_ms;
            tokio::spawn(async move {
                let mut grants = Vec::new();
                while start.elapsed() < end {
                    let asked = start.elapsed();
                    let mut r = limiter
                        .reserve(Cost::call(0, 0), batch_class)
                        .await
                        .expect("one request fits");
                    r.mark_sent();
                    let granted = start.elapsed();
                    grants.push((granted, granted - asked));
                    tokio::time::sleep(Duration::from_millis(rng.range(lo, hi))).await;
                }
                grants
            })
        })
        .collect();

    // Interactive: Poisson arrivals until the end; each returns (arrived at, delay).
    let mut arrivals = seeds.fork();
    let mean_gap_s = 60.0 / config.interactive_per_min;
    let mut interactive = Vec::new();
    loop {
        let gap = -(1.0 - arrivals.unit()).ln() * mean_gap_s;
        tokio::time::sleep(Duration::from_secs_f64(gap)).await;
        let arrived = start.elapsed();
        if arrived >= end {
            break;
        }
        let limiter = limiter.clone();
        interactive.push(tokio::spawn(async move {
            let mut r = limiter
                .reserve(Cost::call(0, 0), interactive_class)
                .await
                .expect("one request fits");
            r.mark_sent();
            (arrived, start.elapsed())
        }));
    }

    let measured = |t: Duration| t >= warmup && t < end;
    let mut interactive_delays = Vec::new();
    let mut interactive_granted = 0u64;
    for t in interactive {
        let (arrived, granted) = t.await.expect("interactive task");
        if measured(arrived) {
            interactive_delays.push((granted - arrived).as_secs_f64());
        }
        if measured(granted) {
            interactive_granted += 1;
        }
    }
    let mut batch_granted = 0u64;
    let mut batch_delays = Vec::new();
    for t in batch {
        for (granted, delay) in t.await.expect("batch task") {
            if measured(granted) {
                batch_granted += 1;
                batch_delays.push(delay.as_secs_f64());
            }
        }
    }
    let minutes = config.measured_minutes();
    PriorityReport {
        queueing,
        interactive: interactive_delays.len(),
        interactive_delays,
        batch_per_min: batch_granted as f64 / minutes,
        batch_delays,
        total_per_min: (batch_granted + interactive_granted) as f64 / minutes,
    }
}

/// Benchmark 4's section of `docs/benchmarks.md`.
pub fn section(reports: &[PriorityReport], config: PriorityConfig) -> Section {
    table_section(
        reports,
        config,
        "4. Priority classes",
        "in process, on tokio's paused clock",
    )
}

/// Benchmark 4 on tollgate-redis: the same load on one Redis in real time.
pub fn redis_section(reports: &[PriorityReport], config: PriorityConfig) -> Section {
    let mut section = table_section(
        reports,
        config,
        "4b. Priority classes on Redis",
        "on tollgate-redis (one local Redis), in real time",
    );
    section.notes.push(
        "On Redis a reservation books its slot and sleeps, so a class cannot jump a slot \
         already booked: a `Batch` reservation books only slots within `BATCH_HORIZON` (1 s) \
         of now and asks again when offered one further off; `Interactive` books any slot. \
         The two runs (FIFO, priorities) run at once, each on a model key of its own."
            .to_owned(),
    );
    section
}

fn table_section(
    reports: &[PriorityReport],
    config: PriorityConfig,
    title: &str,
    place: &str,
) -> Section {
    let mut table = Table::new(&[
        "queue",
        "interactive calls",
        "interactive delay p50",
        "interactive delay p99",
        "interactive delay max",
        "batch delay p50",
        "batch requests / min",
        "batch vs FIFO",
        "all requests / min",
    ]);
    let fifo_batch = reports
        .iter()
        .find(|r| r.queueing == Queueing::Fifo)
        .map_or(f64::NAN, |r| r.batch_per_min);
    let s = |x: f64| format!("{} s", num(x, 3));
    for r in reports {
        table.row(vec![
            r.queueing.name().to_owned(),
            r.interactive.to_string(),
            s(r.interactive_delay(0.5)),
            s(r.interactive_delay(0.99)),
            s(r.interactive_delay(1.0)),
            s(r.batch_delay(0.5)),
            num(r.batch_per_min, 1),
            format!("{:+.2}%", (r.batch_per_min / fifo_batch - 1.0) * 100.0),
            num(r.total_per_min, 1),
        ]);
    }
    Section {
        title: title.to_owned(),
        intro: vec![format!(
            "One model at {} rpm (full-minute bucket, aging at the default {} s) {place}: \
             {} closed-loop batch callers (each served in {}–{} ms, then \
             reserving again) keep the queue full, and interactive calls arrive as a seeded \
             Poisson stream of {} a minute. {} minutes, the first {} s of warm-up \
             (the full bucket draining) not measured. Run twice: every call at \
             `Priority::Default` (one FIFO queue), then interactive calls at \
             `Priority::Interactive` and batch calls at `Priority::Batch`.",
            config.rpm,
            LimiterConfig::DEFAULT_AGING.as_secs(),
            config.batch_callers,
            config.service_ms.0,
            config.service_ms.1,
            config.interactive_per_min,
            config.duration.as_secs() / 60,
            config.warmup.as_secs(),
        )],
        table,
        notes: vec![
            "delay: from the call to `reserve_with` to its grant (queue delay only; nothing \
             is sent). Interactive delays are those of the calls that arrived after the \
             warm-up; p50 / p99 by nearest rank."
                .to_owned(),
            "batch requests / min: batch grants after the warm-up per minute; batch vs FIFO: \
             its change against the FIFO run. The model is saturated either way, so \
             priorities only reorder grants: batch throughput is the limit minus the \
             interactive share in both runs."
                .to_owned(),
        ],
    }
}
