//! A model check of the in-process limiter (`docs/reliability.md`): every interleaving,
//! up to a bound, of three waiters' lives (arrive, be cancelled before the grant, be
//! polled when woken, release unsent, send and settle, send and drop), the driver's
//! steps, the clock moving, and a throttle change (a 429 with `retry-after`), run against
//! the real `TokenBucketRateLimiter` through its public API.
//!
//! Why not (only) loom: loom replaces the lock, `Notify`, timers and `spawn` with its
//! own, and its model of the limiter (`crates/tollgate/tests/loom.rs`) swaps only the
//! lock: no driver, no clock. This test keeps them all and makes the interleavings
//! explicit instead, at the grain of API calls. The limiter's methods are atomic (one
//! mutex), so the points where two activities can interleave are exactly the boundaries
//! between API calls and the driver's turns; on a current-thread runtime with a paused
//! clock those are all under the test's control, each run is deterministic, and a
//! depth-first search over the choices visits every schedule (the same stateless search
//! loom does, at that grain).
//!
//! Checked in every schedule:
//! - **no lost wake-up**: a waiter found granted was woken since its last pending poll;
//! - **FIFO within a class**: when a waiter is seen granted, every earlier waiter of its
//!   class still waiting is found granted too;
//! - **liveness**: with the clock run on, every waiter still waiting is granted, and the
//!   driver task then exits (no task left on the runtime);
//! - **conservation**: once everything is released, sent or cancelled, the bucket equals
//!   a twin limiter's that saw the same clock, the same pre-drain and the same feedback,
//!   minus exactly what the sends charged (refill and throttle included, exact to the
//!   unit).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;
use tollgate::catalog::Limits;
use tollgate::limit::{
    Cost, Feedback, LimiterConfig, Priority, Reservation, Reserve, TokenBucketRateLimiter,
};

/// A waker that records that it was woken.
#[derive(Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Where one waiter is in its life.
enum Life {
    NotArrived,
    Waiting(Reserve),
    Holding(Reservation),
    Done,
}

struct Actor {
    class: Priority,
    cost: Cost,
    life: Life,
    flag: Arc<Flag>,
    waker: Waker,
    /// Arrival order among the actors that queued (or were granted at once).
    arrival: Option<usize>,
}

/// One step a schedule can take.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Arrive(usize),
    /// Poll a waiting actor (only when its waker was woken, as an executor would).
    Poll(usize),
    /// Drop a waiting actor's `Reserve` (granted or not).
    Cancel(usize),
    /// Drop a reservation unsent.
    Release(usize),
    /// `mark_sent`, then settle at less than reserved (a partial refund).
    SendSettle(usize),
    /// `mark_sent`, then drop: the charge stays.
    SendDrop(usize),
    /// Let the driver run (yield to the runtime).
    Yield,
    /// Move the clock 400 ms, then yield.
    Advance,
    /// A 429 with `retry-after: 300ms`: slows the refill and pauses grants.
    Throttle,
}

const LIMITS: Limits = Limits {
    rpm: 60,
    tpm: 600,
    input_tpm: 0,
    output_tpm: 0,
};
/// Pre-drain: leaves 5 requests and 40 tokens, so that waiters queue and the buckets never
/// fill up (a full bucket drops refill, which would make the twin comparison inexact).
const DRAIN: Cost = Cost {
    requests: 55,
    input_tokens: 560,
    output_tokens: 0,
};
/// The bounds of the search: clock steps, throttle changes and driver turns per
/// schedule. `TOLLGATE_MODEL_BOUNDS=clock,throttles,yields` widens them (the default
/// explores all ~335,000 schedules within them in ~25 s in a debug build).
fn bounds() -> (usize, usize, usize) {
    std::env::var("TOLLGATE_MODEL_BOUNDS")
        .ok()
        .and_then(|s| {
            let v: Vec<usize> = s.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            (v.len() == 3).then(|| (v[0], v[1], v[2]))
        })
        .unwrap_or((1, 1, 1))
}

fn actors() -> Vec<Actor> {
    // Two of one class (FIFO between them), one above it; together more than is left.
    [
        (Priority::Default, Cost::call(30, 0)),
        (Priority::Default, Cost::call(20, 0)),
        (Priority::Interactive, Cost::call(25, 0)),
    ]
    .into_iter()
    .map(|(class, cost)| {
        let flag = Arc::new(Flag::default());
        Actor {
            class,
            cost,
            life: Life::NotArrived,
            waker: Waker::from(flag.clone()),
            flag,
            arrival: None,
        }
    })
    .collect()
}

fn new_limiter() -> TokenBucketRateLimiter {
    TokenBucketRateLimiter::new(
        LimiterConfig::new("model", LIMITS).with_aging(LimiterConfig::DEFAULT_AGING),
    )
}

