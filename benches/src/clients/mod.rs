//! The client strategies compared in benchmarks 2 and 3. Each sends the same
//! [`SimRequest`]s to the same kind of [`SimProvider`]; they differ only in what they do
//! before sending and after a refusal.
//!
//! | strategy | before sending | after a 429 |
//! |---|---|---|
//! | tollgate | `TokenBucketRateLimiter::reserve` (adaptive throttle on) | `feedback` (a request's later 429s as `RateLimitedAgain`, as the pipeline does), retry through the limiter |
//! | tollgate (fixed) | the same, adaptive throttle off | the same |
//! | naive | nothing | sleep `retry-after`, else full-jitter backoff |
//! | cookbook | the OpenAI cookbook's float buckets ([`cookbook`]) | every caller pauses 15 s |
//! | governor | `check_n` per limit, sleeping until each conforms ([`governor`]) | like naive |
//! | cubic | the AWS SDK's adaptive token bucket ([`cubic`]) | CUBIC decrease, AWS backoff |
//! | aimd | a token bucket at an AIMD-controlled rate ([`aimd`]) | halve the rate |
//!
//! Every strategy makes at most [`MAX_ATTEMPTS`] sends per request (the AWS port
//! [`AWS_MAX_ATTEMPTS`], its SDK's default).

pub mod aimd;
pub mod cookbook;
pub mod cubic;
mod deficit;
pub mod governor;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::Usage;
use tollgate::catalog::Limits;
use tollgate::limit::{
    AccountingRule, Burst, Cost, CostDelta, Feedback, LimiterConfig, OutputAccounting, Reservation,
    TokenBucketRateLimiter,
};
use tollgate_sim::{
    OutputCharge, SimAnswer, SimCapacity, SimLimits, SimProvider, SimRefusal, SimRequest, SimRng,
};

/// Sends per request, first included, for every strategy but the AWS port.
pub const MAX_ATTEMPTS: u32 = 6;
/// Sends per request for the AWS port (the SDK's default in standard and adaptive modes).
pub const AWS_MAX_ATTEMPTS: u32 = 3;
/// Full-jitter backoff: the first retry waits up to this long, doubling each time.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Full-jitter backoff never waits longer than this.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// The AWS SDK's backoff cap (standard retry mode).
pub const AWS_BACKOFF_CAP: Duration = Duration::from_secs(20);

/// A client strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// tollgate's limiter with the adaptive throttle.
    Tollgate,
    /// tollgate's limiter with the adaptive throttle off.
    TollgateFixed,
    /// No pacing; retry on `retry-after` or full-jitter backoff.
    Naive,
    /// The OpenAI cookbook's parallel processor pacing.
    Cookbook,
    /// governor limiters on requests and tokens.
    Governor,
    /// A port of the AWS SDK's adaptive retry mode (CUBIC).
    Cubic,
    /// Additive increase, multiplicative decrease of a token bucket's rate.
    Aimd,
}

impl Strategy {
    /// Benchmark 2's clients.
    pub const PACING: [Strategy; 5] = [
        Strategy::Tollgate,
        Strategy::TollgateFixed,
        Strategy::Naive,
        Strategy::Cookbook,
        Strategy::Governor,
    ];

    /// Benchmark 3's controllers.
    pub const ADAPTIVE: [Strategy; 4] = [
        Strategy::Tollgate,
        Strategy::Cubic,
        Strategy::Aimd,
        Strategy::Naive,
    ];

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Tollgate => "tollgate",
            Strategy::TollgateFixed => "tollgate (adaptive off)",
            Strategy::Naive => "naive retry",
            Strategy::Cookbook => "openai cookbook",
            Strategy::Governor => "governor",
            Strategy::Cubic => "aws adaptive (cubic)",
            Strategy::Aimd => "aimd",
        }
    }

    /// Whether this is one of tollgate's.
    pub fn is_tollgate(self) -> bool {
        matches!(self, Strategy::Tollgate | Strategy::TollgateFixed)
    }

    fn max_attempts(self) -> u32 {
        if self == Strategy::Cubic {
            AWS_MAX_ATTEMPTS
        } else {
            MAX_ATTEMPTS
        }
    }
}

/// What a client is told about the provider: its published limits and bucket size, and how
/// it counts output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// The published limits.
    pub limits: SimLimits,
    /// The provider's bucket size (tollgate's `Burst`, governor's burst).
    pub capacity: SimCapacity,
    /// How the provider counts output (tollgate settles accordingly).
    pub output_charge: OutputCharge,
}

/// How one logical request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestOutcome {
    /// Accepted and answered.
    Answered,
    /// Refused on every attempt.
    GaveUp,
    /// The client refused it as larger than a bucket, without sending.
    TooLarge,
}

/// One logical request, as its caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRecord {
    /// Which caller.
    pub caller: usize,
    /// What it asked.
    pub request: SimRequest,
    /// When the caller issued it (from the provider's creation).
    pub issued_at: Duration,
    /// When the provider accepted the send that succeeded.
    pub accepted_at: Option<Duration>,
    /// When the caller got its final answer.
    pub finished_at: Duration,
    /// Sends to the provider.
    pub sends: u32,
    /// 429s received.
    pub rate_limited: u32,
    /// 529s received.
    pub overloaded: u32,
    /// How it ended.
    pub outcome: RequestOutcome,
}

