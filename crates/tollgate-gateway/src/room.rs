//! Room for each client: what the limiters have left for a request's model and key,
//! written on every answer as the `x-ratelimit-*` headers OpenAI's API sends (limit and
//! remaining as integers, reset as a Go-style duration, `1s` or `6m0s`), so an SDK or
//! client that paces itself by them can. From the limiter's own view: the model's
//! buckets and the key's caps, the tighter of the two on each dimension.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use tollgate::Dimension;
use tollgate::catalog::Limits;
use tollgate::limit::LimiterSnapshot;

use crate::state::Gateway;

/// What one dimension of a limiter has left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Room {
    /// The dimension.
    pub(crate) dimension: Dimension,
    /// Its limit a minute.
    pub(crate) limit: u64,
    /// Whole units left now.
    pub(crate) remaining: u64,
    /// Until the bucket is full again, at the rate it refills now.
    pub(crate) reset: Duration,
}

/// How long an answer waits for a limiter's snapshot (a Redis round trip) before its
/// headers leave that limiter out: the room is a hint, never a reason to hold an answer.
const SNAPSHOT_WAIT: Duration = Duration::from_millis(50);

/// The longest reset written: a limiter throttled to nearly nothing would otherwise say
/// centuries.
const LONGEST_RESET: Duration = Duration::from_secs(24 * 3600);

/// The room on each dimension of `snapshot`, its limits a minute from `limits` (a
/// dimension they leave at 0 is named by its capacity).
pub(crate) fn of_snapshot(snapshot: &LimiterSnapshot, limits: Limits) -> Vec<Room> {
    snapshot
        .levels
        .iter()
        .map(|&(dimension, level, capacity)| {
            let limit = match limit_on(limits, dimension) {
                0 => capacity,
                limit => limit,
            };
            let level = level.clamp(0.0, capacity as f64);
            let missing = capacity as f64 - level;
            let per_second = limit as f64 * snapshot.rate_factor / 60.0;
            let reset = if missing <= 0.0 {
                Duration::ZERO
            } else if per_second <= 0.0 || missing / per_second >= LONGEST_RESET.as_secs_f64() {
                LONGEST_RESET
            } else {
                Duration::from_secs_f64(missing / per_second)
            };
            Room {
                dimension,
                limit,
                remaining: level.floor() as u64,
                reset,
            }
        })
        .collect()
}

fn limit_on(limits: Limits, dimension: Dimension) -> u64 {
    match dimension {
        Dimension::Requests => limits.rpm,
        Dimension::Tokens => limits.tpm,
        Dimension::InputTokens => limits.input_tpm,
        Dimension::OutputTokens => limits.output_tpm,
        _ => 0,
    }
}

/// On each dimension, the tighter of `a` and `b` (the one with less left; on a tie the
/// one that takes longer to refill): what a request can count on from both.
pub(crate) fn tighter(mut a: Vec<Room>, b: Vec<Room>) -> Vec<Room> {
    for room in b {
        match a.iter_mut().find(|r| r.dimension == room.dimension) {
            Some(r)
                if (room.remaining, std::cmp::Reverse(room.reset))
                    < (r.remaining, std::cmp::Reverse(r.reset)) =>
            {
                *r = room;
            }
            Some(_) => {}
            None => a.push(room),
        }
    }
    a
}

/// The room a request for catalog model `model_id` by key `key_id` (empty: none) has:
/// the model's limiter and the key's caps, each read from its snapshot (one that cannot
/// answer within [`SNAPSHOT_WAIT`], an unreachable Redis, is left out).
pub(crate) async fn for_request(state: &Gateway, model_id: &str, key_id: &str) -> Vec<Room> {
    let mut rooms = Vec::new();
    if let (Ok(limiter), Some(entry)) = (
        state.models.limiter(model_id),
        state.models.catalog().model(model_id),
    ) && let Some(Ok(snapshot)) = within_wait(limiter.snapshot()).await
    {
        rooms = of_snapshot(&snapshot, entry.limits);
    }
    if !key_id.is_empty() {
        rooms = tighter(rooms, for_key(state, key_id).await);
    }
    rooms
}

/// `snapshot`'s output if it comes within [`SNAPSHOT_WAIT`]. A limiter in this process
/// answers at its first poll, and then no timer is set (a timer per answer is a cost
/// every request would pay); one on Redis gets the timer.
async fn within_wait<F: std::future::Future>(snapshot: F) -> Option<F::Output> {
    let mut snapshot = std::pin::pin!(snapshot);
    if let std::task::Poll::Ready(out) = futures::poll!(snapshot.as_mut()) {
        return Some(out);
    }
    tokio::time::timeout(SNAPSHOT_WAIT, snapshot).await.ok()
}

/// The room key `key_id`'s own caps leave (none when it has no caps).
pub(crate) async fn for_key(state: &Gateway, key_id: &str) -> Vec<Room> {
    let caps = state
        .keys
        .as_ref()
        .and_then(|keys| keys.get(key_id))
        .map(|key| key.caps())
        .unwrap_or_default();
    match state.quotas.limiter(key_id) {
        Some(limiter) => match within_wait(limiter.snapshot()).await {
            Some(Ok(snapshot)) => of_snapshot(&snapshot, caps),
            _ => Vec::new(),
        },
        None => Vec::new(),
    }
}

/// The name of `dimension` in the view of a key: `requests`, `tokens`, `input-tokens`,
/// `output-tokens` (none for a dimension added to tollgate later: not written).
pub(crate) fn dimension_name(dimension: Dimension) -> Option<&'static str> {
    headers_of(dimension).map(|(name, ..)| name)
}

