//! The limiter acceptance properties, for any [`LimiterBackend`], on tokio's paused
//! clock.
//!
//! A backend crate implements [`Backends`] (how to build a backend for a config, and how
//! to wait until its background work has landed) and runs every property with
//! [`limiter_acceptance_tests!`](crate::limiter_acceptance_tests), which writes one
//! `#[tokio::test(start_paused = true)]` per property, named after it.
//!
//! The properties hold for the in-process limiter (waiters queue, capacity is taken at
//! the grant) and for a reserve-ahead backend such as Redis (capacity is booked at
//! arrival and the waiter sleeps until its slot) alike. Those about what a provider's
//! answers say (rate-limit headers, repeated 429s, 529s) are in `limiter/feedback.rs`,
//! those of fixed windows in `limiter/windows.rs`, and re-exported here.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::catalog::Limits;
use tollgate::limit::{
    AccountingRule, Cost, Feedback, LimiterBackend, LimiterConfig, OutputAccounting, Priority,
    Reservation, TryReserveError,
};
use tollgate::{Dimension, Error, Usage};

mod booked;
mod feedback;
mod windows;

pub use booked::*;
pub use feedback::*;
pub use windows::*;

/// What the suite needs from a backend.
pub trait Backends: Send + Sync {
    /// A fresh backend (its own buckets) for `config`.
    fn build(&self, config: LimiterConfig) -> Arc<dyn LimiterBackend>;

    /// Resolves once every backend built so far has applied what was sent to it (refunds,
    /// settlements, feedback) and every reservation on its way has been booked.
    fn settled(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The in-process limiter, through the trait.
#[derive(Debug, Default)]
pub struct InProcess;

impl Backends for InProcess {
    fn build(&self, config: LimiterConfig) -> Arc<dyn LimiterBackend> {
        Arc::new(tollgate::limit::TokenBucketRateLimiter::new(config))
    }

    fn settled(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {
            for _ in 0..16 {
                tokio::task::yield_now().await;
            }
        })
    }
}

/// Writes one `#[tokio::test(start_paused = true)]` per property of this module, each
/// named after it. `$backends` is an expression of type `Option<impl Backends>`; `None`
/// skips the test (e.g. no server configured).
#[macro_export]
macro_rules! limiter_acceptance_tests {
    ($backends:expr) => {
        $crate::limiter_acceptance_tests!(@each $backends;
            reservation_is_all_or_nothing_across_dimensions,
            oversize_fails_at_once_from_both_forms,
            waiters_are_granted_in_fifo_order,
            no_60s_window_holds_more_than_limit_plus_capacity,
            conservation_refunds_and_settlements_add_up,
            cancelling_a_waiter_gives_its_slot_to_those_behind,
            try_reserve_does_not_jump_the_queue,
            retry_after_pauses_the_model_for_everyone,
            a_429_slows_the_refill_for_every_caller,
            a_grant_out_of_a_full_bucket_holds_the_refill_for_the_arrival_allowance,
            a_report_lowers_the_level_to_remaining_plus_refill_since_send,
            a_report_never_counts_a_grant_made_since_twice,
            a_lower_provider_limit_keeps_what_was_taken,
            a_provider_limit_never_raises_the_catalog_limit,
            a_report_ends_the_arrival_hold,
            an_exhausted_report_waits_one_unit_at_the_providers_rate,
            a_429_leaves_nothing_on_requests_and_leaves_tokens_alone,
            a_repeated_429_pauses_for_its_retry_after_and_is_no_new_signal,
            a_lone_calls_retry_goes_at_each_retry_after_even_throttled,
            a_429_while_others_are_in_flight_empties_the_requests_bucket,
            an_overload_with_retry_after_pauses_the_model,
            a_repeated_429_without_retry_after_is_still_the_last_refusal,
            a_pause_learned_after_waiters_asked_holds_them_all,
            a_lower_limit_learned_after_waiters_asked_spaces_them_at_it,
            a_fixed_windows_reported_turn_holds_it_until_then_and_fills_it,
            a_fixed_windows_429_measures_its_allowance_from_the_successes_since_the_last,
            a_fixed_windows_turn_learned_after_waiters_asked_holds_them_until_it,
            a_fixed_windows_other_429s_measure_nothing_new,
        );
    };
    (@each $backends:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(start_paused = true)]
            async fn $name() {
                if let Some(backends) = $backends {
                    $crate::limiter::$name(&backends).await;
                }
            }
        )+
    };
}

pub(crate) fn config(limits: Limits) -> LimiterConfig {
    LimiterConfig::new("m", limits)
        .with_adaptive(false)
        .with_arrival_allowance(Duration::ZERO)
}

pub(crate) fn rpm(n: u64) -> Limits {
    Limits {
        rpm: n,
        ..Limits::default()
    }
}

