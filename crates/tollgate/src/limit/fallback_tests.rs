//! The two wait rules of a fallback chain on a paused clock: the same chain, every
//! candidate paused, waits for a different candidate, for a different time, under each.

use std::sync::Arc;
use std::time::Duration;

use super::{FallbackChain, FallbackWait};
use crate::catalog::Limits;
use crate::clock;
use crate::limit::{Cost, LimiterBackend, LimiterConfig, TokenBucketRateLimiter};

/// Three candidates at 600 rpm, paused by 429s for 4 s, 1 s and 9 s.
fn paused_chain() -> FallbackChain {
    let candidates = (0..3)
        .map(|i| {
            let limits = Limits {
                rpm: 600,
                ..Limits::default()
            };
            let limiter = TokenBucketRateLimiter::new(LimiterConfig::new(format!("m{i}"), limits));
            (
                format!("m{i}"),
                Arc::new(limiter) as Arc<dyn LimiterBackend>,
            )
        })
        .collect();
    let chain = FallbackChain::new(candidates);
    for (id, secs) in [("m0", 4), ("m1", 1), ("m2", 9)] {
        chain.rate_limited(id, Some(Duration::from_secs(secs)));
    }
    chain
}

/// Which candidate the chain granted, and after how long.
async fn granted(chain: &FallbackChain) -> (String, Duration) {
    let start = clock::now();
    let grant = chain.reserve(Cost::call(1, 0)).await.unwrap();
    (grant.model_id, start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn fallback_wait_soonest_waits_for_the_candidate_that_could_serve_soonest() {
    let chain = paused_chain();
    assert_eq!(chain.wait(), FallbackWait::Soonest, "the default rule");
    assert_eq!(granted(&chain).await, ("m1".into(), Duration::from_secs(1)));
}

#[tokio::test(start_paused = true)]
async fn fallback_wait_last_waits_only_for_the_last_candidate_though_others_are_sooner() {
    let chain = paused_chain().with_wait(FallbackWait::Last);
    assert_eq!(granted(&chain).await, ("m2".into(), Duration::from_secs(9)));
}

#[tokio::test(start_paused = true)]
async fn fallback_wait_last_still_takes_an_earlier_candidate_that_can_serve_now() {
    let chain = paused_chain().with_wait(FallbackWait::Last);
    tokio::time::sleep(Duration::from_secs(4)).await;
    // m0 and m1 are free again: the preferred one serves at once, nobody waits.
    assert_eq!(granted(&chain).await, ("m0".into(), Duration::ZERO));
}
