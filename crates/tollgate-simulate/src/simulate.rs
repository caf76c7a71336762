//! The simulation: a catalog model's limits and a workload against the simulated
//! provider on tokio's paused clock (minutes of traffic in a moment, the same figures on
//! every run), tollgate beside two clients people write: a naive one that retries on 429
//! (honouring `retry-after`) and the OpenAI cookbook's parallel processor pacing (float
//! buckets, every caller pauses 15 s after any 429). Written as an SVG chart (send rate
//! and accepted rate against the limit, queue depth) and a table.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use tokio::time::Instant;
use tollgate::catalog::ModelEntry;
use tollgate::clock;
use tollgate::pipeline::{DefaultEstimator, NoRecorder, TokenEstimator};
use tollgate::{Catalog, Conversation, Models, SamplingParams};
use tollgate_sim::provider::sim_config_for;
use tollgate_sim::{SimClientProvider, SimLimits, SimProvider, SimRefusal, SimRequest};

/// The model, the workload and the chart.
#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// The catalog model whose limits are simulated.
    #[arg(short, long, default_value = "demo")]
    model: String,
    /// Callers sending at once, each sending its next request when the last one is done.
    #[arg(long, default_value_t = 32)]
    callers: usize,
    /// Simulated seconds of traffic.
    #[arg(long, default_value_t = 300)]
    duration: u64,
    /// Input tokens per request (about).
    #[arg(long, default_value_t = 200)]
    input_tokens: u64,
    /// Output limit per request (`max_tokens`).
    #[arg(long, default_value_t = 100)]
    output_tokens: u64,
    /// Output each request actually produces.
    #[arg(long, default_value_t = 50)]
    used_output_tokens: u64,
    /// The chart (SVG).
    #[arg(short, long, default_value = "simulate.svg")]
    output: PathBuf,
}

/// A client strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    Tollgate,
    Naive,
    Cookbook,
}

impl Strategy {
    const ALL: [Strategy; 3] = [Strategy::Tollgate, Strategy::Naive, Strategy::Cookbook];

    fn name(self) -> &'static str {
        match self {
            Strategy::Tollgate => "tollgate",
            Strategy::Naive => "naive retry",
            Strategy::Cookbook => "cookbook",
        }
    }
}

/// Sends per request at most, for every strategy.
const MAX_ATTEMPTS: u32 = 6;
/// The naive client's first backoff (doubling) when a 429 has no `retry-after`.
const NAIVE_BACKOFF: Duration = Duration::from_secs(1);
/// The cookbook's `seconds_to_pause_after_rate_limit_error`.
const COOKBOOK_PAUSE: Duration = Duration::from_secs(15);
/// How often the series are sampled.
const SAMPLE: Duration = Duration::from_secs(1);
/// The window over which a rate in the chart is averaged.
const RATE_WINDOW: usize = 10;

/// One strategy's run.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) strategy: Strategy,
    pub(crate) sent: u64,
    pub(crate) accepted: u64,
    pub(crate) rate_limited: u64,
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    /// Per second: (calls, accepted, queue depth) so far.
    pub(crate) samples: Vec<(u64, u64, i64)>,
    pub(crate) latencies: Vec<f64>,
    /// What one request asks of the limits.
    pub(crate) request: SimRequest,
}

/// Runs the three clients against `catalog`'s model, prints the table and writes the
/// chart.
pub(crate) fn simulate(
    catalog: &Catalog,
    args: &SimulateArgs,
) -> Result<(), Box<dyn std::error::Error>> {
    let entry = catalog.get(&args.model)?.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let mut reports = Vec::new();
    for strategy in Strategy::ALL {
        reports.push(runtime.block_on(run_one(strategy, &entry, args))?);
    }
    let limits = sim_config_for(&entry)?.limits;
    print_table(&reports, limits, args.duration);
    draw(&args.output, &reports, &entry, limits, args.duration)?;
    println!("chart: {}", args.output.display());
    Ok(())
}

