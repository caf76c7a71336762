//! Benchmark 1's queue scenarios: `n` tasks all queue on one limiter, then are released
//! one at a time, either by a manual clock (tokio's paused clock, advanced 1 ms per
//! grant, so what is measured is queueing and waking, not sleeping) or by hand-off (each
//! task gives back what it holds as soon as it resumes).
//!
//! Each waiting future is wrapped in [`Counted`], which counts its polls and the wake-ups
//! delivered to it, so "exactly one wake-up per grant" is measured, not assumed. The wall
//! time from "capacity available" (just before the clock is advanced, or the previous
//! holder gives back) to "task resumed" is recorded per grant.
//!
//! The benchmark's table (every row, the fast-path ones measured by the bench binary
//! too) is in [`section`] (`overhead/table.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tollgate::catalog::Limits;
use tollgate::limit::{Cost, LimiterConfig, TokenBucketRateLimiter};

mod table;

pub use table::{QUEUE_RUNS, QUEUED, Row, SAMPLES, queue_row, section};

/// Polls and wake-ups of the futures wrapped with the same counters.
#[derive(Debug, Default)]
pub struct Counters {
    polls: AtomicU64,
    wakes: AtomicU64,
}

impl Counters {
    /// Polls so far.
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Wake-ups so far.
    pub fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::Relaxed)
    }
}

/// A future that counts its polls and the wake-ups of the waker it hands down.
#[derive(Debug)]
pub struct Counted<F> {
    inner: Pin<Box<F>>,
    counters: Arc<Counters>,
}

impl<F: Future> Counted<F> {
    /// Wraps `inner`.
    pub fn new(inner: F, counters: Arc<Counters>) -> Self {
        Counted {
            inner: Box::pin(inner),
            counters,
        }
    }
}

struct CountingWaker {
    inner: Waker,
    counters: Arc<Counters>,
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.counters.wakes.fetch_add(1, Ordering::Relaxed);
        self.inner.wake_by_ref();
    }
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.counters.polls.fetch_add(1, Ordering::Relaxed);
        let waker = Waker::from(Arc::new(CountingWaker {
            inner: cx.waker().clone(),
            counters: self.counters.clone(),
        }));
        self.inner.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

/// One queue scenario's results.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueReport {
    /// Tasks queued (and granted).
    pub tasks: usize,
    /// Wall time from the first release to the last task resumed.
    pub wall: Duration,
    /// Polls of the waiting futures.
    pub polls: u64,
    /// Wake-ups delivered to them.
    pub wakes: u64,
    /// Per grant, wall nanoseconds from capacity available to task resumed.
    pub latencies_ns: Vec<f64>,
}

impl QueueReport {
    /// Wall nanoseconds per task.
    pub fn ns_per_task(&self) -> f64 {
        self.wall.as_nanos() as f64 / self.tasks as f64
    }

    /// Wake-ups per grant (1.0 is the target).
    pub fn wakes_per_grant(&self) -> f64 {
        self.wakes as f64 / self.tasks as f64
    }

    /// Polls per grant beyond the first (1.0 when each waiter is polled once to queue and
    /// once to finish).
    pub fn extra_polls_per_grant(&self) -> f64 {
        (self.polls as f64 - self.tasks as f64) / self.tasks as f64
    }
}

/// Where "capacity available" was last marked, and what resumed since.
#[derive(Debug)]
struct Probe {
    available_at: Mutex<std::time::Instant>,
    latencies: Mutex<Vec<f64>>,
    resumed: AtomicUsize,
}

// Benchmark 1 measures wall time; this is the one place it reads the wall clock.
#[allow(clippy::disallowed_methods)]
fn wall_now() -> std::time::Instant {
    std::time::Instant::now()
}

impl Probe {
    fn new() -> Arc<Self> {
        Arc::new(Probe {
            available_at: Mutex::new(wall_now()),
            latencies: Mutex::new(Vec::new()),
            resumed: AtomicUsize::new(0),
        })
    }

    fn mark_available(&self) {
        *self.available_at.lock().unwrap_or_else(|e| e.into_inner()) = wall_now();
    }

    fn resumed(&self) {
        let now = wall_now();
        let from = *self.available_at.lock().unwrap_or_else(|e| e.into_inner());
        self.latencies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((now - from).as_nanos() as f64);
        self.resumed.fetch_add(1, Ordering::Release);
    }

    fn count(&self) -> usize {
        self.resumed.load(Ordering::Acquire)
    }

