//! What a provider implements: encode, send, decode; plus what its answers say about
//! limits, and how it counts tokens. Everything else is the pipeline's.

use std::fmt::Debug;
use std::sync::Mutex;

use crate::catalog::Dimension;
use crate::client::{Decision, DecisionRequest, EmbeddingPurpose};
use crate::error::Result;
use crate::limit::{AccountingRule, Feedback, SendMark};
use crate::request::LlmRequest;
use crate::response::LlmResponse;
use crate::stream::ResponseStream;
use crate::usage::Usage;

use super::estimate::{DefaultEstimator, TokenEstimator};

/// What one attempt's answer said besides its body: rate-limit headers and the
/// provider's retry advice. A transport fills it while sending; the pipeline reads it.
#[derive(Debug, Default)]
pub struct Signals {
    inner: Mutex<SignalValues>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct SignalValues {
    pub(crate) limits: Vec<(Dimension, u64)>,
    pub(crate) remaining: Vec<(Dimension, u64)>,
    pub(crate) resets: Vec<(Dimension, std::time::Duration)>,
    pub(crate) should_retry: Option<bool>,
}

impl SignalValues {
    /// One [`Feedback::Reported`] per dimension the headers spoke of, in the order the
    /// dimensions were first reported.
    pub(crate) fn feedback(&self, since: Option<SendMark>) -> Vec<Feedback> {
        let mut dimensions: Vec<Dimension> = Vec::new();
        let named = self
            .limits
            .iter()
            .chain(&self.remaining)
            .map(|(d, _)| *d)
            .chain(self.resets.iter().map(|(d, _)| *d));
        for d in named {
            if !dimensions.contains(&d) {
                dimensions.push(d);
            }
        }
        let last = |values: &[(Dimension, u64)], d: Dimension| {
            values.iter().rev().find(|(x, _)| *x == d).map(|(_, v)| *v)
        };
        dimensions
            .into_iter()
            .map(|dimension| Feedback::Reported {
                dimension,
                limit: last(&self.limits, dimension),
                remaining: last(&self.remaining, dimension),
                reset_in: self
                    .resets
                    .iter()
                    .rev()
                    .find(|(x, _)| *x == dimension)
                    .map(|(_, r)| *r),
                since,
            })
            .collect()
    }
}

impl Signals {
    /// The provider says its limit on `dimension` is `limit` per minute (e.g.
    /// `anthropic-ratelimit-tokens-limit`, `x-ratelimit-limit-requests`). A limit lower
    /// than the catalog's caps the bucket; it also sets the provider's refill rate, which
    /// says when the next request is allowed after a `remaining` of zero.
    pub fn limit(&self, dimension: Dimension, limit: u64) {
        self.lock().limits.push((dimension, limit));
    }

    /// What the limiter is told about this answer's rate-limit headers: one
    /// [`Feedback::Reported`] per dimension they spoke of. The pipeline passes these to
    /// the model's limiter; a client that drives a limiter itself (e.g. a benchmark) can
    /// do the same.
    pub fn feedback(&self) -> Vec<Feedback> {
        self.lock().feedback(None)
    }

    /// [`Signals::feedback`] for the answer to a request sent at `mark`
    /// ([`crate::limit::TokenBucketRateLimiter::send_mark`]): what is left is read as of
    /// when it was sent, so that the requests sent since (in flight) and what has
    /// refilled since are accounted for. This is what the pipeline does.
    pub fn feedback_since(&self, mark: SendMark) -> Vec<Feedback> {
        self.lock().feedback(Some(mark))
    }

    /// The provider says `remaining` is left of `dimension` (e.g.
    /// `anthropic-ratelimit-tokens-remaining`). The limiter lowers its bucket to it.
    pub fn remaining(&self, dimension: Dimension, remaining: u64) {
        self.lock().remaining.push((dimension, remaining));
    }

    /// The provider says `dimension` is *full* again in `reset_in` (e.g.
    /// `anthropic-ratelimit-tokens-reset`). With a remaining of zero, the next request is
    /// allowed once one unit has refilled at the provider's rate (`reset_in / limit`), or
    /// at the reset for a model whose catalog entry says `window = "fixed"`.
    pub fn reset_in(&self, dimension: Dimension, reset_in: std::time::Duration) {
        self.lock().resets.push((dimension, reset_in));
    }

    /// The provider's `x-should-retry` header: `false` vetoes a retry of a retryable
    /// failure; `true` allows retrying a rejected request (`ProviderRequestError`).
    pub fn should_retry(&self, retry: bool) {
        self.lock().should_retry = Some(retry);
    }

