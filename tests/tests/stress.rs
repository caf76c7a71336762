//! A multi-thread stress test of the in-process limiter (`docs/reliability.md`): many tasks
//! on a 4-worker runtime reserve random costs at random priorities and end in every way a
//! reservation can (dropped before the grant, granted and dropped unsent, sent and
//! dropped, sent and settled above or below what was reserved). At the end:
//!
//! - **conservation**: each bucket holds exactly its capacity, minus what the sends
//!   charged, plus the refill of the elapsed time (read from the limiter's own clock); a
//!   refund lost or given twice shows as a whole token or more;
//! - **FIFO within a class**: whenever a waiter is seen granted, every earlier waiter of
//!   its class still waiting is found granted too (polled then, under the same lock that
//!   orders arrivals), so no waiter overtook an earlier one of its class.
//!
//! Randomness is seeded (`TOLLGATE_STRESS_SEED` to repeat a run); the seed is printed.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tollgate::catalog::Limits;
use tollgate::limit::{
    Cost, LimiterConfig, Priority, Reservation, Reserve, TokenBucketRateLimiter,
};
use tollgate::{Dimension, Result};

/// xorshift64*: small, seeded, good enough to pick costs and fates.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One waiter as the test sees it.
struct Entry {
    class: Priority,
    /// The future while not granted; `None` once it finished.
    reserve: Option<Reserve>,
    /// The waker of the task that owns the entry.
    waker: Waker,
    /// A result found by another task's FIFO check, for the owner to pick up.
    result: Option<Result<Reservation>>,
}

/// Every waiter not yet finished, by arrival ticket. Arrival (the ticket and the first
/// poll, which queues the waiter) happens under this lock, so ticket order is queue order.
#[derive(Default)]
struct Registry {
    next_ticket: u64,
    entries: BTreeMap<u64, Entry>,
    /// FIFO violations seen: (earlier ticket, later ticket granted first).
    violations: Vec<(u64, u64)>,
    granted: u64,
    /// Earlier waiters found granted by a later one's check (the check is not vacuous).
    found_granted: u64,
}

type Shared = Arc<Mutex<Registry>>;

fn lock(registry: &Shared) -> std::sync::MutexGuard<'_, Registry> {
    registry.lock().unwrap_or_else(|e| e.into_inner())
}

/// Called with `ticket` just granted: every earlier waiter of its class still waiting must
/// be granted already. Polls each with its owner's waker; a grant found is handed over.
fn check_fifo(registry: &mut Registry, ticket: u64, class: Priority) {
    let earlier: Vec<u64> = registry
        .entries
        .range(..ticket)
        .filter(|(_, e)| e.class == class && e.reserve.is_some())
        .map(|(t, _)| *t)
        .collect();
    for t in earlier {
        let entry = registry.entries.get_mut(&t).expect("listed above");
        let waker = entry.waker.clone();
        let mut cx = Context::from_waker(&waker);
        let reserve = entry.reserve.as_mut().expect("still waiting");
        match Pin::new(reserve).poll(&mut cx) {
            Poll::Ready(result) => {
                entry.reserve = None;
                entry.result = Some(result);
                registry.granted += 1;
                registry.found_granted += 1;
                waker.wake();
            }
            Poll::Pending => registry.violations.push((t, ticket)),
        }
    }
}

/// Joins the queue (ticket and first poll under the registry lock) and waits for the
/// grant, checking FIFO whenever this waiter is the one that sees its grant.
struct Wait {
    registry: Shared,
    ticket: Option<u64>,
    pending: Option<(Reserve, Priority)>,
}

