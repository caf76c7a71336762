//! The call pipeline: the lifecycle every provider shares, written once.
//!
//! For each call that [`crate::Models`] hands out a client for:
//!
//! 1. **price** it: input tokens estimated by the transport, plus the output limit
//!    (the request's, or the catalog's default, never above the ceiling);
//! 2. **spend cap**: hold the worst-case cost on the job's [`SpendCap`], or fail with
//!    `SpendCapExceeded` before anything is sent;
//! 3. **limiter**: reserve on the model's buckets, waiting holding nothing (or fail at
//!    once with `TooLargeForBucket`); check the model's [`CircuitBreaker`];
//! 4. **send** through the provider's transport, the only per-provider part;
//! 5. **classify** by error type: retryable failures wait (the provider's `retry-after`
//!    when it sent one, else full-jitter back-off) and go again from step 2 with fresh holdings, within the
//!    job's retry budget; everything else is final;
//! 6. **settle** the reservation against reported usage, feed the adaptive throttle and
//!    the breaker, cost the call from catalog prices, settle the spend cap, **record**.
//!
//! Then, for chat: an answer cut off below the model's ceiling is re-run once at the
//! ceiling; an answer that fails its declared JSON Schema is sent back with what was
//! wrong, up to [`MAX_CORRECTIONS`] times; a refusal becomes `ProviderRefusal`. Streams
//! are retried only before their first event reaches the reader; later failures end the
//! stream with `StreamInterrupted`, so no text is ever sent twice. See
//! `docs/failures.md`.

mod answer;
mod answer_stream;
mod attempt;
mod breaker;
mod call;
mod chat;
mod config;
mod decision;
mod embeddings;
mod fallback_chat;
mod finish;
mod job;
mod record;
mod retry;
mod runtime;
mod server;
mod shape;
mod telemetry;
mod verdict;

pub use answer::judge_answer;
pub use breaker::{BreakerConfig, CircuitBreaker};
pub use config::{MAX_CORRECTIONS, PipelineConfig};
pub use fallback_chat::FallbackOptions;
pub use job::{JobContext, SpendCap, SpendHold, SpendLedger};
pub use record::{
    AttemptRecord, CallRecord, JsonLinesRecorder, MemoryRecorder, NoRecorder, Outcome, Recorder,
};
pub use retry::RetryPolicy;
pub use verdict::{FailureContext, Health, Retry, Settle, Verdict, verdict};

// The provider seam, defined in `crate::provider` (the layer below the pipeline: the
// pipeline drives the transports, the transports never see the pipeline), and kept
// here at the paths applications and provider crates have used.
pub use crate::provider::labels;
pub use crate::provider::{
    ByteBoundEstimator, DefaultEstimator, IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, PDF_PAGE_TOKENS,
    REQUEST_OVERHEAD_TOKENS, TokenEstimator,
};
pub use crate::provider::{
    ChatTransport, DecisionReply, DecisionTransport, EmbeddingsReply, EmbeddingsTransport, Signals,
    TokenCounting, parse_retry_after,
};
#[cfg(feature = "tiktoken")]
pub use crate::provider::{TiktokenEncoding, TiktokenEstimator};

pub(crate) use chat::PipelineChat;
pub(crate) use decision::PipelineDecision;
pub(crate) use embeddings::PipelineEmbeddings;
pub(crate) use fallback_chat::FallbackChat;
pub(crate) use runtime::{DeploymentRuntime, ModelRuntime};
pub(crate) use server::Server;
