//! A loom model check of the in-process limiter (`docs/reliability.md`, "Concurrency"):
//! its one lock and the waker hand-off between threads, in every interleaving loom finds,
//! for grant, cancellation while queued, refund and wake-up across two or three threads.
//!
//! Built only with ``--features loom-model``, which swaps the limiter's `Mutex`
//! for loom's (`src/limit/sync.rs`); `cargo xtask test-all` runs
//! `cargo test -p tollgate --test loom --release` so, in a target directory of its own.
//! In that build the clock stands still (`tollgate::clock`): nothing refills and there is
//! no driver task, so every grant is made by a refund, a cancellation or feedback, under
//! the lock, and woken after it. Each waiter is a loom thread in `loom::future::block_on`,
//! which parks until woken: a lost wake-up is a deadlock, which loom reports.
//!
//! Each model keeps one request of its own reserved (the *ballast*), so that the bucket
//! never fills: a bucket caps what is given back at its capacity, and would hide a refund
//! given twice. So a bucket of 2 with the ballast held is a bucket of one, and the level
//! at the end is exact.
//!
//! Checked in every interleaving: the waiters all finish (no lost wake-up, no waiter left
//! behind); at most one holds the one unit at a time; waiters are granted in arrival
//! order; afterwards the level is exactly what was given back (nothing lost, nothing
//! given twice), nobody is queued, and nothing but the ballast is held.

#![cfg(feature = "loom-model")]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use loom::future::block_on;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::thread;
use tollgate::catalog::Limits;
use tollgate::limit::{
    Cost, Feedback, LimiterConfig, LimiterSnapshot, Reservation, Reserve, TokenBucketRateLimiter,
};

/// One request, no tokens: the only dimension limited is requests.
const ONE: Cost = Cost {
    requests: 1,
    input_tokens: 0,
    output_tokens: 0,
};

/// A limiter of `rpm` requests a minute: a bucket of `rpm`, full, that never refills
/// (the clock stands still).
fn limiter(rpm: u64) -> TokenBucketRateLimiter {
    TokenBucketRateLimiter::new(LimiterConfig::new(
        "loom",
        Limits {
            rpm,
            ..Limits::default()
        },
    ))
}

/// A bucket of 2 and its two requests: the ballast, and the one unit the model hands on
/// (held to begin with).
fn one_unit_held() -> (TokenBucketRateLimiter, Reservation, Reservation) {
    let limiter = limiter(2);
    let (ballast, holder) = (take(&limiter), take(&limiter));
    (limiter, ballast, holder)
}

/// One request taken now, by the fast path.
fn take(limiter: &TokenBucketRateLimiter) -> Reservation {
    limiter.try_reserve(ONE).expect("one request fits")
}

/// Requests left in the bucket.
fn level(snapshot: &LimiterSnapshot) -> f64 {
    snapshot.levels[0].1
}

/// Polls `reserve` once, with a waker that does nothing: it takes the fast path, or
/// joins the queue (and is woken through whatever waker polls it next).
fn poll_once(reserve: &mut Reserve) -> Poll<tollgate::Result<Reservation>> {
    Pin::new(reserve).poll(&mut Context::from_waker(Waker::noop()))
}

/// A thread that reserves one request, waiting in `block_on` if it must, and gives it
/// back unsent (which grants whoever waits next).
fn waiter(limiter: &TokenBucketRateLimiter) -> thread::JoinHandle<()> {
    let limiter = limiter.clone();
    thread::spawn(move || drop(block_on(limiter.reserve(ONE)).expect("granted")))
}

/// Runs `model` in every interleaving loom explores, and returns how many there were.
fn check(model: impl Fn() + Sync + Send + 'static) -> usize {
    let runs = std::sync::Arc::new(StdAtomicUsize::new(0));
    let counted = runs.clone();
    loom::model(move || {
        counted.fetch_add(1, SeqCst);
        model();
    });
    let runs = runs.load(SeqCst);
    eprintln!("{runs} interleavings");
    runs
}