/// What tollgate's limiter did, in order, for replaying against a shadow bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimiterEvent {
    /// A reservation was granted.
    Grant {
        /// When `reserve` was called.
        joined: Duration,
        /// When it was granted.
        at: Duration,
        /// What it reserved.
        cost: Cost,
    },
    /// A settlement corrected a reservation.
    Adjust {
        /// When.
        at: Duration,
        /// The correction.
        delta: CostDelta,
    },
}

enum Pacer {
    Tollgate {
        limiter: TokenBucketRateLimiter,
        rule: AccountingRule,
        log: Mutex<Vec<LimiterEvent>>,
    },
    Unpaced,
    Cookbook(cookbook::CookbookPacer),
    Governor(governor::GovernorPacer),
    Cubic(cubic::CubicPacer),
    Aimd(aimd::AimdPacer),
}

enum Permit {
    Reservation(Reservation),
    Free,
}

/// A client of one strategy in front of one simulated provider.
pub struct Client {
    strategy: Strategy,
    provider: SimProvider,
    pacer: Pacer,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("strategy", &self.strategy)
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

/// The catalog limits and burst tollgate is configured with for `config`.
pub fn tollgate_config(config: &ClientConfig, adaptive: bool) -> LimiterConfig {
    let l = config.limits;
    let limits = Limits {
        rpm: l.rpm,
        input_tpm: l.input_tpm,
        output_tpm: l.output_tpm,
        ..Limits::default()
    };
    let burst = match config.capacity {
        SimCapacity::FullMinute => Burst::FullMinute,
        SimCapacity::PerSecond => Burst::Seconds(1),
    };
    // The simulated provider is called in process: a request arrives the instant it is
    // sent, so none can arrive late and no allowance is needed.
    LimiterConfig::new("sim", limits)
        .with_burst(burst)
        .with_adaptive(adaptive)
        .with_arrival_allowance(std::time::Duration::ZERO)
}

impl Client {
    /// A client of `strategy` for `provider`, told `config`. Call inside the runtime
    /// whose clock it should use.
    pub fn new(strategy: Strategy, provider: SimProvider, config: &ClientConfig) -> Arc<Self> {
        let tollgate = |adaptive| Pacer::Tollgate {
            limiter: TokenBucketRateLimiter::new(tollgate_config(config, adaptive)),
            rule: AccountingRule {
                output: match config.output_charge {
                    OutputCharge::MaxTokens => OutputAccounting::Reserved,
                    OutputCharge::Actual => OutputAccounting::Actual,
                },
                ..AccountingRule::default()
            },
            log: Mutex::new(Vec::new()),
        };
        let pacer = match strategy {
            Strategy::Tollgate => tollgate(true),
            Strategy::TollgateFixed => tollgate(false),
            Strategy::Naive => Pacer::Unpaced,
            Strategy::Cookbook => Pacer::Cookbook(cookbook::CookbookPacer::new(config.limits)),
            Strategy::Governor => {
                Pacer::Governor(governor::GovernorPacer::new(config.limits, config.capacity))
            }
            Strategy::Cubic => Pacer::Cubic(cubic::CubicPacer::new()),
            Strategy::Aimd => Pacer::Aimd(aimd::AimdPacer::new(config.limits.rpm as f64 / 60.0)),
        };
        Arc::new(Client {
            strategy,
            provider,
            pacer,
        })
    }

    /// The strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The provider.
    pub fn provider(&self) -> &SimProvider {
        &self.provider
    }

    /// tollgate's limiter, for tollgate strategies.
    pub fn limiter(&self) -> Option<&TokenBucketRateLimiter> {
        match &self.pacer {
            Pacer::Tollgate { limiter, .. } => Some(limiter),
            _ => None,
        }
    }

    /// What tollgate's limiter granted and settled, in order (empty for other strategies).
    pub fn limiter_log(&self) -> Vec<LimiterEvent> {
        match &self.pacer {
            Pacer::Tollgate { log, .. } => log.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            _ => Vec::new(),
        }
    }

