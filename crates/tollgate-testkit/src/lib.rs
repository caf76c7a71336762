//! Shared acceptance suites for tollgate's pluggable parts. A backend crate runs them as
//! a dev-dependency against its own implementation.
//!
//! - [`limiter`]: the properties every [`tollgate::limit::LimiterBackend`] must have.
//! - [`provider`]: the behaviours every provider crate must have, against its scripted
//!   wire format.

#![deny(missing_docs)]

pub mod limiter;
pub mod provider;
