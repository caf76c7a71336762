//! [`LimiterSnapshot`]: a point-in-time view of a limiter.

use crate::catalog::Dimension;

/// A point-in-time view of a limiter, for tests, benchmarks and dashboards.
#[derive(Debug, Clone, PartialEq)]
pub struct LimiterSnapshot {
    /// Level and capacity in tokens per limited dimension.
    pub levels: Vec<(Dimension, f64, u64)>,
    /// Waiters queued.
    pub queued: usize,
    /// Waiters queued per [`super::Priority`] class, lowest first (indexed by
    /// [`super::Priority::index`]).
    pub queued_by_class: [usize; 3],
    /// The adaptive throttle's factor (1 = full rate).
    pub rate_factor: f64,
    /// Reservations granted so far.
    pub grants: u64,
    /// Of those, how many had to wait.
    pub waited: u64,
    /// Reservations alive now (made and not yet settled, given back or dropped), and,
    /// in process, `reserve` futures not yet finished (a call waiting for its grant):
    /// 0 once every call has finished, whatever failed. A backend that cannot tell says 0.
    pub held: u64,
}