impl Future for Wait {
    type Output = Result<Reservation>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let registry = this.registry.clone();
        let mut registry = lock(&registry);
        let ticket = match this.ticket {
            Some(t) => t,
            None => {
                let (reserve, class) = this.pending.take().expect("polled after the end");
                let t = registry.next_ticket;
                registry.next_ticket += 1;
                registry.entries.insert(
                    t,
                    Entry {
                        class,
                        reserve: Some(reserve),
                        waker: cx.waker().clone(),
                        result: None,
                    },
                );
                this.ticket = Some(t);
                t
            }
        };
        let entry = registry.entries.get_mut(&ticket).expect("own entry");
        if let Some(result) = entry.result.take() {
            registry.entries.remove(&ticket);
            return Poll::Ready(result);
        }
        entry.waker = cx.waker().clone();
        let class = entry.class;
        let reserve = entry.reserve.as_mut().expect("waiting");
        match Pin::new(reserve).poll(cx) {
            Poll::Ready(result) => {
                registry.entries.remove(&ticket);
                registry.granted += 1;
                check_fifo(&mut registry, ticket, class);
                Poll::Ready(result)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Wait {
    /// Cancelled: leaves the registry, dropping the `Reserve` (or an unclaimed grant).
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            let entry = lock(&self.registry).entries.remove(&ticket);
            drop(entry);
        }
    }
}

/// What the sends charged, per dimension, in whole tokens (may go above a capacity: debt).
#[derive(Default)]
struct Charged {
    requests: AtomicU64,
    input: AtomicU64,
    output: AtomicU64,
}

impl Charged {
    fn add(&self, cost: Cost) {
        self.requests.fetch_add(cost.requests, Ordering::Relaxed);
        self.input.fetch_add(cost.input_tokens, Ordering::Relaxed);
        self.output.fetch_add(cost.output_tokens, Ordering::Relaxed);
    }

