//! The error taxonomy (DESIGN §4).
//!
//! Retry decisions are made by *type*: [`Error::Provider`] holds exactly the retryable
//! failures ([`ProviderError`]), so one match arm catches all of them and nothing else.
//! Every other variant is final for the call that produced it.

use std::fmt;
use std::time::Duration;

use crate::catalog::{CatalogError, Dimension, UnknownModel};
use crate::credentials::CredentialError;
use crate::usage::Usage;

mod provider;

pub use provider::{ConnectionCause, ProviderError, ProviderRequestError};

/// Shorthand for results whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in tollgate, grouped so that `Error::Provider(_)` is
/// exactly the retryable set.
///
/// The pipeline has already retried what is retryable by the time a client returns, so
/// an `Error::Provider(_)` reaching the caller means the budget ran out; every other
/// variant is final for the call, and its message says what to change.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Error, ProviderError};
///
/// /// What a batch job does with a failed item.
/// fn next_step(error: &Error) -> &'static str {
///     match error {
///         // 429, 529, 5xx, timeouts, malformed answers, dropped connections.
///         Error::Provider(e) if e.retry_after_ms().is_some() => "requeue after the provider's wait",
///         Error::Provider(_) => "requeue later",
///         Error::QuotaExhausted { .. } => "stop the job: out of credit",
///         Error::ProviderRefusal { .. } | Error::ContextWindowExceeded { .. } => "skip the item",
///         _ => "fail the item",
///     }
/// }
///
/// let throttled = Error::from(ProviderError::RateLimited { retry_after: Some(Duration::from_secs(5)) });
/// assert_eq!(next_step(&throttled), "requeue after the provider's wait");
/// assert!(throttled.to_string().contains("429"));
/// ```
///
/// Exhaustive on purpose (no `#[non_exhaustive]`): the places that decide what a failure
/// means (the retry verdict, the gateway's answer, the command's re-run rule) match every
/// variant with no wildcard, so a new variant does not compile until each of them
/// decides.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A transient provider failure; the retry engine retries these.
    #[error(transparent)]
    Provider(#[from] ProviderError),

    /// The provider rejected the request itself (a 4xx other than 429). Never retried:
    /// the request must change.
    #[error(transparent)]
    ProviderRequest(#[from] ProviderRequestError),

    /// The account is out of money or quota. Never retried, even when sent as a 429.
    #[error(
        "provider `{provider}` reports the account's quota or credit is exhausted: {message}; \
         add credit or raise the quota (retrying will not help)"
    )]
    QuotaExhausted {
        /// Provider key, e.g. `openai`.
        provider: String,
        /// What the provider said.
        message: String,
    },

    /// The model declined to answer, or a content filter or guardrail stopped it.
    /// Never retried on that model. The provider bills a refused answer: `usage` is what
    /// it reported, and the pipeline settles the reservation and the spend cap with it
    /// and records its cost. Build one with [`Error::refusal`].
    #[error(
        "the model refused to answer ({category}){}: {explanation}",
        Delivered(*delivered_events)
    )]
    ProviderRefusal {
        /// The provider's refusal category: Anthropic's `stop_details.category` (e.g.
        /// `cyber`), `refusal`, or the filter's stop reason (`content_filter`,
        /// `guardrail_intervened`, `content_filtered`).
        category: String,
        /// The provider's explanation (or the refusal text), if it gave one.
        explanation: String,
        /// The tokens the provider reported for the refused answer (billed).
        usage: Usage,
        /// For a stream: how many events had reached the reader before the refusal
        /// ended it (0 for a single response, or a refusal before the first event).
        delivered_events: u64,
    },

    /// The answer was cut off even at the model's full output ceiling.
    #[error(
        "model `{model_id}` was cut off at its output ceiling of {max_output_tokens} tokens; \
         ask for a shorter answer or split the task"
    )]
    OutputTruncated {
        /// Catalog model id.
        model_id: String,
        /// The ceiling from the catalog (`max_output_tokens`).
        max_output_tokens: u64,
    },

    /// The call does not fit the model's context window: tollgate's input estimate plus the
    /// output limit exceeds the catalog's `context_window` (checked before sending), or the
    /// provider itself reported a context overflow (OpenAI's `context_length_exceeded`;
    /// Anthropic's, Bedrock's and Gemini's 400 for a too-long input; Anthropic's and
    /// Bedrock's `model_context_window_exceeded` stop reason). Never
    /// retried on that model; a fallback chain may move it to a model with a larger window
    /// ([`crate::pipeline::FallbackOptions::on_context_overflow`]).
    #[error(
        "a call to model `{model_id}` needs about {needed} tokens (input estimate plus output \
         limit), more than its context window{}; shorten the input, lower the output limit, \
         or use a model with a larger window",
        Window(*window)
    )]
    ContextWindowExceeded {
        /// Catalog model id.
        model_id: String,
        /// Tokens the call needs: tollgate's input estimate plus the output limit.
        needed: u64,
        /// The catalog's `context_window`; `None` when the catalog sets none (the provider
        /// reported the overflow).
        window: Option<u64>,
    },

    /// The answer failed the request's declared JSON Schema after every correction.
    #[error(
        "the answer does not match the declared response shape after all corrections: {}",
        errors.join("; ")
    )]
    ShapeInvalid {
        /// What was wrong with the last answer, one entry per violation.
        errors: Vec<String>,
    },

    /// One call needs more than a whole bucket of the model's limit: it can never be sent.
    #[error(
        "one call to model `{model_id}` needs {needed} {dimension} but its bucket holds at most \
         {capacity}; shorten the input, lower the output limit, or raise the limit in the catalog"
    )]
    TooLargeForBucket {
        /// Catalog model id.
        model_id: String,
        /// Which limit is too small.
        dimension: Dimension,
        /// What the call needs.
        needed: u64,
        /// The bucket's capacity.
        capacity: u64,
    },

    /// The call's worst-case cost does not fit in what is left of the spend cap.
    #[error(
        "spend cap `{cap}` would be exceeded: the call may cost up to ${needed_usd:.6} but only \
         ${remaining_usd:.6} of ${limit_usd:.6} is left; raise the cap or lower the output limit"
    )]
    SpendCapExceeded {
        /// The cap's name.
        cap: String,
        /// The cap in USD.
        limit_usd: f64,
        /// What is left of it, in USD.
        remaining_usd: f64,
        /// The worst-case cost of the refused call, in USD.
        needed_usd: f64,
    },

    /// The model's circuit breaker is open after repeated failures; the call failed fast.
    #[error("model `{model_id}` is failing and its circuit is open; next probe in {retry_in:?}")]
    CircuitOpen {
        /// Catalog model id.
        model_id: String,
        /// When the breaker lets a probe through.
        retry_in: Duration,
    },

    /// A stream failed after events had reached the reader; it is not re-sent.
    #[error(
        "the stream from model `{model_id}` broke after {delivered_events} events reached the reader \
         (not retried, so no text is repeated): {cause}"
    )]
    StreamInterrupted {
        /// Catalog model id.
        model_id: String,
        /// How many events the reader had already received.
        delivered_events: u64,
        /// What broke the stream.
        cause: Box<Error>,
    },

    /// The answer (a whole body, or one stream event) is larger than the model's
    /// `max_response_bytes`; reading stopped there, so memory stays bounded. Never
    /// retried: the same request would get the same answer.
    #[error(
        "the answer from model `{model_id}` is larger than its limit of {limit_bytes} bytes \
         (`max_response_bytes` in the catalog); ask for less or raise the limit (not retried: \
         the same request would get the same answer)"
    )]
    ResponseTooLarge {
        /// Catalog model id.
        model_id: String,
        /// The limit that was passed, in bytes.
        limit_bytes: u64,
    },

    /// The fake provider has no scripted or replayed answer for the request.
    #[error(
        "the fake provider has no answer for this request to model `{model_id}` (cache key \
         {cache_key}); script one or record it into the replay cache"
    )]
    UnmatchedRequest {
        /// Catalog model id.
        model_id: String,
        /// The request's cache key (hex), to find it in a replay directory.
        cache_key: String,
    },

    /// A shared limiter backend (e.g. Redis) could not be reached or did not answer in
    /// time. Fail closed: nothing was reserved and nothing was sent.
    #[error(
        "the {backend} limiter for model `{model_id}` is unavailable, so nothing was sent: {source}"
    )]
    LimiterUnavailable {
        /// The backend, e.g. `"redis"`.
        backend: String,
        /// The model whose buckets it holds.
        model_id: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A limiter asked not to wait (`try_reserve`) cannot serve the call now: nothing was
    /// reserved and nothing was sent. It is the limiter's own answer, not a provider's
    /// 429: no provider refused anything.
    #[error(
        "the limiter cannot serve this call now, only in {ready_in:?}; nothing was sent: wait \
         for it with `reserve`, or try again then"
    )]
    WouldWait {
        /// How long until it could, counting the waiters that would go before it.
        ready_in: Duration,
    },

    /// The caller cancelled the call.
    #[error("the call was cancelled")]
    Cancelled,

    /// A provider batch ended before this request of it ran: the batch expired (its
    /// completion window passed) or was cancelled. Nothing was billed for it; sending it
    /// again (a re-run of `tollgate run`) may pass.
    #[error(
        "batch `{batch_id}` {how} before this request ran; nothing was billed for it, and a \
         re-run sends it again"
    )]
    BatchLineUnfinished {
        /// The provider's batch id.
        batch_id: String,
        /// `expired` or `was cancelled`.
        how: String,
    },

    /// The job's queue was closed while the call waited for its reservation (the
    /// process is shutting down, [`crate::JobContext::with_queue_closed`]); nothing was
    /// sent, so the call can be made again elsewhere.
    #[error(
        "the call was still queued when its queue was closed (shutting down); nothing was sent"
    )]
    QueueClosed,

    /// The catalog is invalid.
    #[error(transparent)]
    Catalog(#[from] CatalogError),

    /// A credential could not be resolved.
    #[error(transparent)]
    Credential(#[from] CredentialError),

    /// The model id is not in the catalog.
    #[error("model `{model_id}` is not in the catalog; known models: {known}")]
    UnknownModel {
        /// What was asked for.
        model_id: String,
        /// The catalog's model ids, comma-separated.
        known: String,
    },

    /// The model's provider crate is not linked into this binary.
    #[error(
        "model `{model_id}` uses provider `{provider}`, which is not linked into this binary; \
         {hint}"
    )]
    ProviderNotLinked {
        /// Catalog model id.
        model_id: String,
        /// Provider key.
        provider: String,
        /// What to add (crate name and the `use` line).
        hint: String,
    },

    /// The model cannot serve this kind of client (e.g. `embeddings` asked of a chat model).
    #[error("model `{model_id}` is a {actual} model and cannot serve {wanted} calls; {hint}")]
    WrongModelKind {
        /// Catalog model id.
        model_id: String,
        /// What the catalog says the model is.
        actual: String,
        /// What was asked for.
        wanted: String,
        /// What to change.
        hint: String,
    },

    /// The provider cannot serve this kind of model.
    #[error(
        "provider `{provider}` serves no {capability} models, so it cannot serve model `{model_id}`; use another provider for it"
    )]
    Unsupported {
        /// Catalog model id.
        model_id: String,
        /// Provider key.
        provider: String,
        /// `chat`, `embeddings` or `decision`.
        capability: String,
    },

    /// Two linked crates register the same provider key.
    #[error("two linked crates register provider key `{key}`; link only one of them")]
    DuplicateProvider {
        /// The key registered twice.
        key: String,
    },

    /// The request (or a value in it) is malformed.
    #[error("invalid request: `{field}` {reason}")]
    InvalidRequest {
        /// The offending field, e.g. `sampling_params.temperature`.
        field: String,
        /// What is wrong and what is accepted.
        reason: String,
    },

    /// The request asks for something the model's provider cannot do (a forced tool
    /// choice on a provider without one, JSON mode without a schema, a PDF by URL, a
    /// provider's own tool elsewhere): refused before anything is sent, never dropped.
    #[error(
        "`{feature}` is not supported by provider `{provider}` (model `{model}`); remove it \
         from the request or choose a model whose provider supports it"
    )]
    UnsupportedSetting {
        /// The setting or input, as the request says it (e.g. `tool_choice: none`).
        feature: String,
        /// The provider key, e.g. `bedrock`.
        provider: String,
        /// The model, as the provider names it.
        model: String,
    },

    /// A provider returned an embedding that cannot be made into the deployment's width.
    #[error(
        "model `{model_id}` returned an embedding of width {got} that cannot be made into the \
         catalog's width {expected}: {reason}"
    )]
    EmbeddingShape {
        /// Catalog model id.
        model_id: String,
        /// The catalog's `[embeddings] width`.
        expected: usize,
        /// What the provider returned.
        got: usize,
        /// Why it could not be fixed.
        reason: String,
    },

    /// Stored response bytes (replay cache, canonical body) could not be decoded.
    #[error("could not decode {what}: {source}")]
    Decode {
        /// What was being decoded.
        what: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// A replay-cache directory could not be read or written.
    #[error("replay cache at `{path}`: {source}")]
    ReplayStore {
        /// The file or directory.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl From<UnknownModel> for Error {
    fn from(e: UnknownModel) -> Self {
        Error::UnknownModel {
            model_id: e.model_id,
            known: e.known,
        }
    }
}

impl Error {
    /// [`Error::UnsupportedSetting`]: `feature` cannot be sent to `provider`'s `model`.
    pub fn unsupported_setting(
        feature: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        Error::UnsupportedSetting {
            feature: feature.into(),
            provider: provider.into(),
            model: model.into(),
        }
    }

    /// A stable snake_case name for the error's kind, for records, spans and metrics
    /// (`error.type`): one per variant, and per [`ProviderError`] variant.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Provider(p) => p.kind(),
            Error::ProviderRequest(_) => "request_rejected",
            Error::QuotaExhausted { .. } => "quota_exhausted",
            Error::ProviderRefusal { .. } => "refusal",
            Error::OutputTruncated { .. } => "output_truncated",
            Error::ContextWindowExceeded { .. } => "context_window_exceeded",
            Error::ShapeInvalid { .. } => "shape_invalid",
            Error::TooLargeForBucket { .. } => "too_large_for_bucket",
            Error::SpendCapExceeded { .. } => "spend_cap_exceeded",
            Error::CircuitOpen { .. } => "circuit_open",
            Error::StreamInterrupted { .. } => "stream_interrupted",
            Error::ResponseTooLarge { .. } => "response_too_large",
            Error::UnmatchedRequest { .. } => "unmatched_request",
            Error::LimiterUnavailable { .. } => "limiter_unavailable",
            Error::WouldWait { .. } => "would_wait",
            Error::Cancelled => "cancelled",
            Error::BatchLineUnfinished { .. } => "batch_unfinished",
            Error::QueueClosed => "queue_closed",
            Error::Catalog(_) => "catalog",
            Error::Credential(_) => "credential",
            Error::UnknownModel { .. } => "unknown_model",
            Error::ProviderNotLinked { .. } => "provider_not_linked",
            Error::WrongModelKind { .. } => "wrong_model_kind",
            Error::Unsupported { .. } => "unsupported",
            Error::UnsupportedSetting { .. } => "unsupported_setting",
            Error::DuplicateProvider { .. } => "duplicate_provider",
            Error::InvalidRequest { .. } => "invalid_request",
            Error::EmbeddingShape { .. } => "embedding_shape",
            Error::Decode { .. } => "decode",
            Error::ReplayStore { .. } => "replay_store",
        }
    }

    /// The HTTP status the provider answered with, where one stands behind the error: a
    /// retryable failure's (see [`ProviderError::status`]) or a rejection's.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Provider(p) => p.status(),
            Error::ProviderRequest(r) => Some(r.status),
            _ => None,
        }
    }

    /// True for the retryable set, i.e. exactly `Error::Provider(_)`.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Provider(_))
    }

    /// What a provider crate returns when the provider reports a context overflow by code
    /// (e.g. OpenAI's `context_length_exceeded`): an [`Error::ContextWindowExceeded`]
    /// whose model, need and window the pipeline fills in from the catalog and its
    /// estimate before the caller sees it.
    pub fn provider_context_overflow() -> Self {
        Error::ContextWindowExceeded {
            model_id: String::new(),
            needed: 0,
            window: None,
        }
    }

    /// A refusal (see [`Error::ProviderRefusal`]) with the usage the provider reported
    /// for it; the pipeline notes how many stream events were delivered.
    pub fn refusal(
        category: impl Into<String>,
        explanation: impl Into<String>,
        usage: Usage,
    ) -> Self {
        Error::ProviderRefusal {
            category: category.into(),
            explanation: explanation.into(),
            usage,
            delivered_events: 0,
        }
    }

    /// This error with `provider` as the provider it names. The pipeline calls it on
    /// every error a transport returns, so the key comes from the catalog entry, never
    /// from a codec (which may serve several keys).
    pub fn with_provider(self, provider: &str) -> Self {
        match self {
            Error::QuotaExhausted { message, .. } => Error::QuotaExhausted {
                provider: provider.to_owned(),
                message,
            },
            Error::StreamInterrupted {
                model_id,
                delivered_events,
                cause,
            } => Error::StreamInterrupted {
                model_id,
                delivered_events,
                cause: Box::new(cause.with_provider(provider)),
            },
            other => other,
        }
    }
}

impl Error {
    /// [`Error::InvalidRequest`] for `field`, with `reason` saying what is wrong and what
    /// is accepted: how a codec refuses what its wire format cannot carry, before sending.
    ///
    /// ```
    /// let error = tollgate::Error::invalid_request("messages[0].content[1]", "must be text");
    /// assert!(matches!(error, tollgate::Error::InvalidRequest { ref field, .. } if field == "messages[0].content[1]"));
    /// assert!(!error.is_retryable());
    /// ```
    pub fn invalid_request(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidRequest {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

struct Window(Option<u64>);

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(w) => write!(f, " of {w} tokens"),
            None => f.write_str(" (reported by the provider)"),
        }
    }
}

struct Delivered(u64);

impl fmt::Display for Delivered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " after {n} stream events reached the reader"),
        }
    }
}
