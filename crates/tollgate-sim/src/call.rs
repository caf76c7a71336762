//! One call to the simulated provider: what it asks ([`SimRequest`]), what it is
//! charged, and how it ends (an answer, a refusal, a journal entry, the counters).

use std::time::Duration;

/// One call: its input, its output limit and the output it will produce (at most the
/// limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SimRequest {
    /// Input tokens.
    pub input_tokens: u64,
    /// The output limit asked for (`max_tokens`).
    pub max_output: u64,
    /// Output the call produces if accepted (capped at `max_output`).
    pub actual_output: u64,
}

impl SimRequest {
    /// A call; `actual_output` is capped at `max_output`.
    pub fn new(input_tokens: u64, max_output: u64, actual_output: u64) -> Self {
        SimRequest {
            input_tokens,
            max_output,
            actual_output: actual_output.min(max_output),
        }
    }
}

/// One of the provider's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimDimension {
    /// Requests per minute.
    Requests,
    /// Input tokens per minute.
    InputTokens,
    /// Output tokens per minute.
    OutputTokens,
}

impl SimDimension {
    /// Every dimension, in bucket order (a dimension's discriminant is its bucket's index).
    pub const ALL: [SimDimension; 3] = [
        SimDimension::Requests,
        SimDimension::InputTokens,
        SimDimension::OutputTokens,
    ];
}

/// What a call counts against each limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SimCharge {
    /// Requests.
    pub requests: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl SimCharge {
    /// The amount on dimension `d`.
    pub fn on(&self, d: SimDimension) -> u64 {
        match d {
            SimDimension::Requests => self.requests,
            SimDimension::InputTokens => self.input_tokens,
            SimDimension::OutputTokens => self.output_tokens,
        }
    }

    /// The sum of two charges.
    pub fn plus(&self, other: &SimCharge) -> SimCharge {
        SimCharge {
            requests: self.requests + other.requests,
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
        }
    }

    pub(crate) fn admission(request: &SimRequest) -> SimCharge {
        SimCharge {
            requests: 1,
            input_tokens: request.input_tokens,
            output_tokens: request.max_output,
        }
    }
}

/// An accepted call's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimAnswer {
    /// The call's number in the journal.
    pub id: u64,
    /// Input tokens used.
    pub input_tokens: u64,
    /// Output tokens produced.
    pub output_tokens: u64,
    /// When the provider accepted it, from the provider's creation.
    pub accepted_at: Duration,
    /// When it finished.
    pub finished_at: Duration,
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimRefusal {
    /// HTTP 429: over a limit.
    RateLimited {
        /// The provider's `retry-after`.
        retry_after: Option<Duration>,
    },
    /// HTTP 529: overloaded, unrelated to the caller's rate.
    Overloaded,
}

/// What happened to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimOutcome {
    /// Accepted and answered (or still answering).
    Accepted,
    /// Refused with a 429.
    RateLimited {
        /// The first limit it did not fit.
        dimension: SimDimension,
        /// Whether it is larger than that bucket can ever hold.
        oversize: bool,
    },
    /// Refused with a 529.
    Overloaded,
}

/// One call, as the provider saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimCall {
    /// Its number, from 0.
    pub id: u64,
    /// When it arrived, from the provider's creation.
    pub at: Duration,
    /// What was asked.
    pub request: SimRequest,
    /// What happened.
    pub outcome: SimOutcome,
    /// What it counts against the limits: for an accepted call, the final charge once it
    /// completed (the admission charge until then); for a refused one, what was charged
    /// (nothing unless [`SimConfig::count_rejected`](crate::SimConfig::count_rejected)(crate::SimConfig::count_rejected)).
    pub charged: SimCharge,
    /// When an accepted call finished.
    pub completed_at: Option<Duration>,
}

/// Counters over every call so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SimStats {
    /// Calls received.
    pub calls: u64,
    /// Calls accepted.
    pub accepted: u64,
    /// Accepted calls that have finished.
    pub completed: u64,
    /// 429s.
    pub rate_limited: u64,
    /// Of those, calls larger than a bucket.
    pub oversize: u64,
    /// 529s.
    pub overloaded: u64,
    /// What accepted calls count against the limits (final charges where completed).
    pub accepted_charge: SimCharge,
    /// What rate-limited calls were charged (only with [`SimConfig::count_rejected`](crate::SimConfig::count_rejected)).
    pub wasted_charge: SimCharge,
}