#[test]
fn a_refund_hands_the_unit_to_the_waiter_and_wakes_it() {
    // Two threads reserve one unit of a bucket of one; whoever waits is granted by the
    // other's refund (its reservation dropped unsent) and woken.
    let waited = std::sync::Arc::new(StdAtomicUsize::new(0));
    let seen = waited.clone();
    check(move || {
        let limiter = limiter(2);
        let ballast = take(&limiter);
        let holders = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (limiter, holders) = (limiter.clone(), holders.clone());
                thread::spawn(move || {
                    let reservation = block_on(limiter.reserve(ONE)).expect("granted");
                    assert_eq!(holders.fetch_add(1, SeqCst), 0, "two hold the one unit");
                    holders.fetch_sub(1, SeqCst);
                    drop(reservation); // unsent: given back, and the waiter granted
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("the thread finished");
        }
        let s = limiter.snapshot();
        assert_eq!((level(&s), s.held, s.queued, s.grants), (1.0, 1, 0, 3));
        seen.fetch_add(usize::try_from(s.waited).expect("small"), SeqCst);
        drop(ballast);
        assert_eq!(level(&limiter.snapshot()), 2.0);
    });
    // Not vacuous: in some interleavings one of them did wait for the other's refund.
    assert!(waited.load(SeqCst) > 0);
}

#[test]
fn a_waiter_cancelled_while_a_refund_races_it_neither_loses_nor_duplicates_capacity() {
    // The waiter polls once and is dropped; the refund comes before its poll (it takes the
    // fast path and gives it back), between its poll and its drop (it is granted, never
    // picks the grant up, and gives it back when dropped), or after its drop (it left the
    // queue waiting). Every way, exactly the one unit is back.
    let outcomes = std::sync::Arc::new([(); 3].map(|()| StdAtomicUsize::new(0)));
    let seen = outcomes.clone();
    check(move || {
        let (limiter, ballast, holder) = one_unit_held();
        let waiter = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                let mut reserve = limiter.reserve(ONE);
                match poll_once(&mut reserve) {
                    Poll::Ready(reservation) => drop(reservation.expect("granted")),
                    Poll::Pending => drop(reserve), // cancelled: waiting, or granted
                }
            })
        };
        let refund = thread::spawn(move || drop(holder));
        waiter.join().expect("the waiter finished");
        refund.join().expect("the refund finished");
        let s = limiter.snapshot();
        assert_eq!((level(&s), s.held, s.queued), (1.0, 1, 0));
        // Which way it went: the fast path (granted, never queued), granted in the queue
        // and never picked up, or cancelled waiting (never granted).
        let way = match (s.grants, s.waited) {
            (3, 0) => 0,
            (3, 1) => 1,
            (2, 0) => 2,
            other => panic!("grants and waited {other:?}"),
        };
        seen[way].fetch_add(1, SeqCst);
        drop(ballast);
        assert_eq!(level(&limiter.snapshot()), 2.0);
    });
    assert!(
        outcomes.iter().all(|n| n.load(SeqCst) > 0),
        "every way was seen"
    );
}

#[test]
fn waiters_are_granted_in_arrival_order_each_woken_by_the_refund_before_it() {
    // Three threads: two queued waiters, each in its own `block_on`, and the main thread
    // whose refund starts the hand-off; each waiter, once granted, gives its unit back
    // unsent, which grants the next.
    check(|| {
        let (limiter, ballast, holder) = one_unit_held();
        // Both join the queue here, in this order, with a waker that does nothing: each
        // `block_on` below must hand its own waker over, or it is never woken.
        let mut first = limiter.reserve(ONE);
        let mut second = limiter.reserve(ONE);
        assert!(poll_once(&mut first).is_pending() && poll_once(&mut second).is_pending());
        let turns = Arc::new(AtomicUsize::new(0));
        let spawn = |reserve: Reserve| {
            let turns = turns.clone();
            thread::spawn(move || {
                let reservation = block_on(reserve).expect("granted");
                let turn = turns.fetch_add(1, SeqCst);
                drop(reservation); // unsent: given back, which grants the next
                turn
            })
        };
        let (first, second) = (spawn(first), spawn(second));
        drop(holder);
        assert_eq!(first.join().expect("the first finished"), 0, "FIFO");
        assert_eq!(second.join().expect("the second finished"), 1, "FIFO");
        let s = limiter.snapshot();
        assert_eq!(
            (level(&s), s.held, s.queued, s.grants, s.waited),
            (1.0, 1, 0, 4, 2)
        );
        drop(ballast);
    });
}

