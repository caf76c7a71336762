//! The limiter acceptance suite against the in-process limiter: the answers every other
//! backend (Redis, in `tollgate-redis`'s `tests/acceptance.rs`) is held to.

tollgate_testkit::limiter_acceptance_tests!(Some(tollgate_testkit::limiter::InProcess));
