//! The limiter's fast path allocates nothing: counted by a counting global allocator (this
//! binary holds this one test, so nothing else allocates meanwhile).

use std::alloc::System;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tollgate::catalog::Limits;
use tollgate::limit::{Cost, LimiterConfig, TokenBucketRateLimiter};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn try_reserve_reserve_and_refund_allocate_nothing() {
    let limiter = TokenBucketRateLimiter::new(LimiterConfig::new(
        "m",
        Limits {
            rpm: 1_000_000_000,
            tpm: 1_000_000_000_000,
            input_tpm: 1_000_000_000_000,
            output_tpm: 1_000_000_000_000,
        },
    ));
    let cost = Cost::call(1_000, 200);
    // Warm up once: lazily initialized statics are not the fast path.
    limiter.try_reserve(cost).unwrap().mark_sent();
    let region = Region::new(GLOBAL);
    for _ in 0..1_000 {
        limiter.try_reserve(cost).unwrap().mark_sent();
        drop(limiter.try_reserve(cost).unwrap());
        let mut reserve = pin!(limiter.reserve(cost));
        match reserve
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(r) => r.unwrap().mark_sent(),
            Poll::Pending => panic!("the fast path waited"),
        }
    }
    assert_eq!(region.change().allocations, 0);
}
