//! What a simulated provider is told: its published limits, how much of them it serves,
//! how it refuses and answers, and which rate-limit headers it sends.

use std::time::Duration;

use crate::{SimDelay, SimDimension};

/// Published per-minute limits; 0 leaves a dimension unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SimLimits {
    /// Requests per minute.
    pub rpm: u64,
    /// Input tokens per minute.
    pub input_tpm: u64,
    /// Output tokens per minute.
    pub output_tpm: u64,
}

/// How large the provider's buckets are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SimCapacity {
    /// A full minute's limit: `rpm = 60` allows 60 at once.
    #[default]
    FullMinute,
    /// One second's worth, `limit / 60` (at least 1): `60 rpm` enforced as one a second.
    PerSecond,
}

impl SimCapacity {
    /// The capacity in tokens for a per-minute `limit` (the same rounding as tollgate's
    /// `Burst::Seconds(1)`).
    pub fn tokens(self, limit: u64) -> u64 {
        match self {
            SimCapacity::FullMinute => limit,
            SimCapacity::PerSecond => (limit / 60).max(1),
        }
    }
}

/// How output tokens count against the output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputCharge {
    /// The output limit (`max_tokens`) is charged when the call is accepted and kept, as
    /// OpenAI counts it.
    #[default]
    MaxTokens,
    /// The output limit is charged when the call is accepted (an estimate) and the unused
    /// part given back when it completes, as Anthropic counts output.
    Actual,
}

/// What a 429 says about when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RetryAfter {
    /// No `retry-after`.
    None,
    /// The wait until the call would fit, rounded up to whole seconds (the HTTP header's
    /// resolution).
    #[default]
    WholeSeconds,
    /// The exact wait until the call would fit.
    Exact,
}

/// How the provider refills its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SimWindow {
    /// Exact continuous token buckets (Anthropic's documented behaviour).
    #[default]
    Continuous,
    /// Fixed windows counted from the provider's creation: each window (a minute for
    /// full-minute capacity) allows the capacity, and nothing refills until it turns.
    Fixed,
}

/// Whether and how answers carry rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SimHeaderStyle {
    /// No rate-limit headers.
    #[default]
    None,
    /// As Anthropic sends them: `anthropic-ratelimit-*-{limit,remaining,reset}`, the reset
    /// an RFC 3339 time (whole seconds) when the bucket is full again ([`SimReset::At`]).
    Anthropic,
    /// As OpenAI sends them: `x-ratelimit-{limit,remaining,reset}-*`, the reset a duration
    /// until the bucket is full again (`6m0s`, `12ms`; [`SimReset::In`]).
    OpenAi,
}

/// When a limit is full again, as a header says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimReset {
    /// At this time from the provider's creation, rounded up to whole seconds (an RFC 3339
    /// date, as Anthropic sends it).
    At(Duration),
    /// After this long, in whole milliseconds (a duration, as OpenAI sends it).
    In(Duration),
}

/// One limit's rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimLimitHeader {
    /// Which limit.
    pub dimension: SimDimension,
    /// The limit the provider enforces, per minute (`*-limit`): the published limit times
    /// the served fraction.
    pub limit: u64,
    /// What is left now, in whole units (`*-remaining`).
    pub remaining: u64,
    /// When the bucket is full again (`*-reset`).
    pub reset: SimReset,
}

/// The rate-limit headers of one answer (empty with [`SimHeaderStyle::None`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SimHeaders {
    /// One entry per limited dimension.
    pub limits: Vec<SimLimitHeader>,
}

/// How long the simulated provider takes to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SimLatency {
    /// Time to first byte of an accepted call.
    pub base: Duration,
    /// Added per output token produced.
    pub per_output_token: Duration,
    /// Time to answer a refusal (429 or 529).
    pub refusal: Duration,
}

impl Default for SimLatency {
    /// 300 ms + 15 ms per output token; refusals at once.
    fn default() -> Self {
        SimLatency {
            base: Duration::from_millis(300),
            per_output_token: Duration::from_millis(15),
            refusal: Duration::ZERO,
        }
    }
}