async fn run_one(
    strategy: Strategy,
    entry: &ModelEntry,
    args: &SimulateArgs,
) -> Result<Report, Box<dyn std::error::Error>> {
    let mut model = entry.clone();
    model.provider = tollgate_sim::KEY.into();
    model.fallbacks.clear();
    model.deployments.clear();
    model.credential = None;
    model.options.insert(
        "output_tokens".into(),
        (args.used_output_tokens as i64).into(),
    );
    let sim = SimProvider::new(sim_config_for(&model)?);
    let models = Models::builder()
        .catalog(Catalog::builder().model(model.clone()).build()?)
        .provider(SimClientProvider::new().with_model(model.id.clone(), sim.clone()))
        .recorder(Arc::new(NoRecorder))
        .build()?;
    let words = (args.input_tokens.max(1) * 4 / 5).max(1) as usize;
    let prompt = vec!["pace"; words].join(" ");
    let request = Conversation::new().user(prompt).request(
        &model.id,
        SamplingParams::new().with_max_output_tokens(args.output_tokens.max(1))?,
    )?;
    let sim_request = SimRequest::new(
        DefaultEstimator.estimate_request(&request),
        args.output_tokens.max(1),
        args.used_output_tokens,
    );
    let limits = sim.config().limits;
    let cookbook = Arc::new(Cookbook::new(limits));
    let waiting = Arc::new(AtomicI64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let outcomes = Arc::new(Mutex::new((0u64, 0u64)));
    let start = clock::now();
    let end = start + Duration::from_secs(args.duration);
    let chat = models.chat(&model.id).await?;
    let mut tasks = Vec::new();
    for _ in 0..args.callers.max(1) {
        let (sim, chat, request, cookbook, waiting, latencies, outcomes) = (
            sim.clone(),
            chat.clone(),
            request.clone(),
            cookbook.clone(),
            waiting.clone(),
            latencies.clone(),
            outcomes.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while clock::now() < end {
                let t0 = clock::now();
                let ok = match strategy {
                    Strategy::Tollgate => chat.single_response(&request).await.is_ok(),
                    Strategy::Naive => naive(&sim, sim_request, &waiting).await,
                    Strategy::Cookbook => {
                        cookbook_call(&sim, sim_request, &cookbook, &waiting).await
                    }
                };
                let mut o = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                if ok {
                    o.0 += 1;
                    latencies
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(t0.elapsed().as_secs_f64());
                } else {
                    o.1 += 1;
                }
            }
        }));
    }
    let limiter = models.limiter(&model.id)?.clone();
    let mut samples = Vec::new();
    while clock::now() < end {
        tokio::time::sleep(SAMPLE).await;
        let stats = sim.stats();
        let queue = match strategy {
            Strategy::Tollgate => limiter
                .snapshot()
                .await
                .map(|s| s.queued as i64)
                .unwrap_or(0),
            _ => waiting.load(Ordering::Relaxed),
        };
        samples.push((stats.calls, stats.accepted, queue));
    }
    for t in tasks {
        t.abort();
    }
    let stats = sim.stats();
    let (completed, failed) = *outcomes.lock().unwrap_or_else(|e| e.into_inner());
    let mut latencies = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    latencies.sort_by(f64::total_cmp);
    Ok(Report {
        strategy,
        sent: stats.calls,
        accepted: stats.accepted,
        rate_limited: stats.rate_limited,
        completed,
        failed,
        samples,
        latencies,
        request: sim_request,
    })
}

