//! The acceptance properties about what a provider's answers tell a limiter: rate-limit
//! headers ([`Feedback::Reported`] and its shorthands [`Feedback::Remaining`] and
//! [`Feedback::Exhausted`]), 429s, repeated 429s and 529s.
//!
//! A report is read as the provider means it: `remaining` was left when the provider
//! admitted the answer's request, so the level is lowered to it plus what has refilled
//! since the request was sent, and never by a grant made since a second time (answers
//! come back in any order; the level already holds each grant once). A provider's limit
//! below the catalog's shrinks the bucket, keeping what was taken out of it.

use std::sync::Arc;
use std::time::Duration;

use tollgate::Dimension;
use tollgate::catalog::Limits;
use tollgate::limit::{
    Feedback, LimiterBackend, LimiterConfig, Priority, SendMark, TryReserveError,
};

use super::{Backends, assert_level, config, drain, one, rpm};

/// How long `try_reserve` says one request would wait (it must not fit now).
async fn ready_in(backend: &Arc<dyn LimiterBackend>) -> Duration {
    match backend.try_reserve(one(), Priority::default()).await {
        Err(TryReserveError::WouldWait { ready_in }) => ready_in,
        other => panic!("expected WouldWait, got {other:?}"),
    }
}

/// Takes one request now, marks it sent and returns when it was sent.
async fn send_one(backend: &Arc<dyn LimiterBackend>) -> SendMark {
    let mut r = backend
        .try_reserve(one(), Priority::default())
        .await
        .expect("the bucket holds enough");
    r.mark_sent();
    SendMark::now()
}

/// A report on requests.
fn report(limit: Option<u64>, remaining: Option<u64>, since: Option<SendMark>) -> Feedback {
    Feedback::Reported {
        dimension: Dimension::Requests,
        limit,
        remaining,
        reset_in: Some(Duration::from_secs(60)),
        since,
    }
}

/// The requests level and capacity in a snapshot.
async fn requests(backend: &Arc<dyn LimiterBackend>) -> (f64, u64) {
    let snap = backend.snapshot().await.unwrap();
    snap.levels
        .iter()
        .find(|(d, _, _)| *d == Dimension::Requests)
        .map(|(_, level, capacity)| (*level, *capacity))
        .expect("requests are limited")
}

/// What the provider had left when it admitted a request is what the bucket may hold
/// plus what has refilled since the request was sent; a report without a send mark is as
/// of now; a report above the level changes nothing.
pub async fn a_report_lowers_the_level_to_remaining_plus_refill_since_send(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    let sent = send_one(&backend).await;
    tokio::time::sleep(Duration::from_secs(10)).await; // full again
    backend.feedback(report(None, Some(5), Some(sent)));
    b.settled().await;
    assert_eq!(requests(&backend).await, (15.0, 60));
    backend.feedback(Feedback::Remaining {
        dimension: Dimension::Requests,
        remaining: 3,
    });
    b.settled().await;
    assert_eq!(requests(&backend).await, (3.0, 60));
    backend.feedback(report(None, Some(50), None));
    b.settled().await;
    assert_eq!(requests(&backend).await, (3.0, 60));
}

/// 20 requests sent at once from a bucket of 30 (10 left); the provider admitted them in
/// another order than they were granted, and another client of the same key took 2: the
/// answers, in the order they come back, say 27 down to 8 were left. The level already
/// holds every grant once and is lowered only to the lowest report: exactly 8 more go
/// now, and the next one waits for one request's refill. (Taking from each report the
/// grants made after its request, or counting its own request again, leaves fewer.)
pub async fn a_report_never_counts_a_grant_made_since_twice(b: &impl Backends) {
    let backend = b.build(config(rpm(30)));
    let mut sent = Vec::new();
    for _ in 0..20 {
        sent.push(send_one(&backend).await);
    }
    // The i-th answer is request (7i + 3) mod 20's (7 is prime to 20: each once).
    for i in 0..20u64 {
        let k = usize::try_from((i * 7 + 3) % 20).unwrap();
        backend.feedback(report(None, Some(27 - i), Some(sent[k])));
    }
    b.settled().await;
    assert_eq!(requests(&backend).await, (8.0, 30));
    drain(&backend, 8).await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(2));
}