pub(crate) fn one() -> Cost {
    Cost::call(0, 0)
}

fn level(levels: &[(Dimension, f64, u64)], d: Dimension) -> f64 {
    levels
        .iter()
        .find(|(x, _, _)| *x == d)
        .map(|(_, l, _)| *l)
        .unwrap_or(f64::NAN)
}

pub(crate) fn assert_level(backend_levels: &[(Dimension, f64, u64)], d: Dimension, want: f64) {
    let got = level(backend_levels, d);
    assert!(
        (got - want).abs() < 1e-6,
        "{d:?}: level {got}, expected {want}"
    );
}

/// Takes `n` reservations of one request now and marks them sent.
pub(crate) async fn drain(backend: &Arc<dyn LimiterBackend>, n: usize) {
    for _ in 0..n {
        let mut r = backend
            .try_reserve(one(), Priority::default())
            .await
            .expect("the bucket holds enough");
        r.mark_sent();
    }
}

/// Spawns a waiter for one request that records when it is granted.
pub(crate) fn waiter(
    backend: &Arc<dyn LimiterBackend>,
    start: Instant,
    log: &Arc<Mutex<Vec<(usize, Duration)>>>,
    i: usize,
) -> tokio::task::JoinHandle<()> {
    let backend = backend.clone();
    let log = log.clone();
    tokio::spawn(async move {
        let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
        r.mark_sent();
        log.lock().unwrap().push((i, start.elapsed()));
    })
}

/// A cost that fits one dimension but not another takes nothing from either.
pub async fn reservation_is_all_or_nothing_across_dimensions(b: &impl Backends) {
    let backend = b.build(config(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    }));
    let mut big = backend
        .try_reserve(Cost::call(900, 0), Priority::default())
        .await
        .unwrap();
    big.mark_sent();
    match backend
        .try_reserve(Cost::call(200, 0), Priority::default())
        .await
    {
        Err(TryReserveError::WouldWait { .. }) => {}
        other => panic!("expected WouldWait, got {other:?}"),
    }
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 9.0);
    assert_level(&snap.levels, Dimension::Tokens, 100.0);
}

/// A cost larger than a bucket fails at once, from `reserve` and `try_reserve`, and
/// takes nothing.
pub async fn oversize_fails_at_once_from_both_forms(b: &impl Backends) {
    let backend = b.build(config(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    }));
    let start = tollgate::clock::now();
    match backend
        .reserve(Cost::call(900, 200), Priority::default())
        .await
    {
        Err(Error::TooLargeForBucket {
            model_id,
            dimension,
            needed,
            capacity,
        }) => assert_eq!(
            (model_id.as_str(), dimension, needed, capacity),
            ("m", Dimension::Tokens, 1100, 1000)
        ),
        other => panic!("expected TooLargeForBucket, got {other:?}"),
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    match backend
        .try_reserve(Cost::call(900, 200), Priority::default())
        .await
    {
        Err(TryReserveError::TooLarge(Error::TooLargeForBucket { needed: 1100, .. })) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 10.0);
    assert_level(&snap.levels, Dimension::Tokens, 1000.0);
}

/// Waiters are granted in arrival order, each the moment its request has refilled.
pub async fn waiters_are_granted_in_fifo_order(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5 {
        tasks.push(waiter(&backend, start, &log, i));
        b.settled().await; // arrived before the next one
    }
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let secs = |s: u64| Duration::from_secs(s);
    assert_eq!(
        log,
        [
            (0, secs(1)),
            (1, secs(2)),
            (2, secs(3)),
            (3, secs(4)),
            (4, secs(5))
        ]
    );
}

/// The first request out of a full bucket may reach the provider later than the ones
/// after it (a fresh connection), and the provider's full bucket starts draining only
/// then: so the refill waits the arrival allowance (default half a second). A refund
/// that fills the bucket again leaves nothing held.
pub async fn a_grant_out_of_a_full_bucket_holds_the_refill_for_the_arrival_allowance(
    b: &impl Backends,
) {
    let config = LimiterConfig::new("m", rpm(60)).with_adaptive(false);
    assert_eq!(
        config.arrival_allowance,
        LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE
    );
    let backend = b.build(config);
    // Granted out of the full bucket and dropped unsent: the bucket is full again.
    drop(backend.reserve(one(), Priority::default()).await.unwrap());
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 60.0);
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..2 {
        tasks.push(waiter(&backend, start, &log, i));
        b.settled().await; // arrived before the next one
    }
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let ms = |ms: u64| Duration::from_millis(ms);
    assert_eq!(log, [(0, ms(1500)), (1, ms(2500))]);
}