    fn on(&self, d: Dimension) -> u64 {
        Cost {
            requests: self.requests.load(Ordering::Relaxed),
            input_tokens: self.input.load(Ordering::Relaxed),
            output_tokens: self.output.load(Ordering::Relaxed),
        }
        .on(d)
    }
}

const TASKS: u64 = 64;
const ROUNDS: u64 = 40;

/// Per minute: 120,000 requests (2,000 a second: a reservation is one request, so one
/// lost or doubled refund is a whole request, far above the refill uncertainty of the
/// clock readings) and 18,000,000 tokens. The buckets are pre-drained to a small level, so
/// that there is contention and they cannot fill up during the run (a full bucket drops
/// refill, which would hide the sums).
fn limits() -> Limits {
    Limits {
        rpm: 120_000,
        tpm: 18_000_000,
        input_tpm: 12_000_000,
        output_tpm: 6_000_000,
    }
}

#[test]
fn limiter_stress_conserves_capacity_and_keeps_each_class_fifo() {
    let seed = std::env::var("TOLLGATE_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| (u64::from(std::process::id()) * 0x9E37_79B9) | 1);
    println!("stress seed: {seed} (TOLLGATE_STRESS_SEED={seed} repeats it)");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(seed));
}

async fn run(seed: u64) {
    let limits = limits();
    let limiter = TokenBucketRateLimiter::new(
        LimiterConfig::new("stress", limits)
            .with_adaptive(false)
            .with_arrival_allowance(Duration::ZERO)
            // No promotion: the order is exactly class first, FIFO within a class.
            .with_aging(Duration::MAX),
    );
    let charged = Arc::new(Charged::default());
    // Pre-drain to a small level: sent and dropped, so the charge stays.
    let drain = Cost {
        requests: limits.rpm - 400,
        input_tokens: limits.input_tpm - 4_000,
        output_tokens: limits.output_tpm - 2_000,
    };
    // Refill counts from here: until the drain the buckets were full, and a full bucket
    // gains nothing.
    let before_drain = tollgate::clock::now();
    let mut first = limiter.try_reserve(drain).expect("a full bucket");
    let drained = (before_drain, tollgate::clock::now());
    first.mark_sent();
    drop(first);
    charged.add(drain);
    let registry: Shared = Arc::default();
    let mut handles = Vec::new();
    for task in 0..TASKS {
        let limiter = limiter.clone();
        let registry = registry.clone();
        let charged = charged.clone();
        let mut rng = Rng((seed ^ (task + 1).wrapping_mul(0xA076_1D64_78BD_642F)) | 1);
        handles.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let class = Priority::ALL[rng.below(3) as usize];
                let cost = Cost::call(1 + rng.below(300), 1 + rng.below(150));
                let wait = Wait {
                    registry: registry.clone(),
                    ticket: None,
                    pending: Some((limiter.reserve_with(cost, class), class)),
                };
                let fate = rng.below(10);
                let reservation = if fate < 2 {
                    // Dropped before (or racing) the grant.
                    let patience = Duration::from_micros(rng.below(3_000));
                    match tokio::time::timeout(patience, wait).await {
                        Ok(r) => r.expect("granted"),
                        Err(_) => continue,
                    }
                } else {
                    wait.await.expect("granted")
                };
                if rng.below(4) == 0 {
                    tokio::task::yield_now().await;
                }
                match fate {
                    // Granted, never sent: everything back.
                    0..=3 => drop(reservation),
                    // Sent, dropped without settling: the reservation stays charged.
                    4 | 5 => {
                        let mut r = reservation;
                        r.mark_sent();
                        charged.add(r.cost());
                        drop(r);
                    }
                    // Sent and settled at what the provider counted, above or below.
                    _ => {
                        let mut r = reservation;
                        r.mark_sent();
                        let counted = Cost {
                            requests: 1,
                            input_tokens: rng.below(2 * r.cost().input_tokens + 1),
                            output_tokens: rng.below(2 * r.cost().output_tokens + 1),
                        };
                        charged.add(counted);
                        r.settle_counted(counted);
                    }
                }
            }
        }));
    }
    for handle in handles {
        handle.await.expect("a task panicked");
    }

    let registry = lock(&registry);
    assert!(
        registry.violations.is_empty(),
        "FIFO within a class broken (earlier ticket, later one granted first): {:?}",
        registry.violations
    );
    assert!(registry.entries.is_empty(), "waiters left in the registry");
    assert!(
        registry.granted > TASKS * ROUNDS / 2,
        "too few grants: {}",
        registry.granted
    );
    println!(
        "grants seen: {} of {} reserves; {} found granted by a later waiter's FIFO check",
        registry.granted,
        TASKS * ROUNDS,
        registry.found_granted
    );
    drop(registry);

    // Conservation: level = capacity − charged + refill, nothing lost or given twice.
    // The refill is the time since the drain times the rate; the limiter read its clock
    // between the `drained` readings and again between the `snapshot` readings.
    let before_snapshot = tollgate::clock::now();
    let snapshot = limiter.snapshot();
    let after_snapshot = tollgate::clock::now();
    assert_eq!(snapshot.queued, 0, "nobody waits at the end");
    let elapsed_min = before_snapshot - drained.1;
    let elapsed_max = after_snapshot - drained.0;
    println!("run: {elapsed_max:?}");
    for (dimension, level, capacity) in &snapshot.levels {
        let per_second = per_minute(&limits, *dimension) as f64 / 60.0;
        let charged = charged.on(*dimension) as f64;
        let without_refill = *capacity as f64 - charged;
        let (low, high) = (
            without_refill + per_second * elapsed_min.as_secs_f64(),
            without_refill + per_second * elapsed_max.as_secs_f64(),
        );
        assert!(
            high < *capacity as f64,
            "{dimension:?}: the run was too long, the bucket could have filled up"
        );
        println!(
            "{dimension:?}: level {level:.3}, expected {low:.3}..={high:.3} \
             (charged {charged}, capacity {capacity})"
        );
        assert!(
            *level >= low - 1e-6 && *level <= high + 1e-6,
            "{dimension:?}: level {level} is not capacity {capacity} − charged {charged} + \
             refill ({low}..={high}): capacity was lost or given back twice"
        );
    }
}

fn per_minute(limits: &Limits, dimension: Dimension) -> u64 {
    match dimension {
        Dimension::Requests => limits.rpm,
        Dimension::Tokens => limits.tpm,
        Dimension::InputTokens => limits.input_tpm,
        Dimension::OutputTokens => limits.output_tpm,
        other => panic!("a dimension this test does not know: {other:?}"),
    }
}