    /// Sends one logical request until it is answered, refused too often, or refused by
    /// the client as too large. `rng` draws backoff jitter.
    pub async fn run(&self, caller: usize, request: SimRequest, rng: &mut SimRng) -> RequestRecord {
        let issued_at = self.provider.elapsed();
        let mut record = RequestRecord {
            caller,
            request,
            issued_at,
            accepted_at: None,
            finished_at: issued_at,
            sends: 0,
            rate_limited: 0,
            overloaded: 0,
            outcome: RequestOutcome::GaveUp,
        };
        let attempts = self.strategy.max_attempts();
        for attempt in 0..attempts {
            let Some(permit) = self.acquire(request).await else {
                record.outcome = RequestOutcome::TooLarge;
                break;
            };
            record.sends += 1;
            match self.provider.call(request).await {
                Ok(answer) => {
                    self.on_answer(permit, &answer);
                    record.accepted_at = Some(answer.accepted_at);
                    record.outcome = RequestOutcome::Answered;
                    break;
                }
                Err(refusal) => {
                    // The pipeline tells the limiter a call's later 429s are no new signal.
                    let repeat = record.rate_limited > 0;
                    match refusal {
                        SimRefusal::RateLimited { .. } => record.rate_limited += 1,
                        SimRefusal::Overloaded => record.overloaded += 1,
                    }
                    self.on_refusal(permit, refusal, repeat);
                    if attempt + 1 < attempts {
                        let wait = self.retry_wait(attempt, refusal, rng);
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                    }
                }
            }
        }
        record.finished_at = self.provider.elapsed();
        record
    }

    /// Waits until the strategy lets `request` go; `None` if it refuses it as too large.
    async fn acquire(&self, request: SimRequest) -> Option<Permit> {
        match &self.pacer {
            Pacer::Tollgate { limiter, log, .. } => {
                let cost = Cost::call(request.input_tokens, request.max_output);
                let joined = self.provider.elapsed();
                match limiter.reserve(cost).await {
                    Ok(mut reservation) => {
                        let at = self.provider.elapsed();
                        log.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(LimiterEvent::Grant { joined, at, cost });
                        reservation.mark_sent();
                        Some(Permit::Reservation(reservation))
                    }
                    Err(tollgate::Error::TooLargeForBucket { .. }) => None,
                    Err(e) => panic!("unexpected limiter error: {e}"),
                }
            }
            Pacer::Unpaced => Some(Permit::Free),
            Pacer::Cookbook(c) => {
                c.acquire(request).await;
                Some(Permit::Free)
            }
            Pacer::Governor(g) => g.acquire(request).await.then_some(Permit::Free),
            Pacer::Cubic(c) => {
                c.acquire().await;
                Some(Permit::Free)
            }
            Pacer::Aimd(a) => {
                a.acquire().await;
                Some(Permit::Free)
            }
        }
    }

    fn on_answer(&self, permit: Permit, answer: &SimAnswer) {
        match (&self.pacer, permit) {
            (Pacer::Tollgate { limiter, rule, log }, Permit::Reservation(reservation)) => {
                limiter.feedback(Feedback::Success);
                let usage = Usage {
                    input_tokens: answer.input_tokens,
                    output_tokens: answer.output_tokens,
                    ..Usage::default()
                };
                let delta = rule.delta(&reservation.cost(), &usage);
                if !delta.is_zero() {
                    log.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(LimiterEvent::Adjust {
                            at: self.provider.elapsed(),
                            delta,
                        });
                }
                reservation.settle(&usage, *rule);
            }
            (Pacer::Cubic(c), _) => c.on_response(false),
            (Pacer::Aimd(a), _) => a.on_success(),
            _ => {}
        }
    }

    /// A refusal; `repeat` when the same request was refused with a 429 before.
    fn on_refusal(&self, permit: Permit, refusal: SimRefusal, repeat: bool) {
        let rate_limited = matches!(refusal, SimRefusal::RateLimited { .. });
        match &self.pacer {
            Pacer::Tollgate { limiter, .. } => {
                limiter.feedback(match refusal {
                    SimRefusal::RateLimited { retry_after } if repeat => {
                        Feedback::RateLimitedAgain { retry_after }
                    }
                    SimRefusal::RateLimited { retry_after } => {
                        Feedback::RateLimited { retry_after }
                    }
                    SimRefusal::Overloaded => Feedback::Overloaded { retry_after: None },
                });
                // The request was sent: dropping the reservation keeps its charge.
                drop(permit);
            }
            Pacer::Cookbook(c) if rate_limited => c.on_rate_limited(),
            Pacer::Cubic(c) => c.on_response(rate_limited),
            Pacer::Aimd(a) if rate_limited => a.on_rate_limited(),
            _ => {}
        }
    }

    fn retry_wait(&self, attempt: u32, refusal: SimRefusal, rng: &mut SimRng) -> Duration {
        match self.strategy {
            Strategy::Naive | Strategy::Governor => match refusal {
                SimRefusal::RateLimited {
                    retry_after: Some(wait),
                } => wait,
                _ => full_jitter(attempt, BACKOFF_BASE, BACKOFF_CAP, rng),
            },
            Strategy::Cubic => full_jitter(attempt, BACKOFF_BASE, AWS_BACKOFF_CAP, rng),
            Strategy::Tollgate | Strategy::TollgateFixed | Strategy::Cookbook | Strategy::Aimd => {
                Duration::ZERO
            }
        }
    }
}

/// Full-jitter backoff: uniform in `[0, min(cap, base · 2^attempt))`.
pub fn full_jitter(attempt: u32, base: Duration, cap: Duration, rng: &mut SimRng) -> Duration {
    let ceiling = base.saturating_mul(1 << attempt.min(20)).min(cap);
    ceiling.mul_f64(rng.unit())
}