/// The simulated provider's behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The published limits.
    pub limits: SimLimits,
    /// Bucket size.
    pub capacity: SimCapacity,
    /// How output is charged.
    pub output_charge: OutputCharge,
    /// Whether a rate-limited call is charged too (its request and tokens, leaving at most
    /// one bucket of debt), as some providers count rejected requests against the limit.
    pub count_rejected: bool,
    /// What a 429 says about when to retry.
    pub retry_after: RetryAfter,
    /// Answer times (the fixed base unless [`SimConfig::answer_time`] draws it).
    pub latency: SimLatency,
    /// When set, each accepted call's time to first byte is drawn from it (in admission
    /// order), in place of [`SimLatency::base`]; the per-token time is still added. Answers
    /// of calls admitted together then come back in another order.
    pub answer_time: Option<SimDelay>,
    /// Time from a call's send to its arrival at the provider, drawn per call (in send
    /// order): admission or refusal, and the answer's rate-limit headers, happen on
    /// arrival, so calls sent close together arrive in another order.
    pub network_delay: SimDelay,
    /// The fraction α of the published limits actually served, from the start (0–1,
    /// resolved to thousandths).
    pub served: f64,
    /// Step changes of α: at each offset from the provider's creation, α becomes the
    /// given value. Sorted by offset.
    pub served_steps: Vec<(Duration, f64)>,
    /// Probability that a call is refused as overloaded (529), independently of the rate.
    pub overload_probability: f64,
    /// Seed of the generators that draw overloads, network delays and answer times (three
    /// independent streams, [`SimTimings`](crate::SimTimings)).
    pub seed: u64,
    /// Continuous buckets or fixed windows.
    pub window: SimWindow,
    /// Whether and how answers carry rate-limit headers ([`SimProvider::call_with_headers`](crate::SimProvider::call_with_headers)).
    pub headers: SimHeaderStyle,
}

impl SimConfig {
    /// `limits` with full-minute buckets, output charged at `max_tokens`, rejected calls
    /// not counted, `retry-after` in whole seconds, 300 ms + 15 ms per output token, no
    /// network delay, the whole limit served and no overloads.
    pub fn new(limits: SimLimits) -> Self {
        SimConfig {
            limits,
            capacity: SimCapacity::FullMinute,
            output_charge: OutputCharge::MaxTokens,
            count_rejected: false,
            retry_after: RetryAfter::WholeSeconds,
            latency: SimLatency::default(),
            answer_time: None,
            network_delay: SimDelay::ZERO,
            served: 1.0,
            served_steps: Vec::new(),
            overload_probability: 0.0,
            seed: 0,
            window: SimWindow::Continuous,
            headers: SimHeaderStyle::None,
        }
    }

    /// Continuous buckets or fixed windows.
    pub fn with_window(mut self, window: SimWindow) -> Self {
        self.window = window;
        self
    }

    /// Sends rate-limit headers in `style`.
    pub fn with_headers(mut self, style: SimHeaderStyle) -> Self {
        self.headers = style;
        self
    }

    /// Sets the bucket size.
    pub fn with_capacity(mut self, capacity: SimCapacity) -> Self {
        self.capacity = capacity;
        self
    }

    /// Sets how output is charged.
    pub fn with_output_charge(mut self, charge: OutputCharge) -> Self {
        self.output_charge = charge;
        self
    }

    /// Counts (or not) rate-limited calls against the limits.
    pub fn with_count_rejected(mut self, count: bool) -> Self {
        self.count_rejected = count;
        self
    }

    /// Sets what a 429 says about when to retry.
    pub fn with_retry_after(mut self, retry_after: RetryAfter) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// Sets the answer times.
    pub fn with_latency(mut self, latency: SimLatency) -> Self {
        self.latency = latency;
        self
    }

    /// Draws each accepted call's time to first byte from `delay` (see
    /// [`SimConfig::answer_time`]).
    pub fn with_answer_time(mut self, delay: SimDelay) -> Self {
        self.answer_time = Some(delay);
        self
    }

    /// Delays each call's arrival by a time drawn from `delay` (see
    /// [`SimConfig::network_delay`]).
    pub fn with_network_delay(mut self, delay: SimDelay) -> Self {
        self.network_delay = delay;
        self
    }

    /// Seeds every draw (overloads, network delays, answer times).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Serves only the fraction `alpha` of the published limits.
    pub fn with_served(mut self, alpha: f64) -> Self {
        self.served = alpha;
        self
    }

    /// Adds a step: from `at` after creation, the fraction `alpha` is served.
    pub fn with_served_step(mut self, at: Duration, alpha: f64) -> Self {
        self.served_steps.push((at, alpha));
        self.served_steps.sort_by_key(|(at, _)| *at);
        self
    }

    /// Refuses each call as overloaded with probability `p`, drawn from `seed`.
    pub fn with_overloads(mut self, p: f64, seed: u64) -> Self {
        self.overload_probability = p;
        self.seed = seed;
        self
    }
}
