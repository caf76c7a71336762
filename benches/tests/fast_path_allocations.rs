//! The limiter's fast path allocates nothing: counted by a counting global allocator. It
//! counts every thread's allocations, and this binary holds this one test, but the test
//! harness's own thread (waiting for the test's end) may still allocate a few times at a
//! moment of its own. So the same 1,000 rounds are counted five times over: a fast path
//! that allocated (on every call, or now and then) would show in every count, the
//! harness's few in one at most.

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
    let counts: Vec<usize> = (0..5)
        .map(|_| {
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
            region.change().allocations
        })
        .collect();
    assert_eq!(
        counts.iter().min(),
        Some(&0),
        "allocations per 1,000 rounds: {counts:?}"
    );
}
