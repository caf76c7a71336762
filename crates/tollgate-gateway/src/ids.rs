//! Identifiers the gateway makes up: request ids and answer ids, unique within the
//! process and unlikely to repeat across restarts (the start time is in each).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
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