/// Greedy callers never get more than limit + capacity into any 60 s window, and get
/// close to the analytic bound overall.
pub async fn no_60s_window_holds_more_than_limit_plus_capacity(b: &impl Backends) {
    let backend = b.build(config(rpm(30)));
    let start = tollgate::clock::now();
    let horizon = Duration::from_secs(150);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let backend = backend.clone();
        let sent = sent.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let mut r: Reservation = backend.reserve(one(), Priority::default()).await.unwrap();
                let at = start.elapsed();
                if at > horizon {
                    return; // dropped unsent: given back
                }
                r.mark_sent();
                sent.lock().unwrap().push(at);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut sent = sent.lock().unwrap().clone();
    sent.sort();
    for (i, t) in sent.iter().enumerate() {
        let in_window = sent[i..]
            .iter()
            .take_while(|u| **u < *t + Duration::from_secs(60))
            .count();
        assert!(in_window <= 60, "{in_window} sent in the 60 s from {t:?}");
    }
    // 30 at once, then 30 a minute: 30 + 75 by 150 s.
    assert!(sent.len() >= 104, "only {} sent", sent.len());
    assert!(sent.len() <= 106, "{} sent", sent.len());
}

/// Reservations dropped unsent are given back in full; a settled one is charged what
/// the provider counts, including debt for under-estimated input.
pub async fn conservation_refunds_and_settlements_add_up(b: &impl Backends) {
    let backend = b.build(config(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    }));
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(
            backend
                .reserve(Cost::call(100, 50), Priority::default())
                .await
                .unwrap(),
        );
    }
    drop(held);
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 10.0);
    assert_level(&snap.levels, Dimension::Tokens, 1000.0);

    let actual = AccountingRule {
        output: OutputAccounting::Actual,
        ..AccountingRule::default()
    };
    let mut r = backend
        .reserve(Cost::call(100, 100), Priority::default())
        .await
        .unwrap();
    r.mark_sent();
    r.settle(
        &Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        },
        actual,
    );
    let mut under = backend
        .reserve(Cost::call(100, 0), Priority::default())
        .await
        .unwrap();
    under.mark_sent();
    under.settle(
        &Usage {
            input_tokens: 400,
            ..Usage::default()
        },
        actual,
    );
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 8.0);
    assert_level(&snap.levels, Dimension::Tokens, 1000.0 - 110.0 - 400.0);
}

/// A waiter cancelled before its grant gives its place back: those behind it (or
/// arriving after) use it, and nothing leaks.
pub async fn cancelling_a_waiter_gives_its_slot_to_those_behind(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let a = waiter(&backend, start, &log, 0);
    b.settled().await;
    let waiter_b = waiter(&backend, start, &log, 1);
    b.settled().await;
    a.abort();
    let _ = a.await;
    b.settled().await;
    let c = waiter(&backend, start, &log, 2);
    b.settled().await;
    waiter_b.await.unwrap();
    c.await.unwrap();
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log.iter().all(|(i, _)| *i != 0));
    assert!(
        log.iter().all(|(_, t)| *t <= Duration::from_secs(2)),
        "{log:?}"
    );
    // Two more took a token each: after a minute the bucket is full again.
    tokio::time::sleep(Duration::from_secs(60)).await;
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 60.0);
}

/// `try_reserve` fails while someone waits and says when it could go after them.
pub async fn try_reserve_does_not_jump_the_queue(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let w = waiter(&backend, start, &log, 0);
    b.settled().await;
    match backend.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::WouldWait { ready_in }) => {
            assert_eq!(ready_in, Duration::from_secs(2))
        }
        other => panic!("expected WouldWait, got {other:?}"),
    }
    w.await.unwrap();
    assert_eq!(*log.lock().unwrap(), [(0, Duration::from_secs(1))]);
    match backend.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::WouldWait { ready_in }) => {
            assert_eq!(ready_in, Duration::from_secs(1))
        }
        other => panic!("expected WouldWait, got {other:?}"),
    }
}

/// A provider's `retry-after` pauses the model for every caller.
pub async fn retry_after_pauses_the_model_for_everyone(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    let start = tollgate::clock::now();
    backend.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(10)),
    });
    b.settled().await;
    match backend.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::WouldWait { .. }) => {}
        other => panic!("expected WouldWait, got {other:?}"),
    }
    let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    assert_eq!(start.elapsed(), Duration::from_secs(10));
}

/// A 429 slows the model's refill (the adaptive throttle) for every caller.
pub async fn a_429_slows_the_refill_for_every_caller(b: &impl Backends) {
    let backend = b.build(LimiterConfig::new("m", rpm(60)).with_arrival_allowance(Duration::ZERO));
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    backend.feedback(Feedback::RateLimited { retry_after: None });
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert!((snap.rate_factor - 0.8).abs() < 1e-9, "{snap:?}");
    let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    assert_eq!(start.elapsed(), Duration::from_millis(1250));
}
