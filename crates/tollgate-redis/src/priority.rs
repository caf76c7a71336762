//! Priority classes on Redis. A reservation books a slot in one call and sleeps until it,
//! so a class cannot jump a slot already booked the way a queued waiter can in process.
//! Instead, a lower class books only slots close to now: [`Priority::Batch`] at most
//! [`BATCH_HORIZON`] ahead. Asked for a later slot, the script takes nothing and says how
//! far off the slot is; the reservation sleeps until the slot is within the horizon and
//! asks again, so that slots further ahead stay free for the higher classes that arrive
//! meanwhile. A reservation that has waited [`LimiterConfig::aging`](tollgate::limit::LimiterConfig::aging)
//! books whatever slot it is given: aging bounds the wait of every class, as in process.
//!
//! [`Priority::Interactive`] and [`Priority::Default`] book any slot (one round trip per
//! reservation, the shared backend's promise for the common case); between those two the
//! order is arrival at Redis. A batch reservation costs a second round trip when the queue
//! is deeper than the horizon.

use std::time::Duration;

use tokio::time::Instant;

use tollgate::limit::Priority;

/// How far ahead a [`Priority::Batch`] reservation may book (until it has aged).
pub const BATCH_HORIZON: Duration = Duration::from_secs(1);

/// How far ahead a reservation of class `priority` that has waited `waited` may book;
/// `None`: any slot.
pub(crate) fn horizon(priority: Priority, waited: Duration, aging: Duration) -> Option<Duration> {
    match priority {
        Priority::Batch if waited < aging => Some(BATCH_HORIZON),
        _ => None,
    }
}

/// When a reservation offered a slot starting at `slot` (beyond its `horizon`) asks
/// again: when the slot is within the horizon, and no later than when it ages (`aged_at`);
/// never before a millisecond from `now`.
pub(crate) fn ask_again_at(
    slot: Instant,
    horizon: Duration,
    aged_at: Instant,
    now: Instant,
) -> Instant {
    let within = slot.checked_sub(horizon).unwrap_or(now);
    within.min(aged_at).max(now + Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn only_a_batch_reservation_that_has_not_aged_has_a_horizon() {
        assert_eq!(horizon(Priority::Batch, S, 30 * S), Some(BATCH_HORIZON));
        assert_eq!(horizon(Priority::Batch, 30 * S, 30 * S), None);
        assert_eq!(horizon(Priority::Default, S, 30 * S), None);
        assert_eq!(horizon(Priority::Interactive, S, 30 * S), None);
    }

    #[test]
    fn a_refused_batch_reservation_asks_again_when_its_slot_is_within_the_horizon_or_it_ages() {
        let t0 = tollgate::clock::now();
        assert_eq!(ask_again_at(t0 + 10 * S, S, t0 + 30 * S, t0), t0 + 9 * S);
        assert_eq!(ask_again_at(t0 + 40 * S, S, t0 + 5 * S, t0), t0 + 5 * S);
        let soon = t0 + Duration::from_millis(1);
        assert_eq!(ask_again_at(t0 + S, S, t0 + 30 * S, t0), soon);
    }
}