    fn report(&self, tasks: usize, wall: Duration, counters: &Counters) -> QueueReport {
        QueueReport {
            tasks,
            wall,
            polls: counters.polls(),
            wakes: counters.wakes(),
            latencies_ns: self
                .latencies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// Spawns `tasks` waiters made by `waiter` (each awaits its grant through [`Counted`] and
/// reports to the probe), and yields until every one has been polled once, i.e. queued.
async fn queue<F, Fut>(tasks: usize, waiter: F) -> (Arc<Counters>, Arc<Probe>, Vec<JoinHandle<()>>)
where
    F: Fn(Arc<Counters>, Arc<Probe>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (counters, probe) = (Arc::new(Counters::default()), Probe::new());
    let handles = (0..tasks)
        .map(|_| tokio::spawn(waiter(counters.clone(), probe.clone())))
        .collect();
    while counters.polls() < tasks as u64 {
        tokio::task::yield_now().await;
    }
    (counters, probe, handles)
}

/// Waits for every waiter to finish.
async fn finish(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.await.expect("a waiter panicked");
    }
}

/// Releases one grant per step of the manual clock until every task resumed, then waits
/// for the waiters; returns the wall time.
async fn drive_clock(probe: &Probe, tasks: usize, handles: Vec<JoinHandle<()>>) -> Duration {
    let start = wall_now();
    while probe.count() < tasks {
        let before = probe.count();
        probe.mark_available();
        tokio::time::advance(Duration::from_millis(1)).await;
        for _ in 0..1_000 {
            if probe.count() > before {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    let wall = start.elapsed();
    finish(handles).await;
    wall
}

/// Starts a hand-off chain with `release` and waits until every waiter has had its turn;
/// returns the wall time.
async fn hand_off(probe: &Probe, handles: Vec<JoinHandle<()>>, release: impl FnOnce()) -> Duration {
    let start = wall_now();
    probe.mark_available();
    release();
    finish(handles).await;
    start.elapsed()
}

fn limiter(limits: Limits) -> TokenBucketRateLimiter {
    TokenBucketRateLimiter::new(
        LimiterConfig::new("bench", limits)
            .with_adaptive(false)
            .with_arrival_allowance(std::time::Duration::ZERO),
    )
}

/// tollgate: `tasks` waiters for 1 request + 1,000 tokens on a drained limiter refilling
/// one such grant per millisecond; the paused clock is advanced 1 ms at a time. Must run
/// on a paused current-thread runtime.
pub async fn tollgate_clock(tasks: usize) -> QueueReport {
    let limiter = limiter(Limits {
        rpm: 60_000,
        tpm: 60_000_000,
        ..Limits::default()
    });
    limiter
        .try_reserve(Cost {
            requests: 60_000,
            input_tokens: 60_000_000,
            output_tokens: 0,
        })
        .expect("a full bucket")
        .mark_sent();
    let (counters, probe, handles) = queue(tasks, |counters, probe| {
        let limiter = limiter.clone();
        async move {
            let reservation = Counted::new(limiter.reserve(Cost::call(1_000, 0)), counters).await;
            probe.resumed();
            reservation.expect("granted").mark_sent();
        }
    })
    .await;
    let wall = drive_clock(&probe, tasks, handles).await;
    probe.report(tasks, wall, &counters)
}

/// leaky-bucket: the same queue on a `leaky_bucket::RateLimiter` refilling one permit per
/// millisecond (max 1, fair). Must run on a paused current-thread runtime.
pub async fn leaky_bucket_clock(tasks: usize) -> QueueReport {
    let limiter = Arc::new(
        leaky_bucket::RateLimiter::builder()
            .max(1)
            .initial(0)
            .refill(1)
            .interval(Duration::from_millis(1))
            .build(),
    );
    let (counters, probe, handles) = queue(tasks, |counters, probe| {
        let limiter = limiter.clone();
        async move {
            Counted::new(limiter.acquire(1), counters).await;
            probe.resumed();
        }
    })
    .await;
    let wall = drive_clock(&probe, tasks, handles).await;
    probe.report(tasks, wall, &counters)
}

/// tollgate hand-off: `tasks` waiters for one request on a limiter holding one; each gives
/// its reservation back unsent as soon as it resumes, which grants the next.
pub async fn tollgate_handoff(tasks: usize) -> QueueReport {
    let limiter = limiter(Limits {
        rpm: 1,
        ..Limits::default()
    });
    let first = limiter
        .try_reserve(Cost::call(0, 0))
        .expect("a full bucket");
    let (counters, probe, handles) = queue(tasks, |counters, probe| {
        let limiter = limiter.clone();
        async move {
            let reservation = Counted::new(limiter.reserve(Cost::call(0, 0)), counters).await;
            probe.resumed();
            probe.mark_available();
            drop(reservation);
        }
    })
    .await;
    let wall = hand_off(&probe, handles, || drop(first)).await;
    probe.report(tasks, wall, &counters)
}

/// tokio `Semaphore(1)` hand-off: the same with a permit.
pub async fn semaphore_handoff(tasks: usize) -> QueueReport {
    let semaphore = Arc::new(Semaphore::new(0));
    let (counters, probe, handles) = queue(tasks, |counters, probe| {
        let semaphore = semaphore.clone();
        async move {
            let permit = Counted::new(semaphore.acquire(), counters).await;
            probe.resumed();
            probe.mark_available();
            drop(permit);
        }
    })
    .await;
    let wall = hand_off(&probe, handles, || semaphore.add_permits(1)).await;
    probe.report(tasks, wall, &counters)
}