/// A provider's limit below the catalog's shrinks the bucket and keeps what was taken
/// out of it: a bucket of 60 with 20 taken, told the limit is 30, has 10 left (not 30),
/// and refills at 30 a minute. The level drops by the capacity lost, but never below zero
/// for it: with 50 taken, nothing is left, not a debt of 20.
pub async fn a_lower_provider_limit_keeps_what_was_taken(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    drain(&backend, 20).await;
    backend.feedback(report(Some(30), None, None));
    b.settled().await;
    assert_eq!(requests(&backend).await, (10.0, 30));
    drain(&backend, 10).await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(2));

    let deep = b.build(
        LimiterConfig::new("deep", rpm(60))
            .with_adaptive(false)
            .with_arrival_allowance(Duration::ZERO),
    );
    drain(&deep, 50).await;
    deep.feedback(report(Some(30), None, None));
    b.settled().await;
    assert_eq!(requests(&deep).await, (0.0, 30));
    assert_eq!(ready_in(&deep).await, Duration::from_secs(2));
}

/// A provider's limit above the catalog's changes nothing, and a limit lowered by one
/// report comes back up to the catalog's (never above), keeping the level, when the
/// provider says it is higher again.
pub async fn a_provider_limit_never_raises_the_catalog_limit(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    backend.feedback(report(Some(120), None, None));
    b.settled().await;
    assert_eq!(requests(&backend).await, (60.0, 60));
    drain(&backend, 60).await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(1));
    backend.feedback(report(Some(30), None, None));
    b.settled().await;
    assert_eq!(requests(&backend).await, (0.0, 30));
    assert_eq!(ready_in(&backend).await, Duration::from_secs(2));
    backend.feedback(report(Some(120), None, None));
    b.settled().await;
    assert_eq!(requests(&backend).await, (0.0, 60));
    assert_eq!(ready_in(&backend).await, Duration::from_secs(1));
}

/// The first request out of a full bucket holds the refill for the arrival allowance;
/// the provider's answer to it, whatever it says is left, shows that the provider has
/// seen a request (its bucket drains and refills from then on): the hold ends.
pub async fn a_report_ends_the_arrival_hold(b: &impl Backends) {
    let backend = b.build(LimiterConfig::new("m", rpm(60)).with_adaptive(false));
    let first = send_one(&backend).await;
    drain(&backend, 59).await;
    assert_eq!(ready_in(&backend).await, Duration::from_millis(1500));
    // Admitted first, it left 59: nothing to lower, but the hold ends.
    backend.feedback(report(Some(60), Some(59), Some(first)));
    b.settled().await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(1));
}

/// Nothing left, full again at the reset: the reset is when the provider's bucket is
/// *full*, so the next request waits for one request's refill at the provider's rate (the
/// catalog's, or the provider's lower limit), not for the reset.
pub async fn an_exhausted_report_waits_one_unit_at_the_providers_rate(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    backend.feedback(Feedback::Exhausted {
        dimension: Dimension::Requests,
        reset_in: Duration::from_secs(60),
    });
    b.settled().await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(1));

    let slower = b.build(
        LimiterConfig::new("slower", rpm(60))
            .with_adaptive(false)
            .with_arrival_allowance(Duration::ZERO),
    );
    slower.feedback(report(Some(30), Some(0), None));
    b.settled().await;
    assert_eq!(ready_in(&slower).await, Duration::from_secs(2));
}

/// A 429 (with the throttle off, so that only this is seen) leaves nothing on requests,
/// the dimension every call spends; tokens, which a large call would then wait long for
/// on a 429 that may be about requests, are left alone.
pub async fn a_429_leaves_nothing_on_requests_and_leaves_tokens_alone(b: &impl Backends) {
    let backend = b.build(config(Limits {
        rpm: 10,
        tpm: 1000,
        ..Limits::default()
    }));
    backend.feedback(Feedback::RateLimited { retry_after: None });
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 0.0);
    assert_level(&snap.levels, Dimension::Tokens, 1000.0);
    assert_eq!(ready_in(&backend).await, Duration::from_secs(6));
}

