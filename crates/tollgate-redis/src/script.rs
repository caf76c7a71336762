//! The reservation script (`limiter.lua`), with the throttle's constants filled in, and
//! the arguments every call passes it.

use std::sync::LazyLock;
use std::time::Duration;

use tollgate::limit::throttle;

/// How long a model's hash is kept, at least, while it holds a provider's limit learned
/// from its headers (below the catalog's): an absent hash means full buckets at the
/// catalog's limits, so expiring it once the buckets are full would forget the limit and
/// let the next burst out at the catalog's size. Longer remembers a lower limit across
/// longer idle spells; a provider that raised its limit again says so in its next answer.
pub(crate) const LEARNED_LIMIT_TTL: Duration = Duration::from_secs(10 * 60);

/// The script's source, with the throttle's constants filled in.
pub(crate) static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| {
    let us = |d: Duration| d.as_micros().to_string();
    let src = include_str!("limiter.lua")
        .replace("@HOLDOFF_US@", &us(throttle::DECREASE_HOLDOFF))
        .replace("@RECOVERY_US@", &us(throttle::RECOVERY_DELAY))
        .replace(
            "@RATE_LIMITED_BETA@",
            &throttle::RATE_LIMITED_BETA.to_string(),
        )
        .replace("@OVERLOADED_BETA@", &throttle::OVERLOADED_BETA.to_string())
        .replace("@MIN_RATE_FACTOR@", &throttle::MIN_RATE_FACTOR.to_string())
        .replace(
            "@APPROACH_PER_SECOND@",
            &throttle::APPROACH_PER_SECOND.to_string(),
        )
        .replace(
            "@LEARNED_LIMIT_TTL_MS@",
            &LEARNED_LIMIT_TTL.as_millis().to_string(),
        );
    redis::Script::new(&src)
});

/// `ARGV[3]` to `ARGV[11]` of a script call, whose meaning depends on the operation (see
/// the head of `limiter.lua`); empty where unused.
#[derive(Debug, Default)]
pub(crate) struct ScriptArgs(pub(crate) [String; 9]);

/// A header report's arguments (`ARGV[6]` to `ARGV[11]` of a `report` feedback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReportArgs {
    /// The dimension's index among the call's dimensions, from 1.
    pub(crate) index: usize,
    /// The limit per minute the bucket is to have, and the capacity in tokens that goes
    /// with it; `None`: the one in force is kept.
    pub(crate) limit: Option<(u64, u64)>,
    /// What the provider had left, if it said.
    pub(crate) remaining: Option<u64>,
    /// µs since the answer's request was sent.
    pub(crate) sent_ago_us: u64,
    /// µs until the provider's bucket is full again, if it said (a fixed window's turn).
    pub(crate) reset_us: Option<u64>,
}

impl ScriptArgs {
    /// A reservation that waits at most `max_wait_us` (-1: any), holding the refill for
    /// `allowance_us` after a grant out of a full bucket.
    pub(crate) fn reserve(max_wait_us: i64, allowance_us: u64) -> Self {
        let mut args = ScriptArgs::default();
        args.0[0] = max_wait_us.to_string();
        args.0[1] = allowance_us.to_string();
        args
    }

    /// A settle whose id is kept `id_ttl_ms`; `unsent`: it gives back a reservation that
    /// was never sent (which leaves the line of bookings too).
    pub(crate) fn settle(id_ttl_ms: u64, unsent: bool) -> Self {
        let mut args = ScriptArgs::default();
        args.0[0] = id_ttl_ms.to_string();
        if unsent {
            args.0[1] = "1".into();
        }
        args
    }

    /// Feedback of `kind` (`ok`, `429`, `529`, `pause` or `report`), pausing the model
    /// `pause_us` from now if given.
    pub(crate) fn feedback(kind: &str, pause_us: Option<u64>, report: Option<ReportArgs>) -> Self {
        let mut args = ScriptArgs::default();
        args.0[1] = kind.to_owned();
        args.0[2] = pause_us.map(|p| p.to_string()).unwrap_or_default();
        if let Some(r) = report {
            args.0[3] = r.index.to_string();
            if let Some((limit, capacity)) = r.limit {
                args.0[4] = limit.to_string();
                args.0[5] = capacity.to_string();
            }
            args.0[6] = r.remaining.map(|x| x.to_string()).unwrap_or_default();
            args.0[7] = r.sent_ago_us.to_string();
            args.0[8] = r.reset_us.map(|x| x.to_string()).unwrap_or_default();
        }
        args
    }
}
