//! The shared limiter acceptance suite (`tollgate-testkit`) against the in-process
//! limiter, through the `LimiterBackend` trait.

tollgate_testkit::limiter_acceptance_tests!(Some(tollgate_testkit::limiter::InProcess));