/// A call refused again after its first 429 pauses the model for its `retry-after` and is
/// no new signal for the throttle; without a `retry-after` it changes nothing at all.
/// With nothing of ours in flight, its retry goes exactly at the end of the pause.
pub async fn a_repeated_429_pauses_for_its_retry_after_and_is_no_new_signal(b: &impl Backends) {
    let backend = b.build(LimiterConfig::new("m", rpm(60)).with_arrival_allowance(Duration::ZERO));
    backend.feedback(Feedback::RateLimitedAgain { retry_after: None });
    b.settled().await;
    assert_eq!(requests(&backend).await.0, 60.0);
    let start = tollgate::clock::now();
    backend.feedback(Feedback::RateLimitedAgain {
        retry_after: Some(Duration::from_secs(10)),
    });
    b.settled().await;
    let snap = backend.snapshot().await.unwrap();
    assert_eq!(snap.rate_factor, 1.0, "{snap:?}");
    assert_eq!(ready_in(&backend).await, Duration::from_secs(10));
    let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    assert_eq!(start.elapsed(), Duration::from_secs(10));
}

/// A lone call's 429 `retry-after` is when its retry goes, each time, even as the
/// throttle slows the refill: at rpm 30 (a unit every 2 s, 2.5 s once throttled to 0.8)
/// a first 429 and three repeated ones, each saying 2 s, put the retries at 2, 4, 6 and
/// 8 s.
pub async fn a_lone_calls_retry_goes_at_each_retry_after_even_throttled(b: &impl Backends) {
    let backend = b.build(LimiterConfig::new("m", rpm(30)).with_arrival_allowance(Duration::ZERO));
    let wait = Some(Duration::from_secs(2));
    let start = tollgate::clock::now();
    send_one(&backend).await;
    backend.feedback(Feedback::RateLimited { retry_after: wait });
    b.settled().await;
    for again in 1..=4u64 {
        let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
        r.mark_sent();
        assert_eq!(start.elapsed(), Duration::from_secs(2 * again));
        backend.feedback(Feedback::RateLimitedAgain { retry_after: wait });
        b.settled().await;
    }
    let snap = backend.snapshot().await.unwrap();
    assert!(snap.rate_factor < 1.0, "{snap:?}");
}

/// A 429 while other requests of ours are on their way empties the requests bucket and
/// pauses: those requests may take what the provider will have at the end of the pause,
/// so the next waits for a whole unit (at rpm 30, 2 s), not only for the pause (1 s).
pub async fn a_429_while_others_are_in_flight_empties_the_requests_bucket(b: &impl Backends) {
    let backend = b.build(config(rpm(30)));
    let start = tollgate::clock::now();
    for _ in 0..5 {
        send_one(&backend).await;
    }
    backend.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(1)),
    });
    b.settled().await;
    let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

/// A 529 with a `retry-after` pauses the model for it (the throttle off: nothing else).
pub async fn an_overload_with_retry_after_pauses_the_model(b: &impl Backends) {
    let backend = b.build(config(rpm(60)));
    backend.feedback(Feedback::Overloaded {
        retry_after: Some(Duration::from_secs(5)),
    });
    b.settled().await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(5));
    let snap = backend.snapshot().await.unwrap();
    assert_level(&snap.levels, Dimension::Requests, 60.0);
}

/// A repeated 429 without a `retry-after` changes no bucket, yet it is the model's last
/// refusal: the next 429 asks whether anything but its own call was granted since *it*.
/// At rpm 30 (a unit every 2 s): a call's 429 empties requests; its retry and another
/// call go at 2 s and 4 s; the retry is refused again (no `retry-after`) and retried at
/// 6 s, alone since that refusal; refused once more with `retry-after: 1`, its next retry
/// goes in exactly 1 s (not after a whole unit's refill, 2 s).
pub async fn a_repeated_429_without_retry_after_is_still_the_last_refusal(b: &impl Backends) {
    let backend = b.build(config(rpm(30)));
    send_one(&backend).await;
    backend.feedback(Feedback::RateLimited { retry_after: None });
    b.settled().await;
    for _ in 0..2 {
        let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
        r.mark_sent();
    }
    backend.feedback(Feedback::RateLimitedAgain { retry_after: None });
    b.settled().await;
    let mut r = backend.reserve(one(), Priority::default()).await.unwrap();
    r.mark_sent();
    backend.feedback(Feedback::RateLimitedAgain {
        retry_after: Some(Duration::from_secs(1)),
    });
    b.settled().await;
    assert_eq!(ready_in(&backend).await, Duration::from_secs(1));
}