/// The state of one run.
struct World {
    limiter: TokenBucketRateLimiter,
    twin: TokenBucketRateLimiter,
    actors: Vec<Actor>,
    arrivals: usize,
    charged: Cost,
    clock_steps: usize,
    throttles: usize,
    yields: usize,
    bounds: (usize, usize, usize),
}

impl World {
    fn enabled(&self) -> Vec<Op> {
        let mut ops = Vec::new();
        for (i, a) in self.actors.iter().enumerate() {
            match a.life {
                Life::NotArrived => ops.push(Op::Arrive(i)),
                Life::Waiting(_) => {
                    if a.flag.0.load(Ordering::SeqCst) {
                        ops.push(Op::Poll(i));
                    }
                    ops.push(Op::Cancel(i));
                }
                // Two fates each, three between them: actor 1 sends and drops, the
                // others send and settle.
                Life::Holding(_) => ops.extend([
                    Op::Release(i),
                    if i == 1 {
                        Op::SendDrop(i)
                    } else {
                        Op::SendSettle(i)
                    },
                ]),
                Life::Done => {}
            }
        }
        let busy = !ops.is_empty();
        let (max_clock, max_throttles, max_yields) = self.bounds;
        if busy && self.yields < max_yields {
            ops.push(Op::Yield);
        }
        if busy && self.clock_steps < max_clock {
            ops.push(Op::Advance);
        }
        if busy && self.throttles < max_throttles {
            ops.push(Op::Throttle);
        }
        ops
    }

    /// Polls actor `i`'s `Reserve`; on a grant, checks the wake-up and FIFO.
    fn poll(&mut self, i: usize) -> Result<(), String> {
        let actor = &mut self.actors[i];
        let Life::Waiting(reserve) = &mut actor.life else {
            return Ok(());
        };
        let was_woken = actor.flag.0.swap(false, Ordering::SeqCst);
        let first = actor.arrival.is_none();
        let mut cx = Context::from_waker(&actor.waker);
        let poll = Pin::new(reserve).poll(&mut cx);
        if first {
            actor.arrival = Some(self.arrivals);
            self.arrivals += 1;
        }
        match poll {
            Poll::Pending => Ok(()),
            Poll::Ready(Err(e)) => Err(format!("actor {i}: reserve failed: {e}")),
            Poll::Ready(Ok(reservation)) => {
                if !first && !was_woken {
                    return Err(format!("actor {i}: granted but never woken (lost wake-up)"));
                }
                actor.life = Life::Holding(reservation);
                self.check_fifo(i)
            }
        }
    }

    /// Actor `i` was just seen granted: every earlier waiter of its class must be too.
    fn check_fifo(&mut self, i: usize) -> Result<(), String> {
        let (class, arrival) = (self.actors[i].class, self.actors[i].arrival);
        for j in 0..self.actors.len() {
            let earlier = self.actors[j].class == class && self.actors[j].arrival < arrival;
            if j == i || !earlier || !matches!(self.actors[j].life, Life::Waiting(_)) {
                continue;
            }
            let actor = &mut self.actors[j];
            let Life::Waiting(reserve) = &mut actor.life else {
                unreachable!()
            };
            let was_woken = actor.flag.0.swap(false, Ordering::SeqCst);
            let mut cx = Context::from_waker(&actor.waker);
            match Pin::new(reserve).poll(&mut cx) {
                Poll::Ready(Ok(reservation)) => {
                    if !was_woken {
                        return Err(format!("actor {j}: granted but never woken"));
                    }
                    actor.life = Life::Holding(reservation);
                }
                Poll::Ready(Err(e)) => return Err(format!("actor {j}: {e}")),
                Poll::Pending => {
                    return Err(format!(
                        "actor {i} granted before actor {j}, an earlier waiter of its class"
                    ));
                }
            }
        }
        Ok(())
    }

