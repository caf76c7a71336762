//! Benchmark 1: limiter overhead. tollgate's `TokenBucketRateLimiter` beside tokio's
//! `Semaphore`, governor and leaky-bucket: the uncontended fast path (criterion), two OS
//! threads on one limiter, 10k queued tasks released by a manual clock or by hand-off, and
//! the cost of reading the clock. Prints one table (and writes it where
//! `TOLLGATE_BENCH_OUT` says; the table is `tollgate_bench::overhead::section`).
//!
//! Rows that read tokio's clock run before anything pauses a clock in this process: once
//! one is paused (test-util), every `tokio::time::Instant::now` takes a slower path, which
//! gets its own row at the end.

use std::alloc::System;
use std::cell::RefCell;
use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::sync::Barrier;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::Criterion;
use governor::clock::{Clock, DefaultClock, MonotonicClock};
use governor::{Quota, RateLimiter};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::sync::Semaphore;
use tollgate::catalog::Limits;
use tollgate::limit::{Cost, LimiterConfig, TokenBucketRateLimiter};
use tollgate_bench::overhead::{
    self, QUEUE_RUNS, QUEUED, QueueReport, Row, SAMPLES, queue_row, section,
};
use tollgate_bench::stats;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Operations over which fast-path allocations are counted.
const ALLOC_OPS: u64 = 100_000;

/// The cost every fast-path row reserves: one request and 1,000 tokens.
fn cost() -> Cost {
    Cost::call(1_000, 0)
}

fn tollgate() -> TokenBucketRateLimiter {
    // Limits so large that the fast path always succeeds.
    TokenBucketRateLimiter::new(
        LimiterConfig::new(
            "bench",
            Limits {
                rpm: 1_000_000_000_000_000,
                tpm: 1_000_000_000_000_000_000,
                ..Limits::default()
            },
        )
        .with_adaptive(false),
    )
}

fn semaphore() -> Semaphore {
    Semaphore::new(Semaphore::MAX_PERMITS)
}

/// A governor limiter reading clock `C`.
type GovernorOn<C> = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    C,
    governor::middleware::NoOpMiddleware<<C as Clock>::Instant>,
>;

/// Governor on its default clock (quanta's TSC read).
type Governor = GovernorOn<DefaultClock>;

/// Two governor limiters (requests, tokens) at 10⁹ cells a second with a burst of 2³²−1:
/// 1,000 cells a call stay conforming for millions of calls, so each timing chunk below
/// starts from fresh limiters.
fn governor_pair() -> (Governor, Governor) {
    governor_pair_on()
}

/// The same pair reading clock `C`.
fn governor_pair_on<C: Clock + Default>() -> (GovernorOn<C>, GovernorOn<C>) {
    let quota = Quota::per_second(NonZeroU32::new(1_000_000_000).expect("nonzero"))
        .allow_burst(NonZeroU32::MAX);
    (
        RateLimiter::direct_with_clock(quota, C::default()),
        RateLimiter::direct_with_clock(quota, C::default()),
    )
}

const GOVERNOR_CHUNK: u64 = 1 << 20;
const THOUSAND: NonZeroU32 = NonZeroU32::new(1_000).expect("nonzero");

/// Times `n` operations, in chunks that each start from fresh governor limiters.
fn governor_chunks(n: u64, run: impl FnMut(u64, &(Governor, Governor)) -> Duration) -> Duration {
    governor_chunks_on(n, run)
}

/// The same on governor limiters reading clock `C`.
fn governor_chunks_on<C: Clock + Default>(
    n: u64,
    mut run: impl FnMut(u64, &(GovernorOn<C>, GovernorOn<C>)) -> Duration,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < n {
        let chunk = (n - done).min(GOVERNOR_CHUNK);
        total += run(chunk, &governor_pair_on());
        done += chunk;
    }
    total
}

/// One request and 1,000 tokens through governor's synchronous checks.
fn governor_check<C: Clock>((requests, tokens): &(GovernorOn<C>, GovernorOn<C>)) {
    black_box(requests.check()).expect("conforms");
    black_box(tokens.check_n(THOUSAND))
        .expect("capacity")
        .expect("conforms");
}

/// The same through governor's async API, ready on the first poll.
fn governor_ready((requests, tokens): &(Governor, Governor)) {
    ready(requests.until_ready());
    ready(tokens.until_n_ready(THOUSAND)).expect("capacity");
}