#[test]
fn a_grant_never_picked_up_returns_to_the_next_waiter_when_dropped() {
    // The first waiter is granted by the refund but dropped before it polls again: its
    // unit goes back and on to the waiter behind it, who is woken.
    check(|| {
        let (limiter, ballast, holder) = one_unit_held();
        let mut abandoned = limiter.reserve(ONE);
        assert!(poll_once(&mut abandoned).is_pending());
        let next = waiter(&limiter);
        let refund = thread::spawn(move || drop(holder));
        refund.join().expect("the refund finished");
        // The refund granted `abandoned`, the head; it is dropped without picking it up.
        drop(abandoned);
        next.join().expect("the next waiter finished");
        let s = limiter.snapshot();
        assert_eq!((level(&s), s.held, s.queued, s.grants), (1.0, 1, 0, 4));
        drop(ballast);
    });
}

#[test]
fn a_head_waiter_cancelled_lets_the_smaller_waiter_behind_it_go_and_wakes_it() {
    // The head asks for two units where one is left; a one-unit waiter arrives while the
    // head is dropped (cancelled). Arrived before, it queues behind the head (it may not
    // jump it), and the head's leaving alone must grant it and wake it: nothing else
    // gives capacity back. Arrived after, it takes the fast path.
    let arrivals = std::sync::Arc::new([StdAtomicUsize::new(0), StdAtomicUsize::new(0)]);
    let seen = arrivals.clone();
    check(move || {
        let limiter = limiter(2);
        let ballast = take(&limiter);
        let mut head = limiter.reserve(Cost { requests: 2, ..ONE });
        assert!(poll_once(&mut head).is_pending());
        let behind = waiter(&limiter);
        drop(head);
        behind.join().expect("the waiter behind finished");
        let s = limiter.snapshot();
        assert_eq!((level(&s), s.held, s.queued, s.grants), (1.0, 1, 0, 2));
        seen[usize::try_from(s.waited).expect("0 or 1")].fetch_add(1, SeqCst);
        drop(ballast);
    });
    assert!(
        arrivals.iter().all(|n| n.load(SeqCst) > 0),
        "both arrivals were seen"
    );
}

#[test]
fn a_retry_after_of_zero_grants_a_queued_waiter_and_wakes_it_while_a_refund_races() {
    // Feedback grants too: after a 429, a provider's `retry-after: 0` sets the requests
    // bucket to exactly one request (`State::next_request_in`), and a queued waiter is
    // granted under the lock and woken by `feedback`. A refund races it.
    let ends = std::sync::Arc::new([StdAtomicUsize::new(0), StdAtomicUsize::new(0)]);
    let seen = ends.clone();
    check(move || {
        let limiter = limiter(3);
        let [refunded, _kept, _also_kept] = [take(&limiter), take(&limiter), take(&limiter)];
        // The first 429: the bucket is empty already; grants are counted from here.
        limiter.feedback(Feedback::RateLimited { retry_after: None });
        let waiter = waiter(&limiter);
        let retry = {
            let limiter = limiter.clone();
            thread::spawn(move || {
                limiter.feedback(Feedback::RateLimited {
                    retry_after: Some(Duration::ZERO),
                });
            })
        };
        let refund = thread::spawn(move || drop(refunded));
        for thread in [waiter, retry, refund] {
            thread.join().expect("the thread finished");
        }
        let s = limiter.snapshot();
        assert_eq!((s.held, s.queued), (2, 0));
        // The `retry-after` sets the level outright: a refund (and the waiter's own) made
        // before it is absorbed, one made after it is added.
        let end = level(&s);
        assert!(end == 1.0 || end == 2.0, "level {end}");
        seen[usize::from(end == 2.0)].fetch_add(1, SeqCst);
    });
    assert!(
        ends.iter().all(|n| n.load(SeqCst) > 0),
        "both ends were seen"
    );
}
