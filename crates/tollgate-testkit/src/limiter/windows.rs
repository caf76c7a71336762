//! The acceptance properties of fixed windows (`window = "fixed"`): once a turn of the
//! window is known (a report's reset, a 429's `retry-after`), nothing refills until it,
//! and at it, and at every turn after it, the bucket is full. A reserve-ahead backend
//! books the waiters beyond a window into the next one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::Dimension;
use tollgate::catalog::RateWindow;
use tollgate::limit::{Feedback, Priority};

use super::{Backends, config, drain, one, rpm, waiter};

/// `n` waiters for one request each on `backend`, asked for in order; when each went.
async fn wait_in_line(
    b: &impl Backends,
    backend: &Arc<dyn tollgate::limit::LimiterBackend>,
    n: usize,
) -> Vec<(usize, Duration)> {
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(waiter(backend, start, &log, i));
        b.settled().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    log.lock().unwrap().clone()
}

/// rpm 60 in fixed windows of a minute, drained; the provider says nothing is left until
/// its window turns in 30 s: nothing refills before then (a continuous bucket would let
/// one go every second), 60 go at the turn, and the 61st at the turn after, at 90 s.
pub async fn a_fixed_windows_reported_turn_holds_it_until_then_and_fills_it(b: &impl Backends) {
    let backend = b.build(config(rpm(60)).with_window(RateWindow::Fixed));
    drain(&backend, 60).await;
    backend.feedback(Feedback::Reported {
        dimension: Dimension::Requests,
        limit: None,
        remaining: Some(0),
        reset_in: Some(Duration::from_secs(30)),
        since: None,
    });
    b.settled().await;
    let log = wait_in_line(b, &backend, 61).await;
    let mut expected: Vec<_> = (0..60).map(|i| (i, Duration::from_secs(30))).collect();
    expected.push((60, Duration::from_secs(90)));
    assert_eq!(log, expected);
}

/// rpm 60 in fixed windows of a minute: 20 calls succeed, then a 429 says the window
/// turns in 30 s. The 20 successes since the last 429 are what a window allows: the
/// limit becomes 20 a minute, so 20 go at the turn and the 21st a window later, at 90 s.
pub async fn a_fixed_windows_429_measures_its_allowance_from_the_successes_since_the_last(
    b: &impl Backends,
) {
    let backend = b.build(config(rpm(60)).with_window(RateWindow::Fixed));
    for _ in 0..20 {
        let mut r = backend
            .try_reserve(one(), Priority::default())
            .await
            .unwrap();
        r.mark_sent();
        drop(r);
        backend.feedback(Feedback::Success);
    }
    backend.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
    });
    b.settled().await;
    let log = wait_in_line(b, &backend, 21).await;
    let mut expected: Vec<_> = (0..20).map(|i| (i, Duration::from_secs(30))).collect();
    expected.push((20, Duration::from_secs(90)));
    assert_eq!(log, expected);
}

/// rpm 60 in fixed windows of a minute, drained: three waiters would go at 1, 2 and 3 s
/// (the window's turn is not known yet: it refills continuously). The provider then says
/// nothing is left until its window turns in 30 s: all three go at the turn.
pub async fn a_fixed_windows_turn_learned_after_waiters_asked_holds_them_until_it(
    b: &impl Backends,
) {
    let backend = b.build(config(rpm(60)).with_window(RateWindow::Fixed));
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..3 {
        tasks.push(waiter(&backend, start, &log, i));
        b.settled().await;
    }
    backend.feedback(Feedback::Exhausted {
        dimension: Dimension::Requests,
        reset_in: Duration::from_secs(30),
    });
    b.settled().await;
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let expected: Vec<_> = (0..3).map(|i| (i, Duration::from_secs(30))).collect();
    assert_eq!(log, expected);
}

/// As above, 20 successes and a 429 measure a window of 20; two more calls of that
/// window then succeed and a third is refused too. The window was measured already: its
/// other 429s measure nothing new (the limit stays 20, not 2).
pub async fn a_fixed_windows_other_429s_measure_nothing_new(b: &impl Backends) {
    let backend = b.build(config(rpm(60)).with_window(RateWindow::Fixed));
    for _ in 0..22 {
        let mut r = backend
            .try_reserve(one(), Priority::default())
            .await
            .unwrap();
        r.mark_sent();
    }
    let refused = || Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
    };
    for _ in 0..20 {
        backend.feedback(Feedback::Success);
    }
    backend.feedback(refused());
    backend.feedback(Feedback::Success);
    backend.feedback(Feedback::Success);
    backend.feedback(refused());
    b.settled().await;
    let log = wait_in_line(b, &backend, 21).await;
    let mut expected: Vec<_> = (0..20).map(|i| (i, Duration::from_secs(30))).collect();
    expected.push((20, Duration::from_secs(90)));
    assert_eq!(log, expected);
}
