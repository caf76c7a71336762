//! What a failed attempt means, decided in one place: whether and when the call tries
//! again, what the model's limiter learns, how the attempt's reservation and spend hold
//! settle, whether the circuit breaker counts it, whether a fallback chain moves on, and
//! the error's stable kind. The attempt loop, the breaker, records, spans and the
//! fallback chain read the [`Verdict`]; none of them matches the error again.

use std::time::Duration;

use crate::error::{ConnectionCause, Error, ProviderError};
use crate::limit::Feedback;
use crate::usage::Usage;

/// What is known about a failed attempt besides its error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailureContext {
    /// An earlier attempt of the same call met a 429: its repeats are one refusal of our
    /// rate, not new ones.
    pub rate_limited_before: bool,
    /// The provider's own word on retrying (OpenAI's `x-should-retry`), when it sent one.
    pub should_retry: Option<bool>,
    /// The call is a member of a fallback chain: a 429 moves it to the chain's next model
    /// instead of waiting here.
    pub in_chain: bool,
    /// The model has several deployments: after a 429 the retry goes at once, to whichever
    /// deployment's limiter can serve (the refusing one's holds the provider's wait).
    pub several_deployments: bool,
    /// The attempt was a stream that had already delivered events to the reader: never
    /// sent again, so no text is ever delivered twice.
    pub delivered: bool,
}

/// Whether, and how soon, the call tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retry {
    /// Final for this call.
    Never,
    /// At once: the limiter holds whatever wait is due.
    Now,
    /// After the retry policy's back-off (full jitter).
    Backoff,
    /// No sooner than the provider said (its `retry-after`).
    After(Duration),
}

/// How the attempt's reservation and spend-cap hold settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settle {
    /// Refused before any work, or never reached the provider: the request counts, its
    /// tokens are given back, and the spend hold is released at nothing.
    KeepRequest,
    /// The provider may have done (and billed) the work: the reservation keeps all it
    /// took, and the spend hold settles at the worst case.
    KeepAll,
    /// The provider answered with a refusal and billed it: both settle at this usage.
    AtUsage(Usage),
}

/// What the attempt says about the model's health, for its circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// A server-side failure (5xx, 529, timeout, malformed answer, broken connection):
    /// counts towards opening the circuit.
    Failing,
    /// Says nothing about health (a 4xx, a 429, a refusal, a local limit).
    Unknown,
}

/// The one decision about a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// The error's stable snake_case kind ([`Error::kind`]), for records, spans and
    /// metrics.
    pub kind: &'static str,
    /// Whether and when to try again (before the retry budget and the call's deadline,
    /// which the attempt loop applies).
    pub retry: Retry,
    /// What the model's limiter is told.
    pub feedback: Option<Feedback>,
    /// How the attempt's holdings settle.
    pub settle: Settle,
    /// What the circuit breaker counts.
    pub health: Health,
    /// A fallback chain moves on to its next model (a 429 inside a chain).
    pub next_model: bool,
}

/// The verdict on an attempt that failed with `error`.
pub fn verdict(error: &Error, cx: &FailureContext) -> Verdict {
    let provider = match error {
        Error::Provider(p) => Some(p),
        _ => None,
    };
    let rate_limited = matches!(provider, Some(ProviderError::RateLimited { .. }));
    Verdict {
        kind: error.kind(),
        retry: retry(error, provider, cx),
        feedback: feedback(provider, cx),
        settle: settle(error, cx),
        health: match provider {
            Some(ProviderError::RateLimited { .. }) | None => Health::Unknown,
            Some(_) => Health::Failing,
        },
        next_model: rate_limited && cx.in_chain && !cx.delivered,
    }
}