/// No pacing; on a 429 sleep `retry-after`, else a doubling backoff; at most
/// [`MAX_ATTEMPTS`] sends.
async fn naive(sim: &SimProvider, request: SimRequest, waiting: &AtomicI64) -> bool {
    let mut backoff = NAIVE_BACKOFF;
    for _ in 0..MAX_ATTEMPTS {
        match sim.call(request).await {
            Ok(_) => return true,
            Err(refusal) => {
                let wait = match refusal {
                    SimRefusal::RateLimited {
                        retry_after: Some(d),
                    } => d,
                    _ => backoff,
                };
                backoff *= 2;
                waiting.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(wait).await;
                waiting.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
    false
}

/// The OpenAI cookbook processor's pacing: float capacities refilled continuously up to a
/// minute's limit, a request goes when every capacity covers it, and after any 429
/// everyone pauses [`COOKBOOK_PAUSE`].
#[derive(Debug)]
struct Cookbook {
    per_minute: [f64; 3],
    epoch: Instant,
    state: Mutex<([f64; 3], f64, Option<f64>)>,
}

impl Cookbook {
    fn new(limits: SimLimits) -> Self {
        let per_minute = [
            limits.rpm as f64,
            limits.input_tpm as f64,
            limits.output_tpm as f64,
        ];
        Cookbook {
            per_minute,
            epoch: clock::now(),
            state: Mutex::new((per_minute, 0.0, None)),
        }
    }

    async fn acquire(&self, request: SimRequest) {
        let need = [1.0, request.input_tokens as f64, request.max_output as f64];
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let now = self.epoch.elapsed().as_secs_f64();
                let elapsed = now - s.1;
                for (i, limit) in self.per_minute.iter().enumerate() {
                    s.0[i] = (s.0[i] + limit * elapsed / 60.0).min(*limit);
                }
                s.1 = now;
                let paused_until = s.2.map_or(0.0, |t| t + COOKBOOK_PAUSE.as_secs_f64());
                let limited = |i: usize| self.per_minute[i] > 0.0;
                if now < paused_until {
                    paused_until - now
                } else if (0..3).all(|i| !limited(i) || s.0[i] >= need[i]) {
                    for i in (0..3).filter(|i| limited(*i)) {
                        s.0[i] -= need[i];
                    }
                    return;
                } else {
                    (0..3)
                        .filter(|i| limited(*i))
                        .map(|i| (need[i] - s.0[i]).max(0.0) * 60.0 / self.per_minute[i].max(1.0))
                        .fold(0.0, f64::max)
                }
            };
            tokio::time::sleep(Duration::from_secs_f64(wait).max(Duration::from_millis(1))).await;
        }
    }

    fn on_rate_limited(&self) {
        let now = self.epoch.elapsed().as_secs_f64();
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = Some(now);
    }
}

async fn cookbook_call(
    sim: &SimProvider,
    request: SimRequest,
    pacer: &Cookbook,
    waiting: &AtomicI64,
) -> bool {
    for _ in 0..MAX_ATTEMPTS {
        waiting.fetch_add(1, Ordering::Relaxed);
        pacer.acquire(request).await;
        waiting.fetch_sub(1, Ordering::Relaxed);
        match sim.call(request).await {
            Ok(_) => return true,
            Err(SimRefusal::RateLimited { .. }) => pacer.on_rate_limited(),
            Err(SimRefusal::Overloaded) => {}
        }
    }
    false
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The accepted rate's share of the binding published limit.
pub(crate) fn share(report: &Report, limits: SimLimits, seconds: u64) -> f64 {
    let (input, output) = (report.request.input_tokens, report.request.max_output);
    let minutes = seconds as f64 / 60.0;
    let per_min = report.accepted as f64 / minutes.max(1e-9);
    let mut share: f64 = 0.0;
    if limits.rpm > 0 {
        share = share.max(per_min / limits.rpm as f64);
    }
    if limits.input_tpm > 0 {
        share = share.max(per_min * input as f64 / limits.input_tpm as f64);
    }
    if limits.output_tpm > 0 {
        share = share.max(per_min * output as f64 / limits.output_tpm as f64);
    }
    share
}

fn print_table(reports: &[Report], limits: SimLimits, seconds: u64) {
    println!(
        "limits: {} rpm, {} input tpm, {} output tpm; {} simulated seconds",
        limits.rpm, limits.input_tpm, limits.output_tpm, seconds
    );
    println!(
        "{:<12} {:>8} {:>9} {:>7} {:>10} {:>7} {:>12} {:>6} {:>7} {:>7}",
        "strategy",
        "sent",
        "accepted",
        "429s",
        "completed",
        "failed",
        "accepted/min",
        "share",
        "p50 s",
        "p99 s"
    );
    for r in reports {
        println!(
            "{:<12} {:>8} {:>9} {:>7} {:>10} {:>7} {:>12.1} {:>5.0}% {:>7.2} {:>7.2}",
            r.strategy.name(),
            r.sent,
            r.accepted,
            r.rate_limited,
            r.completed,
            r.failed,
            r.accepted as f64 * 60.0 / seconds.max(1) as f64,
            share(r, limits, seconds) * 100.0,
            percentile(&r.latencies, 0.5),
            percentile(&r.latencies, 0.99),
        );
    }
}

/// Points of a line: (simulated second, value).
type Series = Vec<(f64, f64)>;

/// Per-minute rates over a moving window from cumulative counts.
fn rates(samples: &[(u64, u64, i64)], pick: fn(&(u64, u64, i64)) -> u64) -> Series {
    (0..samples.len())
        .map(|i| {
            let j = i.saturating_sub(RATE_WINDOW);
            let before = if i >= RATE_WINDOW {
                pick(&samples[j])
            } else {
                0
            };
            let span = if i >= RATE_WINDOW { RATE_WINDOW } else { i + 1 };
            let n = pick(&samples[i]) - before;
            ((i + 1) as f64, n as f64 * 60.0 / span as f64)
        })
        .collect()
}

fn draw(
    path: &std::path::Path,
    reports: &[Report],
    entry: &ModelEntry,
    limits: SimLimits,
    seconds: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1000, 300 * (reports.len() as u32 + 1))).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((reports.len() + 1, 1));
    let series: Vec<(Series, Series)> = reports
        .iter()
        .map(|r| (rates(&r.samples, |s| s.0), rates(&r.samples, |s| s.1)))
        .collect();
    let peak = series
        .iter()
        .flat_map(|(a, b)| a.iter().chain(b))
        .map(|(_, y)| *y)
        .fold(limits.rpm as f64, f64::max)
        .max(1.0)
        * 1.1;
    for ((report, (sent, accepted)), panel) in reports.iter().zip(&series).zip(&panels) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!(
                    "{}: {} ({} rpm) - {} 429s",
                    report.strategy.name(),
                    entry.id,
                    limits.rpm,
                    report.rate_limited
                ),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..seconds as f64, 0f64..peak)?;
        chart
            .configure_mesh()
            .x_desc("simulated seconds")
            .y_desc("requests / min")
            .draw()?;
        chart
            .draw_series(LineSeries::new(sent.iter().copied(), &RED))?
            .label("sent")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart
            .draw_series(LineSeries::new(accepted.iter().copied(), &BLUE))?
            .label("accepted")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        if limits.rpm > 0 {
            chart
                .draw_series(LineSeries::new(
                    [
                        (0.0, limits.rpm as f64),
                        (seconds as f64, limits.rpm as f64),
                    ],
                    &BLACK,
                ))?
                .label("limit")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    let depth_peak = reports
        .iter()
        .flat_map(|r| r.samples.iter().map(|s| s.2))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.1;
    let mut chart = ChartBuilder::on(&panels[reports.len()])
        .caption("callers waiting (queue depth)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..seconds as f64, 0f64..depth_peak)?;
    chart.configure_mesh().x_desc("simulated seconds").draw()?;
    for (report, color) in reports.iter().zip([BLUE, RED, GREEN]) {
        let points: Vec<(f64, f64)> = report
            .samples
            .iter()
            .enumerate()
            .map(|(i, s)| ((i + 1) as f64, s.2 as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(points, &color))?
            .label(report.strategy.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
