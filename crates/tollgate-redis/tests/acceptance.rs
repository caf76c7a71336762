//! The shared limiter acceptance suite (`tollgate-testkit`) against Redis, on the paused
//! tokio clock injected into the script.

mod common;

tollgate_testkit::limiter_acceptance_tests!(common::Harness::new());
