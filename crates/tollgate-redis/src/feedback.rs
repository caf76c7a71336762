//! What a provider's answer tells the shared buckets. Each [`Feedback`] becomes at most
//! one script call (`op = feedback`), which applies it atomically to the model's hash, so
//! every process sees it in its next call:
//!
//! - a 429 ([`Feedback::RateLimited`]) slows the shared throttle factor (adaptive models),
//!   leaves nothing on requests (the dimension every call spends) and pauses the model for
//!   its `retry-after`;
//! - a repeated 429 ([`Feedback::RateLimitedAgain`]) pauses: it is no new signal; with or
//!   without a `retry-after`, it is the model's last refusal (as in process), which the
//!   next 429 reads to tell whether its call was alone;
//! - either, with a `retry-after`, when nothing but the refused call's own attempt has
//!   been granted (by any process) since the last refusal, sets the requests bucket so
//!   that one unit has refilled exactly at the end of the pause, at the throttled rate:
//!   the retry goes when the provider said (as in process);
//! - a 529 ([`Feedback::Overloaded`]) slows the factor harder and pauses;
//! - a success nudges a factor below 1 back up;
//! - rate-limit headers ([`Feedback::Reported`], and its shorthands
//!   [`Feedback::Remaining`] and [`Feedback::Exhausted`]) set the bucket's limit to the
//!   provider's when lower than the catalog's (kept in the hash, so every process paces
//!   at it), lower the level to what the provider had left when the request was sent plus
//!   what has refilled since, and end the arrival allowance's hold.
//!
//! As in process, a report never takes a grant made since the request was sent a second
//! time: answers come back in any order, and the level already holds each grant once.
//! The request's send instant is on this process's clock; the call carries its age
//! instead, and the script reads the send time as its own `now` minus that age.
//!
//! Fixed windows (`window = "fixed"`), as in process: a report's `remaining` with its
//! reset, or a 429's `retry-after`, is a turn of the window, kept in the hash: nothing
//! refills until it, and a window's worth at it and at each turn after it (the bookings
//! beyond one window are taken from the next). Every success is counted in the hash (one
//! call each, for these models only), and the first 429 of a window makes the successes
//! since the previous one the limit, if lower.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::Dimension;
use tollgate::limit::{Feedback, MAX_PROVIDER_PAUSE};

use crate::buckets::{Buckets, FACTOR_ONE_MICRO, capacity, micros};
use crate::script::{ReportArgs, ScriptArgs};

/// One feedback call, ready to be sent (and sent again, if Redis is unreachable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FeedbackCall {
    /// `ok`, `429`, `again`, `529`, `pause` or `report`.
    kind: &'static str,
    /// The model's pause from the call's `now`, in µs.
    pause_us: Option<u64>,
    report: Option<Report>,
}

/// A header report on one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Report {
    /// The dimension's index among the model's dimensions, from 1.
    index: usize,
    /// The limit to pace at (the provider's, capped at the catalog's) and the bucket size
    /// that goes with it; `None`: the one in force is kept.
    limit: Option<(u64, u64)>,
    remaining: Option<u64>,
    /// When the answer's request was sent; `None`: as of now.
    sent: Option<Instant>,
    /// When the provider's bucket is full again (a fixed window's turn).
    reset: Option<Duration>,
}

impl FeedbackCall {
    /// The script's arguments for this call made at `at` (a report's age runs to `at`).
    pub(crate) fn args(&self, at: Instant) -> ScriptArgs {
        let report = self.report.map(|r| ReportArgs {
            index: r.index,
            limit: r.limit,
            remaining: r.remaining,
            sent_ago_us: r
                .sent
                .map_or(0, |sent| micros(at.saturating_duration_since(sent))),
            reset_us: r.reset.map(|d| micros(d.min(MAX_PROVIDER_PAUSE))),
        });
        ScriptArgs::feedback(self.kind, self.pause_us, report)
    }
}

fn pause(retry_after: Option<Duration>) -> Option<u64> {
    retry_after.map(|d| micros(d.min(MAX_PROVIDER_PAUSE)))
}

impl Buckets {
    /// The call `feedback` makes, or `None` when it changes nothing in the hash.
    pub(crate) fn feedback_call(&self, feedback: Feedback) -> Option<FeedbackCall> {
        let call = |kind, pause_us| {
            Some(FeedbackCall {
                kind,
                pause_us,
                report: None,
            })
        };
        match feedback {
            // A success only moves a factor below 1: at full rate (as of the last
            // reservation's answer) it would cost a round trip for nothing. A fixed
            // window counts it: its next 429 measures the window by the successes.
            Feedback::Success => {
                if self.fixed_window
                    || (self.adaptive
                        && self.factor_micro.load(Ordering::Relaxed) < FACTOR_ONE_MICRO)
                {
                    call("ok", None)
                } else {
                    None
                }
            }
            // Empties the requests bucket whether or not the throttle is on.
            Feedback::RateLimited { retry_after } => call("429", pause(retry_after)),
            // Sent without a retry-after too: it marks the last refusal.
            Feedback::RateLimitedAgain { retry_after } => call("again", pause(retry_after)),
            Feedback::Overloaded { retry_after } => {
                if self.adaptive {
                    call("529", pause(retry_after))
                } else {
                    retry_after.and_then(|d| call("pause", pause(Some(d))))
                }
            }
            Feedback::Remaining {
                dimension,
                remaining,
            } => self.report(dimension, None, Some(remaining), None, None),
            // Nothing left: the next request waits for one unit to refill at the
            // bucket's rate, not for the reset (when the provider's bucket is full); a
            // fixed window waits for the reset, its turn.
            Feedback::Exhausted {
                dimension,
                reset_in,
            } => self.report(dimension, None, Some(0), None, Some(reset_in)),
            // The reset says when the provider's bucket is full again; a continuous bucket
            // needs no more than the limit and what was left (the script reads it only
            // for a fixed window).
            Feedback::Reported {
                dimension,
                limit,
                remaining,
                reset_in,
                since,
            } => self.report(dimension, limit, remaining, since.map(|m| m.at()), reset_in),
        }
    }

    fn report(
        &self,
        dimension: Dimension,
        limit: Option<u64>,
        remaining: Option<u64>,
        sent: Option<Instant>,
        reset: Option<Duration>,
    ) -> Option<FeedbackCall> {
        // Unlimited in the catalog: nothing to pace.
        let i = self.dims.iter().position(|d| d.dimension == dimension)?;
        let catalog = self.dims[i].limit;
        // The provider's limit caps the catalog's, never raises it; without one, the
        // limit in force is kept (as in process).
        let limit = limit
            .filter(|l| *l > 0)
            .map(|l| l.min(catalog))
            .map(|l| (l, capacity(self.burst, l)));
        Some(FeedbackCall {
            kind: "report",
            pause_us: None,
            report: Some(Report {
                index: i + 1,
                limit,
                remaining,
                sent,
                reset,
            }),
        })
    }
}