fn leaky_pair() -> (leaky_bucket::RateLimiter, leaky_bucket::RateLimiter) {
    let big = usize::MAX / 4;
    let bucket = || {
        leaky_bucket::RateLimiter::builder()
            .max(big)
            .initial(big)
            .refill(big)
            .build()
    };
    (bucket(), bucket())
}

/// Polls a future once with a no-op waker; it must be ready.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the fast path was not ready on the first poll"),
    }
}

// A benchmark measures wall time.
#[allow(clippy::disallowed_methods)]
fn wall() -> std::time::Instant {
    std::time::Instant::now()
}

/// Times `op` run `iters` times.
fn timed(iters: u64, mut op: impl FnMut()) -> Duration {
    let start = wall();
    for _ in 0..iters {
        op();
    }
    start.elapsed()
}

/// Runs `op` on two threads at once, `iters` in all; returns the wall time.
fn two_threads<S: Sync>(iters: u64, shared: &S, op: impl Fn(&S) + Sync) -> Duration {
    let per = iters.div_ceil(2);
    let barrier = Barrier::new(2);
    let elapsed = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    timed(per, || op(shared))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bench thread panicked"))
            .max()
            .unwrap_or_default()
    });
    elapsed.mul_f64(iters as f64 / (2 * per) as f64)
}

/// Runs one criterion benchmark and returns its median ns per operation over the
/// measurement samples (criterion's warm-up calls come first; its last `SAMPLES` calls are
/// the measurement).
fn measure(c: &mut Criterion, name: &str, mut routine: impl FnMut(u64) -> Duration) -> f64 {
    let samples = RefCell::new(Vec::new());
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let elapsed = routine(iters);
            samples
                .borrow_mut()
                .push(elapsed.as_nanos() as f64 / iters as f64);
            elapsed
        })
    });
    let samples = samples.into_inner();
    let measured = &samples[samples.len().saturating_sub(SAMPLES)..];
    stats::percentile(measured, 0.5)
}

/// Allocations per operation over `ALLOC_OPS` runs of `op`.
fn allocations(mut op: impl FnMut()) -> f64 {
    let region = Region::new(GLOBAL);
    for _ in 0..ALLOC_OPS {
        op();
    }
    region.change().allocations as f64 / ALLOC_OPS as f64
}