    pub(crate) fn take(&self) -> SignalValues {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SignalValues> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A provider's chat model, as the pipeline drives it. Implementations send once and
/// report failures by type ([`crate::Error`]); they never retry, sleep or rate-limit.
#[async_trait::async_trait]
pub trait ChatTransport: Send + Sync + Debug {
    /// Sends the request and decodes the whole answer.
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse>;

    /// Sends the request and decodes the answer as a stream of events ending with
    /// [`crate::StreamEvent::Completed`].
    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream>;

    /// How the provider counts a finished call against its limits.
    fn accounting(&self) -> AccountingRule {
        AccountingRule::default()
    }

    /// Estimates the request's input tokens before sending (reconciled at settle time).
    fn estimate_input_tokens(&self, request: &LlmRequest) -> u64 {
        DefaultEstimator.estimate_request(request)
    }

    /// Counts the request's input tokens with the provider's own counter, sent once with
    /// the transport's credential and not paced (a provider limits its counter apart
    /// from its answers; what its answer's rate-limit headers say is not the model's).
    ///
    /// The default, [`TokenCounting::Unsupported`], says the provider has no counter:
    /// the pipeline then answers with [`ChatTransport::estimate_input_tokens`].
    async fn count_input_tokens(&self, _request: &LlmRequest) -> TokenCounting {
        TokenCounting::Unsupported
    }
}

/// What [`ChatTransport::count_input_tokens`] gives.
#[derive(Debug)]
pub enum TokenCounting {
    /// The provider counted this many input tokens.
    Counted(u64),
    /// The provider's counter failed (an error answer, a connection failure, a body
    /// that does not decode).
    Failed(crate::Error),
    /// The provider has no counter.
    Unsupported,
}

/// What an embeddings transport returns: one raw vector per text, and the usage.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingsReply {
    /// One vector per text, in order, as the provider returned them.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens used (input only, for embeddings).
    pub usage: Usage,
}

/// A provider's embeddings model, as the pipeline drives it.
///
/// Returns raw vectors; the core makes every vector the deployment's width and unit
/// length, so every provider obeys the same rule.
///
/// **One HTTP request, one reservation**: each [`embed`](Self::embed) call sends exactly
/// one request to the provider. The pipeline splits a batch into chunks of at most
/// [`max_batch`](Self::max_batch) texts and reserves, retries and settles each chunk on
/// its own, so a retry re-sends only the chunk that failed.
#[async_trait::async_trait]
pub trait EmbeddingsTransport: Send + Sync + Debug {
    /// Embeds `texts` (never more than [`max_batch`](Self::max_batch) of them) in one
    /// request to the provider. `dimensions` is set when the catalog says the model takes
    /// a dimensions parameter: send it to the provider.
    async fn embed(
        &self,
        texts: &[String],
        purpose: EmbeddingPurpose,
        dimensions: Option<u64>,
        signals: &Signals,
    ) -> Result<EmbeddingsReply>;

    /// How the provider counts a finished call against its limits.
    fn accounting(&self) -> AccountingRule {
        AccountingRule::default()
    }

    /// The most texts one request to the provider takes (e.g. OpenAI 2048, Cohere on
    /// Bedrock 96, Titan 1). The default, `usize::MAX`, is for a provider whose one
    /// request takes any number of texts; a provider with a per-request maximum must
    /// declare it. A value of 0 is taken as 1.
    fn max_batch(&self) -> usize {
        usize::MAX
    }

    /// Estimates the input tokens of `texts` before sending.
    fn estimate_input_tokens(&self, texts: &[String]) -> u64 {
        texts
            .iter()
            .map(|t| DefaultEstimator.estimate_text(t))
            .sum()
    }
}

/// What a decision transport returns.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionReply {
    /// The probabilities.
    pub decision: Decision,
    /// Tokens used.
    pub usage: Usage,
}

/// A provider's decision model, as the pipeline drives it.
///
/// **One HTTP request, one reservation**: each [`decide`](Self::decide) call sends exactly
/// one request to the provider. A [`DecisionRequest`] with more questions than
/// [`max_batch`](Self::max_batch) is split by the pipeline into requests of at most that
/// many questions (same state, questions in order), each reserved, retried and settled on
/// its own; their answers are merged into one [`Decision`].
#[async_trait::async_trait]
pub trait DecisionTransport: Send + Sync + Debug {
    /// Answers every question of the request (never more than
    /// [`max_batch`](Self::max_batch) of them) in one request to the provider.
    async fn decide(&self, request: &DecisionRequest, signals: &Signals) -> Result<DecisionReply>;

    /// The most questions one request to the provider answers (the logprobs transport
    /// of `tollgate-openai`: 1). The default, `usize::MAX`, is for a provider that answers
    /// any number of questions in one request. A value of 0 is taken as 1.
    fn max_batch(&self) -> usize {
        usize::MAX
    }

    /// How the provider counts a finished call against its limits.
    fn accounting(&self) -> AccountingRule {
        AccountingRule::default()
    }

    /// Estimates the input tokens before sending.
    fn estimate_input_tokens(&self, request: &DecisionRequest) -> u64 {
        let questions: u64 = request
            .questions()
            .iter()
            .map(|q| DefaultEstimator.estimate_text(&format!("{q:?}")))
            .sum();
        DefaultEstimator.estimate_text(request.state()) + questions
    }
}
