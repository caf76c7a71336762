//! A simulated provider that enforces rate limits the way real ones do, for benchmarks and
//! behaviour tests of client-side pacing.
//!
//! How a call flows through [`SimProvider::call`]:
//!
//! 0. it travels to the provider for its network delay ([`SimConfig::network_delay`],
//!    drawn per call, none by default): everything below happens on *arrival*, so calls
//!    sent close together can arrive in another order;
//! 1. with probability [`SimConfig::overload_probability`] (seeded, so deterministic) the
//!    call is refused as *overloaded* (a 529), whatever the rate: capacity is untouched;
//! 2. the buckets (requests, input tokens, output tokens; exact and continuous, see
//!    [`ContinuousBucket`]) are brought up to now; if the call's charge fits every one it
//!    is *accepted* and charged, else refused as *rate limited* (a 429) with a
//!    `retry-after` ([`RetryAfter`]), and charged anyway if
//!    [`SimConfig::count_rejected`];
//! 3. an accepted call answers after its answer time (by default the fixed
//!    [`SimLatency`], e.g. 300 ms + 15 ms per output token; drawn per call from
//!    [`SimConfig::answer_time`] if set, so calls admitted together come back in another
//!    order), on tokio's clock, so a paused clock makes ten simulated minutes take
//!    milliseconds; calls are answered concurrently, each on its own timer; when output is
//!    charged as produced ([`OutputCharge::Actual`]) the unused part of the output limit
//!    is given back then. Its rate-limit headers are those of the moment it was admitted
//!    (or refused), as a real provider computes them.
//!
//! The provider publishes its limits but can serve only a fraction α of them
//! ([`SimConfig::served`], [`SimConfig::served_steps`], [`SimProvider::set_served`]): rate
//! and capacity both scale by α. Every call is journaled ([`SimProvider::journal`]) and
//! counted ([`SimProvider::stats`]) for reports.
//!
//! It knows nothing of HTTP or of tollgate's request types: a call is three numbers
//! ([`SimRequest`]), so any client strategy can be measured against it.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_sim::{SimConfig, SimLimits, SimProvider, SimRefusal, SimRequest};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let provider = SimProvider::new(SimConfig::new(SimLimits { rpm: 2, ..SimLimits::default() }));
//! let request = SimRequest::new(100, 50, 20);
//! assert!(provider.call(request).await.is_ok());
//! assert!(provider.call(request).await.is_ok());
//! // The third within the minute is refused, with the wait until one request refills.
//! match provider.call(request).await {
//!     Err(SimRefusal::RateLimited { retry_after }) => assert!(retry_after.is_some()),
//!     other => panic!("expected a 429, got {other:?}"),
//! }
//! assert_eq!(provider.stats().rate_limited, 1);
//! # }
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tollgate::provider::clock;

use crate::bucket::{ContinuousBucket, FRACTION_ONE, Spilled};
use crate::rng::SimRng;
use crate::{
    OutputCharge, RetryAfter, SimAnswer, SimCall, SimCharge, SimConfig, SimDimension,
    SimHeaderStyle, SimHeaders, SimLimitHeader, SimOutcome, SimRefusal, SimRequest, SimReset,
    SimStats, SimTimings, SimWindow,
};

/// The simulated provider. Cheap to clone; clones share the buckets and the journal.
#[derive(Clone)]
pub struct SimProvider {
    shared: Arc<Shared>,
}

struct Shared {
    config: SimConfig,
    epoch: Instant,
    state: Mutex<SimState>,
}

struct SimState {
    buckets: [Option<ContinuousBucket>; 3],
    fraction: u32,
    next_step: usize,
    rng: SimRng,
    timings: SimTimings,
    journal: Vec<SimCall>,
    stats: SimStats,
}

impl fmt::Debug for SimProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimProvider")
            .field("config", &self.shared.config)
            .field("stats", &self.stats())
            .finish()
    }
}

