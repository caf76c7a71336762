//! Identifiers the gateway makes up: request ids and answer ids, unique within the
//! process and unlikely to repeat across restarts (the start time is in each).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::UNIX_EPOCH;

use tollgate::clock::wall_now;

static START: LazyLock<u64> = LazyLock::new(|| {
    wall_now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
});
static NEXT: AtomicU64 = AtomicU64::new(1);

/// A fresh id: `<prefix>_<start time><sequence>` in hex.
pub(crate) fn next(prefix: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{:016x}{n:08x}", *START)
}

/// A request's id: the client's `x-request-id` when it is short visible ASCII, else one
/// the gateway makes. Answers carry it, masked failures name it, logs are keyed by it.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(Arc<str>);

impl RequestId {
    /// The id of `request`: the one `ops::request_id` stored, or a fresh one for a router
    /// used without it.
    pub(crate) fn of(extensions: &axum::http::Extensions) -> Self {
        extensions
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(|| RequestId(next("req").into()))
    }

    /// `id`, as the request's.
    pub(crate) fn new(id: String) -> Self {
        RequestId(id.into())
    }

    /// The id as text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_distinct_and_carry_their_prefix() {
        let a = super::next("req");
        let b = super::next("req");
        assert!(a.starts_with("req_") && b.starts_with("req_"));
        assert_ne!(a, b);
    }
}
