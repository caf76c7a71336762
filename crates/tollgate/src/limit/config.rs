//! A limiter's configuration: the model's limits, how large its buckets are, aging.

use std::time::Duration;

use crate::catalog::{Dimension, Limits, ModelEntry, RateWindow};

pub(super) const DIMENSIONS: [Dimension; 4] = [
    Dimension::Requests,
    Dimension::Tokens,
    Dimension::InputTokens,
    Dimension::OutputTokens,
];

/// The longest pause a provider's `retry-after` can impose on a whole model.
pub const MAX_PROVIDER_PAUSE: Duration = Duration::from_secs(60);

/// How large a bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Burst {
    /// A full minute's limit (the default): `rpm = 60` allows 60 at once.
    #[default]
    FullMinute,
    /// `n` seconds of refill, at least one whole unit: for providers that enforce
    /// `60 rpm` as one request per second, use `Burst::Seconds(1)`.
    Seconds(u32),
}

impl Burst {
    /// The size of a bucket refilled at `limit` a minute.
    pub fn capacity(self, limit: u64) -> u64 {
        match self {
            Burst::FullMinute => limit,
            Burst::Seconds(s) => (u128::from(limit) * u128::from(s.min(60)) / 60)
                .max(1)
                .try_into()
                .unwrap_or(u64::MAX),
        }
    }
}

/// A limiter's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterConfig {
    /// The model id, for errors.
    pub model_id: String,
    /// Per-minute limits (0 = unlimited).
    pub limits: Limits,
    /// Bucket size.
    pub burst: Burst,
    /// Whether 429s and 529s slow the refill ([`super::throttle`]).
    pub adaptive: bool,
    /// Aging: a waiter that has waited this long ranks above every [`Priority`](super::Priority) class
    /// (promoted waiters go in arrival order), so no class starves. Default
    /// [`LimiterConfig::DEFAULT_AGING`] (30 s); zero makes the queue plain FIFO across classes;
    /// [`Duration::MAX`] turns aging off.
    pub aging: Duration,
    /// How the provider refills: decides how long a rate-limit header saying nothing is
    /// left holds the model back ([`Feedback::Reported`](super::Feedback::Reported)).
    pub window: RateWindow,
    /// How much later the first request out of a full bucket may reach the provider than
    /// the requests after it (a fresh connection's handshake against reused ones). The
    /// provider's full bucket starts draining only when that request arrives, so a grant
    /// out of a full bucket (or one within this long's refill of full) holds the refill
    /// this long, once per burst; a provider's report of what it has left ends the hold.
    /// Default
    /// [`LimiterConfig::DEFAULT_ARRIVAL_ALLOWANCE`] (500 ms); zero trusts the grant time.
    pub arrival_allowance: Duration,
}

impl LimiterConfig {
    /// How long a waiter waits before it is promoted above every class (the default of
    /// [`LimiterConfig::aging`]).
    pub const DEFAULT_AGING: Duration = Duration::from_secs(30);

    /// The default of [`LimiterConfig::arrival_allowance`]: a TLS handshake and more.
    pub const DEFAULT_ARRIVAL_ALLOWANCE: Duration = Duration::from_millis(500);

    /// Limits for `model_id` with a full-minute burst and the adaptive throttle on.
    pub fn new(model_id: impl Into<String>, limits: Limits) -> Self {
        LimiterConfig {
            model_id: model_id.into(),
            limits,
            burst: Burst::FullMinute,
            adaptive: true,
            aging: Self::DEFAULT_AGING,
            window: RateWindow::Continuous,
            arrival_allowance: Self::DEFAULT_ARRIVAL_ALLOWANCE,
        }
    }

    /// The configuration a catalog entry describes.
    pub fn for_model(model: &ModelEntry) -> Self {
        let burst = model.burst_seconds.map_or(Burst::FullMinute, |s| {
            Burst::Seconds(u32::try_from(s).unwrap_or(60))
        });
        LimiterConfig {
            burst,
            window: model.window,
            arrival_allowance: model
                .arrival_allowance_ms
                .map_or(Self::DEFAULT_ARRIVAL_ALLOWANCE, Duration::from_millis),
            ..Self::new(model.id.clone(), model.limits)
        }
    }

    /// Sets the burst.
    pub fn with_burst(mut self, burst: Burst) -> Self {
        self.burst = burst;
        self
    }

    /// Switches the adaptive throttle on or off.
    pub fn with_adaptive(mut self, adaptive: bool) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Sets the aging bound ([`LimiterConfig::aging`]).
    pub fn with_aging(mut self, aging: Duration) -> Self {
        self.aging = aging;
        self
    }

    /// Sets the arrival allowance ([`LimiterConfig::arrival_allowance`]).
    pub fn with_arrival_allowance(mut self, allowance: Duration) -> Self {
        self.arrival_allowance = allowance;
        self
    }

    /// Sets how the provider refills its limits.
    pub fn with_window(mut self, window: RateWindow) -> Self {
        self.window = window;
        self
    }
}