/// `dimension`'s name and its `x-ratelimit-limit-*`, `-remaining-*` and `-reset-*`
/// header names, written out so that an answer builds none of them.
fn headers_of(dimension: Dimension) -> Option<(&'static str, [&'static str; 3])> {
    Some(match dimension {
        Dimension::Requests => (
            "requests",
            [
                "x-ratelimit-limit-requests",
                "x-ratelimit-remaining-requests",
                "x-ratelimit-reset-requests",
            ],
        ),
        Dimension::Tokens => (
            "tokens",
            [
                "x-ratelimit-limit-tokens",
                "x-ratelimit-remaining-tokens",
                "x-ratelimit-reset-tokens",
            ],
        ),
        Dimension::InputTokens => (
            "input-tokens",
            [
                "x-ratelimit-limit-input-tokens",
                "x-ratelimit-remaining-input-tokens",
                "x-ratelimit-reset-input-tokens",
            ],
        ),
        Dimension::OutputTokens => (
            "output-tokens",
            [
                "x-ratelimit-limit-output-tokens",
                "x-ratelimit-remaining-output-tokens",
                "x-ratelimit-reset-output-tokens",
            ],
        ),
        _ => return None,
    })
}

/// Writes `x-ratelimit-limit-*`, `x-ratelimit-remaining-*` and `x-ratelimit-reset-*`
/// for each of `rooms`.
pub(crate) fn write(headers: &mut HeaderMap, rooms: &[Room]) {
    for room in rooms {
        let Some((_, [limit, remaining, reset])) = headers_of(room.dimension) else {
            continue;
        };
        headers.insert(limit, HeaderValue::from(room.limit));
        headers.insert(remaining, HeaderValue::from(room.remaining));
        if let Ok(value) = HeaderValue::try_from(go_duration(room.reset)) {
            headers.insert(reset, value);
        }
    }
}

/// `duration` as Go's `time.Duration` prints it, to the millisecond (rounded up, so a
/// client that waits that long finds the room): `0s`, `20ms`, `1.5s`, `6m0s`, `1h0m0s`.
pub(crate) fn go_duration(duration: Duration) -> String {
    let ms = duration.as_nanos().div_ceil(1_000_000);
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (whole, frac) = (ms / 1000, ms % 1000);
    let seconds = if frac == 0 {
        format!("{}s", whole % 60)
    } else {
        let digits = format!("{frac:03}");
        format!("{}.{}s", whole % 60, digits.trim_end_matches('0'))
    };
    let (hours, minutes) = (whole / 3600, whole % 3600 / 60);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}")
    } else {
        seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_writes_what_openais_headers_write() {
        for (ms_or_ns, want) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ms"),
            (Duration::from_millis(20), "20ms"),
            (Duration::from_millis(999), "999ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(17_250), "17.25s"),
            (Duration::from_secs(360), "6m0s"),
            (Duration::from_millis(90_500), "1m30.5s"),
            (Duration::from_secs(3600), "1h0m0s"),
        ] {
            assert_eq!(go_duration(ms_or_ns), want, "{ms_or_ns:?}");
        }
    }

    fn snapshot(levels: Vec<(Dimension, f64, u64)>, rate_factor: f64) -> LimiterSnapshot {
        LimiterSnapshot {
            levels,
            queued: 0,
            queued_by_class: [0; 3],
            rate_factor,
            grants: 0,
            waited: 0,
            held: 0,
        }
    }

    #[test]
    fn room_of_a_snapshot_is_what_is_left_and_the_time_to_refill_at_the_current_rate() {
        let limits = Limits {
            rpm: 60,
            tpm: 6000,
            ..Limits::default()
        };
        let rooms = of_snapshot(
            &snapshot(
                vec![
                    (Dimension::Requests, 57.5, 60),
                    (Dimension::Tokens, -300.0, 6000),
                ],
                1.0,
            ),
            limits,
        );
        // 2.5 requests short at one a second; tokens in debt count as none left, and
        // the whole 6,000 refill at 100 a second.
        assert_eq!(rooms[0].remaining, 57);
        assert_eq!(rooms[0].limit, 60);
        assert_eq!(rooms[0].reset, Duration::from_millis(2500));
        assert_eq!(rooms[1].remaining, 0);
        assert_eq!(rooms[1].reset, Duration::from_secs(60));
        // Throttled to half the rate, refilling takes twice as long.
        let halved = of_snapshot(
            &snapshot(vec![(Dimension::Requests, 57.5, 60)], 0.5),
            limits,
        );
        assert_eq!(halved[0].reset, Duration::from_secs(5));
    }

    #[test]
    fn the_tighter_room_of_model_and_key_is_kept_on_each_dimension() {
        let room = |dimension, remaining, reset_s| Room {
            dimension,
            limit: 100,
            remaining,
            reset: Duration::from_secs(reset_s),
        };
        let model = vec![
            room(Dimension::Requests, 50, 10),
            room(Dimension::InputTokens, 9, 1),
        ];
        let key = vec![
            room(Dimension::Requests, 5, 30),
            room(Dimension::Tokens, 70, 3),
        ];
        let both = tighter(model, key);
        assert_eq!(both.len(), 3);
        assert_eq!(both[0], room(Dimension::Requests, 5, 30));
        assert_eq!(both[1], room(Dimension::InputTokens, 9, 1));
        assert_eq!(both[2], room(Dimension::Tokens, 70, 3));
    }
}
