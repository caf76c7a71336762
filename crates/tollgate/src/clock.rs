//! The one place tollgate reads time.
//!
//! Everything that paces, waits or measures reads [`now`]: tokio's clock, which tests
//! pause and step (`tokio::time::pause`, `start_paused = true`), so a test of a minute of
//! rate limiting runs in microseconds with exact expectations. Dates that providers send
//! in headers (`retry-after` as an HTTP date, RFC 3339 reset times) are compared with
//! [`wall_now`], the only wall-clock read.
//!
//! `clippy.toml` bans `tokio::time::Instant::now`, `std::time::Instant::now` and
//! `std::time::SystemTime::now` everywhere else, and the tidy check in
//! `cargo xtask test-all` finds any clock read outside this file. Sleeping and timeouts
//! (`tokio::time::sleep`, `sleep_until`, `timeout`) need no exemption: they run on the
//! same clock.

use std::time::SystemTime;

use tokio::time::Instant;

/// Now, on tokio's clock (paused in tests).
#[cfg(not(feature = "loom-model"))]
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    Instant::now()
}

/// Now, standing still: in the loom model check's build (the `loom-model` feature,
/// `tests/loom.rs`) time is one instant, read once, so that no bucket ever refills and
/// every run of a model takes the same path (loom requires it).
#[cfg(feature = "loom-model")]
#[allow(clippy::disallowed_methods)]
pub fn now() -> Instant {
    static FROZEN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *FROZEN.get_or_init(Instant::now)
}

/// The wall-clock time, for provider headers that carry dates. Tokio's pausable clock
/// has no date, so this is the one read of the system clock; nothing that paces or waits
/// uses it.
#[allow(clippy::disallowed_methods)]
pub fn wall_now() -> SystemTime {
    SystemTime::now()
}