fn fraction_milli(alpha: f64) -> u32 {
    (alpha.clamp(0.001, 1.0) * f64::from(FRACTION_ONE)).round() as u32
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl SimProvider {
    /// A provider with full buckets; its clock starts now (tokio's clock).
    pub fn new(config: SimConfig) -> Self {
        let l = config.limits;
        let bucket = |limit: u64| {
            (limit > 0).then(|| match config.window {
                SimWindow::Continuous => {
                    ContinuousBucket::new(limit, config.capacity.tokens(limit))
                }
                SimWindow::Fixed => {
                    ContinuousBucket::fixed_window(limit, config.capacity.tokens(limit))
                }
            })
        };
        let fraction = fraction_milli(config.served);
        let mut buckets = [bucket(l.rpm), bucket(l.input_tpm), bucket(l.output_tpm)];
        for b in buckets.iter_mut().flatten() {
            b.set_fraction(fraction, 0);
        }
        let state = SimState {
            buckets,
            fraction,
            next_step: 0,
            rng: SimRng::new(config.seed),
            timings: SimTimings::new(&config),
            journal: Vec::new(),
            stats: SimStats::default(),
        };
        SimProvider {
            shared: Arc::new(Shared {
                config,
                epoch: clock::now(),
                state: Mutex::new(state),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.shared.config
    }

    /// When the provider was created (its time origin).
    pub fn epoch(&self) -> Instant {
        self.shared.epoch
    }

    /// Time since creation, on tokio's clock.
    pub fn elapsed(&self) -> Duration {
        clock::now().saturating_duration_since(self.shared.epoch)
    }

    /// The capacity of each limited dimension at the whole published limit (0 where
    /// unlimited).
    pub fn capacity(&self) -> SimCharge {
        let l = self.shared.config.limits;
        let c = |limit: u64| {
            if limit == 0 {
                0
            } else {
                self.shared.config.capacity.tokens(limit)
            }
        };
        SimCharge {
            requests: c(l.rpm),
            input_tokens: c(l.input_tpm),
            output_tokens: c(l.output_tpm),
        }
    }

    /// What each limited dimension's bucket has lost to overflow so far (refill while
    /// full, refunds over capacity); zero where unlimited. Capacity lost this way is lost
    /// to every client: it bounds the goodput any pacing can reach.
    pub fn spilled(&self, dimension: SimDimension) -> Spilled {
        let mut state = self.lock();
        let now = self.now_ns();
        state.advance(&self.shared.config, now);
        state.buckets[dimension as usize]
            .as_ref()
            .map_or_else(Spilled::default, ContinuousBucket::spilled)
    }

    /// The fraction of the published limits served now.
    pub fn served(&self) -> f64 {
        let mut state = self.lock();
        let now = self.now_ns();
        state.advance(&self.shared.config, now);
        f64::from(state.fraction) / f64::from(FRACTION_ONE)
    }

    /// Serves the fraction `alpha` of the published limits from now on.
    pub fn set_served(&self, alpha: f64) {
        let mut state = self.lock();
        let now = self.now_ns();
        state.advance(&self.shared.config, now);
        state.set_fraction(fraction_milli(alpha), now);
    }

    /// Every call so far, in arrival order.
    pub fn journal(&self) -> Vec<SimCall> {
        self.lock().journal.clone()
    }

    /// Counters so far.
    pub fn stats(&self) -> SimStats {
        self.lock().stats
    }

    /// Makes one call: it arrives after its network delay, then is refused at once (after
    /// [`SimLatency::refusal`](crate::SimLatency::refusal)) with a 529 or a 429, or
    /// accepted and answered after its answer time.
    ///
    /// The answer's bookkeeping (the output refund under [`OutputCharge::Actual`], the
    /// journal's completion time) happens when the future completes: drop it and the call
    /// stays charged as accepted (or, dropped before it arrived, never reaches the
    /// provider).
    pub async fn call(&self, request: SimRequest) -> Result<SimAnswer, SimRefusal> {
        self.call_with_headers(request).await.0
    }

    /// [`SimProvider::call`], with the answer's rate-limit headers (as of the moment the
    /// call was admitted or refused; empty unless [`SimConfig::headers`] asks for them).
    pub async fn call_with_headers(
        &self,
        request: SimRequest,
    ) -> (Result<SimAnswer, SimRefusal>, SimHeaders) {
        let request = SimRequest::new(
            request.input_tokens,
            request.max_output,
            request.actual_output,
        );
        let config = &self.shared.config;
        let on_the_way = self.lock().timings.next_network_delay();
        if !on_the_way.is_zero() {
            tokio::time::sleep(on_the_way).await;
        }
        let (admitted, headers) = {
            let mut state = self.lock();
            let now = self.now_ns();
            let admitted = state.admit(config, request, now).map(|(id, at)| {
                let answer_time = state.timings.next_answer_time(request.actual_output);
                (id, at, answer_time)
            });
            (admitted, state.headers(config.headers, now))
        };
        let (id, accepted_at, answer_time) = match admitted {
            Ok(admitted) => admitted,
            Err(refusal) => {
                if !config.latency.refusal.is_zero() {
                    tokio::time::sleep(config.latency.refusal).await;
                }
                return (Err(refusal), headers);
            }
        };
        tokio::time::sleep(answer_time).await;
        (self.answer(request, id, accepted_at), headers)
    }

    /// Completes an admitted call whose answer time has passed.
    fn answer(
        &self,
        request: SimRequest,
        id: u64,
        accepted_at: Duration,
    ) -> Result<SimAnswer, SimRefusal> {
        let config = &self.shared.config;
        let mut state = self.lock();
        let now = self.now_ns();
        state.advance(config, now);
        let finished_at = Duration::from_nanos(now);
        if config.output_charge == OutputCharge::Actual {
            let unused = request.max_output - request.actual_output;
            if let Some(b) = &mut state.buckets[2] {
                b.give(unused);
            }
            state.stats.accepted_charge.output_tokens -= unused;
        }
        state.stats.completed += 1;
        if let Some(call) = usize::try_from(id)
            .ok()
            .and_then(|i| state.journal.get_mut(i))
        {
            call.completed_at = Some(finished_at);
            if config.output_charge == OutputCharge::Actual {
                call.charged.output_tokens = request.actual_output;
            }
        }
        Ok(SimAnswer {
            id,
            input_tokens: request.input_tokens,
            output_tokens: request.actual_output,
            accepted_at,
            finished_at,
        })
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ns(&self) -> u64 {
        nanos(clock::now().saturating_duration_since(self.shared.epoch))
    }
}

impl SimState {
    /// The rate-limit headers an answer sent at `now` carries, in `style`.
    fn headers(&self, style: SimHeaderStyle, now: u64) -> SimHeaders {
        if style == SimHeaderStyle::None {
            return SimHeaders::default();
        }
        let limits = SimDimension::ALL
            .iter()
            .zip(&self.buckets)
            .filter_map(|(d, b)| {
                let b = b.as_ref()?;
                let full_in = b.full_in_ns(now);
                let reset = match style {
                    SimHeaderStyle::Anthropic => SimReset::At(Duration::from_secs(
                        now.saturating_add(full_in).div_ceil(1_000_000_000),
                    )),
                    _ => SimReset::In(Duration::from_millis(full_in.div_ceil(1_000_000))),
                };
                Some(SimLimitHeader {
                    dimension: *d,
                    limit: b.limit() * u64::from(b.fraction_milli()) / u64::from(FRACTION_ONE),
                    remaining: b.remaining_tokens(),
                    reset,
                })
            })
            .collect();
        SimHeaders { limits }
    }

    /// Applies the step changes due by `now` (each at its own instant), then refills.
    fn advance(&mut self, config: &SimConfig, now: u64) {
        while let Some(&(at, alpha)) = config.served_steps.get(self.next_step) {
            let at = nanos(at);
            if at > now {
                break;
            }
            self.set_fraction(fraction_milli(alpha), at);
            self.next_step += 1;
        }
        for b in self.buckets.iter_mut().flatten() {
            b.refill(now);
        }
    }

    fn set_fraction(&mut self, fraction: u32, at: u64) {
        self.fraction = fraction;
        for b in self.buckets.iter_mut().flatten() {
            b.set_fraction(fraction, at);
        }
    }

    /// Decides a call's fate at `now`; on acceptance returns its id and time.
    fn admit(
        &mut self,
        config: &SimConfig,
        request: SimRequest,
        now: u64,
    ) -> Result<(u64, Duration), SimRefusal> {
        self.advance(config, now);
        let id = self.journal.len() as u64;
        let at = Duration::from_nanos(now);
        self.stats.calls += 1;
        let mut call = SimCall {
            id,
            at,
            request,
            outcome: SimOutcome::Accepted,
            charged: SimCharge::default(),
            completed_at: None,
        };
        if config.overload_probability > 0.0 && self.rng.chance(config.overload_probability) {
            call.outcome = SimOutcome::Overloaded;
            self.stats.overloaded += 1;
            self.journal.push(call);
            return Err(SimRefusal::Overloaded);
        }
        let charge = SimCharge::admission(&request);
        let short = SimDimension::ALL
            .iter()
            .zip(&self.buckets)
            .find_map(|(d, b)| {
                b.as_ref()
                    .filter(|b| !b.fits(charge.on(*d)))
                    .map(|b| (*d, !b.can_ever_fit(charge.on(*d))))
            });
        let Some((dimension, oversize)) = short else {
            for (d, b) in SimDimension::ALL.iter().zip(self.buckets.iter_mut()) {
                if let Some(b) = b {
                    b.take(charge.on(*d));
                }
            }
            call.charged = charge;
            self.stats.accepted += 1;
            self.stats.accepted_charge = self.stats.accepted_charge.plus(&charge);
            self.journal.push(call);
            return Ok((id, at));
        };
        // Refused: when to come back is the longest wait over the limits; a call that can
        // never fit is told to wait for a whole bucket to refill.
        let wait_ns = SimDimension::ALL
            .iter()
            .zip(&self.buckets)
            .filter_map(|(d, b)| {
                b.as_ref()
                    .map(|b| b.wait_ns(charge.on(*d)).unwrap_or(b.full_refill_ns()))
            })
            .max()
            .unwrap_or(0);
        if config.count_rejected {
            for (d, b) in SimDimension::ALL.iter().zip(self.buckets.iter_mut()) {
                if let Some(b) = b {
                    b.take_bounded(charge.on(*d));
                }
            }
            call.charged = charge;
            self.stats.wasted_charge = self.stats.wasted_charge.plus(&charge);
        }
        call.outcome = SimOutcome::RateLimited {
            dimension,
            oversize,
        };
        self.stats.rate_limited += 1;
        self.stats.oversize += u64::from(oversize);
        self.journal.push(call);
        let retry_after = match config.retry_after {
            RetryAfter::None => None,
            RetryAfter::Exact => Some(Duration::from_nanos(wait_ns)),
            RetryAfter::WholeSeconds => Some(Duration::from_secs(wait_ns.div_ceil(1_000_000_000))),
        };
        Err(SimRefusal::RateLimited { retry_after })
    }
}
