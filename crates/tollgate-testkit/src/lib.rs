//! Shared acceptance suites for tollgate's pluggable parts. A backend crate runs them as
//! a dev-dependency against its own implementation.
//!
//! - [`limiter`]: the properties every [`tollgate::limit::LimiterBackend`] must have.
//! - [`provider`]: the behaviours every provider crate must have, against its scripted
//!   wire format.
//! - [`peers`]: where a test finds the mock servers `scripts/peers.sh` starts.
//!
//! Each suite is a macro that writes one test per behaviour into the calling crate's
//! test binary (`limiter_acceptance_tests!`, `provider_contract_tests!`); each behaviour
//! is also a plain async function, so one can be run on its own:
//!
//! ```
//! use tollgate_testkit::limiter::{InProcess, waiters_are_granted_in_fifo_order};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The in-process limiter keeps the property; a backend that broke it would panic here.
//! waiters_are_granted_in_fifo_order(&InProcess).await;
//! # }
//! ```
//!
//! In a backend crate's `tests/`, one line runs them all:
//! `tollgate_testkit::limiter_acceptance_tests!(Some(MyBackends));`.

#![deny(missing_docs)]

pub mod limiter;
pub mod peers;
pub mod provider;