fn queue_runs<F: Future<Output = QueueReport>>(scenario: impl Fn(usize) -> F) -> Vec<QueueReport> {
    (0..QUEUE_RUNS)
        .map(|_| tollgate_bench::paused_runtime().block_on(scenario(QUEUED)))
        .collect()
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(SAMPLES)
        .without_plots()
        .configure_from_args();
    let mut rows = Vec::new();

    // Uncontended fast path: one request and 1,000 tokens that always fit.
    const FAST: &str = "uncontended, always succeeds (1 request + 1,000 tokens)";
    let limiter = tollgate();
    let sem = semaphore();
    let sem_forget = measure(&mut c, "semaphore try_acquire_many + forget", |n| {
        timed(n, || sem.try_acquire_many(1_000).expect("permits").forget())
    });
    let sem_release = measure(&mut c, "semaphore try_acquire_many + release", |n| {
        timed(n, || {
            drop(black_box(sem.try_acquire_many(1_000).expect("permits")))
        })
    });
    let kept = measure(&mut c, "tollgate try_reserve + mark_sent", |n| {
        timed(n, || limiter.try_reserve(cost()).expect("fits").mark_sent())
    });
    let refunded = measure(&mut c, "tollgate try_reserve + drop unsent", |n| {
        timed(n, || {
            drop(black_box(limiter.try_reserve(cost()).expect("fits")))
        })
    });
    let async_path = measure(&mut c, "tollgate reserve().await + mark_sent", |n| {
        timed(n, || {
            ready(limiter.reserve(cost())).expect("fits").mark_sent()
        })
    });
    let governor_sync = measure(&mut c, "governor check + check_n(1000)", |n| {
        governor_chunks(n, |chunk, pair| timed(chunk, || governor_check(pair)))
    });
    // Governor doing equal work: the same two checks reading the clock tollgate reads
    // (the system's monotonic clock, `std::time::Instant`).
    let governor_std = measure(&mut c, "governor check + check_n(1000), std clock", |n| {
        governor_chunks_on::<MonotonicClock>(n, |chunk, pair| timed(chunk, || governor_check(pair)))
    });
    let governor_async = measure(&mut c, "governor until_ready + until_n_ready(1000)", |n| {
        governor_chunks(n, |chunk, pair| timed(chunk, || governor_ready(pair)))
    });
    let (leaky_requests, leaky_tokens) = leaky_pair();
    let leaky = measure(
        &mut c,
        "leaky-bucket try_acquire(1) + try_acquire(1000)",
        |n| {
            timed(n, || {
                assert!(leaky_requests.try_acquire(1) && leaky_tokens.try_acquire(1_000));
            })
        },
    );
    rows.push(
        Row::new(
            FAST,
            "tollgate `try_reserve` + `mark_sent` (charge kept)",
            kept,
        )
        .vs(sem_forget)
        .allocs(allocations(|| {
            limiter.try_reserve(cost()).expect("fits").mark_sent()
        })),
    );
    rows.push(
        Row::new(
            FAST,
            "tollgate `try_reserve`, dropped unsent (refund)",
            refunded,
        )
        .vs(sem_release)
        .allocs(allocations(|| {
            drop(limiter.try_reserve(cost()).expect("fits"))
        })),
    );
    rows.push(
        Row::new(
            FAST,
            "tollgate `reserve().await` (ready at once) + `mark_sent`",
            async_path,
        )
        .vs(sem_forget)
        .allocs(allocations(|| {
            ready(limiter.reserve(cost())).expect("fits").mark_sent()
        })),
    );
    rows.push(
        Row::new(
            FAST,
            "tokio `Semaphore::try_acquire_many(1000)` + `forget`",
            sem_forget,
        )
        .vs(sem_forget)
        .allocs(allocations(|| {
            sem.try_acquire_many(1_000).expect("permits").forget()
        })),
    );
    rows.push(
        Row::new(
            FAST,
            "tokio `Semaphore::try_acquire_many(1000)`, released",
            sem_release,
        )
        .vs(sem_forget)
        .allocs(allocations(|| {
            drop(sem.try_acquire_many(1_000).expect("permits"))
        })),
    );
    let pair = governor_pair();
    rows.push(
        Row::new(
            FAST,
            "governor `check` + `check_n(1000)` (two limiters)",
            governor_sync,
        )
        .vs(sem_forget)
        .allocs(allocations(|| governor_check(&pair))),
    );
    let pair = governor_pair_on::<MonotonicClock>();
    rows.push(
        Row::new(
            FAST,
            "governor `check` + `check_n(1000)` on `std::time::Instant` (tollgate's clock)",
            governor_std,
        )
        .vs(sem_forget)
        .allocs(allocations(|| governor_check(&pair))),
    );
    let pair = governor_pair();
    rows.push(
        Row::new(
            FAST,
            "governor `until_ready` + `until_n_ready(1000)` (ready at once)",
            governor_async,
        )
        .vs(sem_forget)
        .allocs(allocations(|| governor_ready(&pair))),
    );
    rows.push(
        Row::new(FAST, "leaky-bucket `try_acquire` (two buckets)", leaky)
            .vs(sem_forget)
            .allocs(allocations(|| {
                assert!(leaky_requests.try_acquire(1) && leaky_tokens.try_acquire(1_000));
            })),
    );

    // Two OS threads on one limiter.
    const THREADS: &str = "two OS threads, one shared limiter (aggregate ns/op)";
    let shared = tollgate();
    let tollgate_threads = measure(&mut c, "tollgate try_reserve, 2 threads", |n| {
        two_threads(n, &shared, |l| {
            l.try_reserve(cost()).expect("fits").mark_sent()
        })
    });
    let sem_threads = measure(&mut c, "semaphore try_acquire_many, 2 threads", |n| {
        two_threads(n, &sem, |s| {
            s.try_acquire_many(1_000).expect("permits").forget()
        })
    });
    let governor_threads = measure(&mut c, "governor check_n, 2 threads", |n| {
        governor_chunks(n, |chunk, pair| two_threads(chunk, pair, governor_check))
    });
    rows.push(
        Row::new(
            THREADS,
            "tollgate `try_reserve` + `mark_sent`",
            tollgate_threads,
        )
        .vs(sem_threads),
    );
    rows.push(
        Row::new(
            THREADS,
            "tokio `Semaphore::try_acquire_many` + `forget`",
            sem_threads,
        )
        .vs(sem_threads),
    );
    rows.push(
        Row::new(
            THREADS,
            "governor `check` + `check_n(1000)`",
            governor_threads,
        )
        .vs(sem_threads),
    );

    // Reading the clock.
    const CLOCK: &str = "reading the clock";
    let std_now = measure(&mut c, "std Instant::now", |n| {
        #[allow(clippy::disallowed_methods)]
        timed(n, || {
            black_box(std::time::Instant::now());
        })
    });
    let tokio_now = measure(&mut c, "tokio Instant::now", |n| {
        timed(n, || {
            black_box(tollgate::clock::now());
        })
    });
    let quanta = DefaultClock::default();
    let quanta_now = measure(&mut c, "governor DefaultClock::now", |n| {
        timed(n, || {
            black_box(quanta.now());
        })
    });
    rows.push(
        Row::new(
            CLOCK,
            "`tokio::time::Instant::now` (what tollgate reads)",
            tokio_now,
        )
        .vs(std_now),
    );
    rows.push(Row::new(CLOCK, "`std::time::Instant::now`", std_now).vs(std_now));
    rows.push(Row::new(CLOCK, "governor's default clock (quanta)", quanta_now).vs(std_now));

    // What any exact limiter handing out owned reservations pays, against the semaphore.
    const FLOOR: &str = "the floor under an exact, owned reservation (against the semaphore)";
    let arc = std::sync::Arc::new(limiter.clone());
    let arc_clone = measure(&mut c, "Arc clone + drop", |n| {
        timed(n, || drop(black_box(arc.clone())))
    });
    let clock_and_arc = measure(&mut c, "tokio Instant::now + Arc clone + drop", |n| {
        timed(n, || {
            black_box(tollgate::clock::now());
            drop(black_box(arc.clone()));
        })
    });
    let governor_one = measure(&mut c, "governor check (one limiter)", |n| {
        governor_chunks(n, |chunk, (requests, _)| {
            timed(chunk, || {
                black_box(requests.check()).expect("conforms");
            })
        })
    });
    rows.push(
        Row::new(
            FLOOR,
            "`tokio::time::Instant::now` (an exact grant needs the time)",
            tokio_now,
        )
        .vs(sem_forget),
    );
    rows.push(
        Row::new(
            FLOOR,
            "`Arc` clone + drop (an owned `Reservation` holds its limiter)",
            arc_clone,
        )
        .vs(sem_forget),
    );
    rows.push(Row::new(FLOOR, "both of the above", clock_and_arc).vs(sem_forget));
    rows.push(
        Row::new(
            FLOOR,
            "governor `check` (one lock-free limiter, quanta clock)",
            governor_one,
        )
        .vs(sem_forget),
    );

    // Queues: from here on a clock has been paused in this process.
    const QUEUE: &str = "10k tasks queued, refilled by a manual clock (1 grant per ms step)";
    let tollgate_clock = queue_runs(overhead::tollgate_clock);
    let leaky_clock = queue_runs(overhead::leaky_bucket_clock);
    let leaky_row = queue_row(QUEUE, "leaky-bucket `acquire(1)` (fair)", &leaky_clock);
    rows.push(queue_row(QUEUE, "tollgate `reserve().await`", &tollgate_clock).vs(leaky_row.ns));
    let leaky_ns = leaky_row.ns;
    rows.push(leaky_row.vs(leaky_ns));
    const HANDOFF: &str = "10k tasks queued, hand-off (each gives back what it held)";
    let tollgate_handoff = queue_runs(overhead::tollgate_handoff);
    let semaphore_handoff = queue_runs(overhead::semaphore_handoff);
    let sem_row = queue_row(
        HANDOFF,
        "tokio `Semaphore(1)` `acquire().await`",
        &semaphore_handoff,
    );
    rows.push(
        queue_row(
            HANDOFF,
            "tollgate `reserve().await`, dropped unsent",
            &tollgate_handoff,
        )
        .vs(sem_row.ns),
    );
    let sem_ns = sem_row.ns;
    rows.push(sem_row.vs(sem_ns));

    let paused_now = tollgate_bench::paused_runtime().block_on(async {
        measure(&mut c, "tokio Instant::now, paused clock", |n| {
            timed(n, || {
                black_box(tollgate::clock::now());
            })
        })
    });
    rows.push(
        Row::new(
            CLOCK,
            "`tokio::time::Instant::now` after a clock was paused (test-util path)",
            paused_now,
        )
        .vs(std_now),
    );

    section(&rows).emit();
}
