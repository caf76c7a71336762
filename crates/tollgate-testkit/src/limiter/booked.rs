//! The acceptance properties about waiters and what is learned while they wait: a
//! provider's pause, or a lower limit, learned after a waiter asked must hold it back as
//! if it had asked afterwards. In process a waiter holds nothing and is granted by the
//! buckets as they are when it fits; a reserve-ahead backend (Redis) books a slot at
//! arrival, and must move it when the model learns it must slow down.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::Dimension;
use tollgate::limit::Feedback;

use super::{Backends, config, drain, rpm, waiter};

/// `n` waiters behind a drained bucket of rpm 60, asked for (in order) before anything is
/// learned; and the log their grants go to.
async fn waiting(
    b: &impl Backends,
    n: usize,
) -> (
    Arc<dyn tollgate::limit::LimiterBackend>,
    Vec<tokio::task::JoinHandle<()>>,
    Arc<Mutex<Vec<(usize, Duration)>>>,
) {
    let backend = b.build(config(rpm(60)));
    drain(&backend, 60).await;
    let start = tollgate::clock::now();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..n {
        tasks.push(waiter(&backend, start, &log, i));
        b.settled().await;
    }
    (backend, tasks, log)
}

/// Five waiters would go at 1 to 5 s (rpm 60, drained); a 429 saying `retry-after: 10`
/// arrives first: none goes inside the pause, and at its end all five go (the bucket has
/// refilled ten during it), in their order.
pub async fn a_pause_learned_after_waiters_asked_holds_them_all(b: &impl Backends) {
    let (backend, tasks, log) = waiting(b, 5).await;
    backend.feedback(Feedback::RateLimited {
        retry_after: Some(Duration::from_secs(10)),
    });
    b.settled().await;
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let expected: Vec<_> = (0..5).map(|i| (i, Duration::from_secs(10))).collect();
    assert_eq!(log, expected);
}

/// Four waiters would go at 1 to 4 s (rpm 60, drained); the provider then says its limit
/// is 30: they go at its pace, one every 2 s (2, 4, 6, 8 s), not at the catalog's.
pub async fn a_lower_limit_learned_after_waiters_asked_spaces_them_at_it(b: &impl Backends) {
    let (backend, tasks, log) = waiting(b, 4).await;
    backend.feedback(Feedback::Reported {
        dimension: Dimension::Requests,
        limit: Some(30),
        remaining: None,
        reset_in: None,
        since: None,
    });
    b.settled().await;
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap().clone();
    let expected: Vec<_> = (0..4)
        .map(|i| (i, Duration::from_secs(2 * (i as u64 + 1))))
        .collect();
    assert_eq!(log, expected);
}
