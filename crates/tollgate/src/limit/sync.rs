//! The limiter's lock, and the runtime its driver task is spawned on: `std`'s and tokio's,
//! or loom's under the `loom-model` feature, the build in which `tests/loom.rs` model-checks
//! the lock and the waker hand-off across threads (`docs/reliability.md`).
//!
//! Under loom there is no driver: the clock stands still (`crate::clock`), so nothing
//! refills and the driver, which grants only when a refill is due, would never grant.
//! Every grant is then made under the lock by a refund, a cancellation or feedback, and
//! woken after it: the hand-offs the model explores. `Arc` stays `std`'s: a reservation's
//! ledger is a public `Arc<dyn BucketLedger>`, which loom's `Arc` cannot become.

#[cfg(feature = "loom-model")]
pub(super) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(feature = "loom-model"))]
pub(super) use std::sync::{Mutex, MutexGuard};

#[cfg(feature = "loom-model")]
pub(super) use no_driver::Runtime;
#[cfg(not(feature = "loom-model"))]
pub(super) use tokio::runtime::Handle as Runtime;

#[cfg(feature = "loom-model")]
mod no_driver {
    use std::future::Future;

    /// Stands in for tokio's runtime handle: always there, and the driver it is handed
    /// is dropped unpolled.
    pub(in super::super) struct Runtime;

    /// Never returned: under loom a runtime is always "there".
    pub(in super::super) struct NoRuntime;

    impl Runtime {
        pub(in super::super) fn try_current() -> Result<Self, NoRuntime> {
            Ok(Runtime)
        }

        pub(in super::super) fn spawn<F: Future>(&self, driver: F) {
            drop(driver);
        }
    }
}