fn retry(error: &Error, provider: Option<&ProviderError>, cx: &FailureContext) -> Retry {
    let retryable = match cx.should_retry {
        Some(false) => false,
        // The provider vouches for retrying a request it rejected (e.g. a 409 lock).
        Some(true) => provider.is_some() || matches!(error, Error::ProviderRequest(_)),
        None => provider.is_some(),
    };
    if !retryable || cx.delivered {
        return Retry::Never;
    }
    match provider {
        Some(ProviderError::RateLimited { .. }) if cx.in_chain => Retry::Never,
        Some(ProviderError::RateLimited { .. }) if cx.several_deployments => Retry::Now,
        Some(p) => p.retry_after().map_or(Retry::Backoff, Retry::After),
        None => Retry::Backoff,
    }
}

fn feedback(provider: Option<&ProviderError>, cx: &FailureContext) -> Option<Feedback> {
    match provider? {
        // One call refused again and again is one refusal of our rate.
        ProviderError::RateLimited { retry_after } if cx.rate_limited_before => {
            Some(Feedback::RateLimitedAgain {
                retry_after: *retry_after,
            })
        }
        ProviderError::RateLimited { retry_after } => Some(Feedback::RateLimited {
            retry_after: *retry_after,
        }),
        ProviderError::Overloaded { retry_after, .. } => Some(Feedback::Overloaded {
            retry_after: *retry_after,
        }),
        // Not a word on our rate: the breaker counts these, the limiter does not.
        ProviderError::Server { .. }
        | ProviderError::Timeout { .. }
        | ProviderError::Malformed { .. }
        | ProviderError::Connection { .. } => None,
    }
}

fn settle(error: &Error, cx: &FailureContext) -> Settle {
    // Every variant decides here, with no wildcard: a new one must say whether the
    // provider did (and billed) work.
    match error {
        Error::ProviderRefusal { usage, .. } => Settle::AtUsage(*usage),
        // Part of the answer reached the reader: the provider did the work.
        _ if cx.delivered => Settle::KeepAll,
        // A codec refused the request before sending it: nothing reached the provider.
        Error::UnsupportedSetting { .. } => Settle::KeepRequest,
        Error::Provider(p) => match p {
            // Refused before any work: only the request counts.
            ProviderError::RateLimited { .. } | ProviderError::Overloaded { .. } => {
                Settle::KeepRequest
            }
            ProviderError::Connection { cause, .. } => match cause {
                // Never reached the provider.
                ConnectionCause::Refused | ConnectionCause::Dns | ConnectionCause::Tls => {
                    Settle::KeepRequest
                }
                // It may have arrived and been worked on.
                ConnectionCause::Reset | ConnectionCause::ClosedEarly | ConnectionCause::Other => {
                    Settle::KeepAll
                }
            },
            // The provider may have done (and billed) the work.
            ProviderError::Server { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::Malformed { .. } => Settle::KeepAll,
        },
        // Rejected before any generation: the request counts, its tokens do not.
        Error::ProviderRequest(_)
        | Error::QuotaExhausted { .. }
        | Error::ContextWindowExceeded { .. } => Settle::KeepRequest,
        // Answered, so worked on and billed.
        Error::OutputTruncated { .. }
        | Error::ShapeInvalid { .. }
        | Error::StreamInterrupted { .. }
        | Error::ResponseTooLarge { .. }
        | Error::EmbeddingShape { .. }
        | Error::UnmatchedRequest { .. } => Settle::KeepAll,
        // The attempt ended on our side after it was sent (or failed before it left):
        // nothing is known of the provider's work, so the charge stays (never too low).
        Error::Cancelled
        | Error::BatchLineUnfinished { .. }
        | Error::QueueClosed
        | Error::WouldWait { .. }
        | Error::LimiterUnavailable { .. }
        | Error::TooLargeForBucket { .. }
        | Error::SpendCapExceeded { .. }
        | Error::CircuitOpen { .. }
        | Error::Catalog(_)
        | Error::Credential(_)
        | Error::UnknownModel { .. }
        | Error::ProviderNotLinked { .. }
        | Error::WrongModelKind { .. }
        | Error::Unsupported { .. }
        | Error::DuplicateProvider { .. }
        | Error::InvalidRequest { .. }
        | Error::Decode { .. }
        | Error::ReplayStore { .. } => Settle::KeepAll,
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