    async fn step(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Arrive(i) => {
                let a = &mut self.actors[i];
                a.life = Life::Waiting(self.limiter.reserve_with(a.cost, a.class));
                self.poll(i)?;
            }
            Op::Poll(i) => self.poll(i)?,
            Op::Cancel(i) => self.actors[i].life = Life::Done,
            Op::Release(i) => self.actors[i].life = Life::Done,
            Op::SendSettle(i) | Op::SendDrop(i) => {
                let Life::Holding(mut r) = std::mem::replace(&mut self.actors[i].life, Life::Done)
                else {
                    unreachable!()
                };
                r.mark_sent();
                let counted = if let Op::SendSettle(_) = op {
                    let counted = Cost::call(r.cost().input_tokens / 2, 0);
                    r.settle_counted(counted);
                    counted
                } else {
                    let counted = r.cost();
                    drop(r);
                    counted
                };
                self.charged.requests += counted.requests;
                self.charged.input_tokens += counted.input_tokens;
            }
            Op::Yield => {
                self.yields += 1;
                settle_runtime().await;
            }
            Op::Advance => {
                self.clock_steps += 1;
                tokio::time::advance(Duration::from_millis(400)).await;
                settle_runtime().await;
            }
            Op::Throttle => {
                self.throttles += 1;
                // A 529: it slows the refill and pauses the model like a 429, but does not
                // empty the request bucket. A 429 does (the provider has nothing left), and
                // emptying is not linear: a reservation held unsent across it and then
                // refunded gives back a unit the twin never had (one request's worth of
                // optimism, documented in docs/rate-limiting.md), so the twin comparison
                // would not be exact.
                let feedback = Feedback::Overloaded {
                    retry_after: Some(Duration::from_millis(300)),
                };
                self.limiter.feedback(feedback);
                self.twin.feedback(feedback);
            }
        }
        Ok(())
    }

    /// Runs the clock on until every waiter is granted, then checks the driver exited and
    /// the buckets against the twin.
    async fn finish(&mut self) -> Result<(), String> {
        for _ in 0..20 {
            if !self
                .actors
                .iter()
                .any(|a| matches!(a.life, Life::Waiting(_)))
            {
                break;
            }
            tokio::time::advance(Duration::from_secs(1)).await;
            settle_runtime().await;
            for i in 0..self.actors.len() {
                if self.actors[i].flag.0.load(Ordering::SeqCst) {
                    self.poll(i)?;
                }
            }
        }
        if let Some(i) = self
            .actors
            .iter()
            .position(|a| matches!(a.life, Life::Waiting(_)))
        {
            return Err(format!(
                "actor {i} never granted (stuck queue or lost wake-up)"
            ));
        }
        for actor in &mut self.actors {
            actor.life = Life::Done; // releases what is held, unsent
        }
        let (main, twin) = (self.limiter.snapshot(), self.twin.snapshot());
        if main.queued != 0 {
            return Err(format!("{} left queued", main.queued));
        }
        for ((d, level, _), (_, twin_level, _)) in main.levels.iter().zip(&twin.levels) {
            let charged = self.charged.on(*d) as f64;
            if (level - (twin_level - charged)).abs() > 1e-9 {
                return Err(format!(
                    "{d:?}: level {level}, the twin's {twin_level} minus the sends' {charged}"
                ));
            }
        }
        // A driver whose queue emptied by cancellation is not told (nobody needs a new
        // deadline): it exits when its sleep ends, at most the old head's wait later.
        tokio::time::advance(Duration::from_secs(600)).await;
        settle_runtime().await;
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        if alive != 0 {
            return Err(format!("{alive} task(s) left: the driver did not exit"));
        }
        Ok(())
    }
}

/// Lets every ready task (the driver) run until none is left ready.
async fn settle_runtime() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

/// Runs one schedule: `prefix` chooses among the enabled operations at each step (0 past
/// its end). Returns the choices made, as (index, number enabled), and the verdict.
fn run(prefix: &[usize]) -> (Vec<(usize, usize)>, Result<(), String>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let limiter = new_limiter();
        let twin = new_limiter();
        for l in [&limiter, &twin] {
            let mut drain = l.try_reserve(DRAIN).expect("full buckets");
            drain.mark_sent();
        }
        let mut world = World {
            limiter,
            twin,
            actors: actors(),
            arrivals: 0,
            charged: Cost::default(),
            clock_steps: 0,
            throttles: 0,
            yields: 0,
            bounds: bounds(),
        };
        let mut trace = Vec::new();
        let mut done = Vec::new();
        loop {
            let ops = world.enabled();
            if ops.is_empty() {
                break;
            }
            let choice = prefix.get(trace.len()).copied().unwrap_or(0);
            trace.push((choice, ops.len()));
            done.push(ops[choice]);
            if let Err(e) = world.step(ops[choice]).await {
                return (trace, Err(format!("{e}; operations: {done:?}")));
            }
        }
        let verdict = world.finish().await;
        (
            trace,
            verdict.map_err(|e| format!("{e}; operations: {done:?}")),
        )
    })
}

#[test]
fn limiter_model_check_every_schedule_of_three_waiters() {
    let mut prefix: Vec<usize> = Vec::new();
    let mut schedules = 0u64;
    loop {
        let (mut trace, verdict) = run(&prefix);
        schedules += 1;
        if schedules.is_multiple_of(100_000) {
            println!("{schedules} schedules so far");
        }
        if let Err(e) = verdict {
            panic!(
                "schedule {:?}: {e}",
                trace.iter().map(|c| c.0).collect::<Vec<_>>()
            );
        }
        // Next schedule: the deepest choice that has an untried sibling.
        while let Some((choice, n)) = trace.pop() {
            if choice + 1 < n {
                trace.push((choice + 1, n));
                break;
            }
        }
        if trace.is_empty() {
            break;
        }
        prefix = trace.iter().map(|c| c.0).collect();
    }
    println!("{schedules} schedules explored, every check held in each");
    assert!(
        schedules > 10_000,
        "the search space collapsed: {schedules}"
    );
}
