//! Everything a provider crate is written with, in one folder: the [`Provider`] trait,
//! the [`ProviderTransports`] it builds, registration through `inventory`, the registry
//! that finds every provider linked into the binary, and the kit the transports are made
//! of. The seam between the core and a provider is defined here, not re-exported: the
//! transport traits ([`ChatTransport`] and its kin, in `transport.rs`), token estimates
//! (`estimate.rs`), decision labels ([`labels`]), the codec's side ([`wire`]) and the
//! HTTP plumbing ([`http`]).
//!
//! **Layering:** this module sits below [`crate::pipeline`]. The pipeline drives the
//! transports and reads their [`Signals`]; nothing here imports the pipeline, so a
//! provider author reads this folder without the pipeline's machinery (retries, the
//! limiter's holdings, settling). The one item that moved down with the transports is
//! [`parse_retry_after`], which a transport calls while filling [`Signals`]; the
//! pipeline's own retry policy stays in the pipeline. The old public paths
//! (`tollgate::wire`, `tollgate::http`, `tollgate::pipeline::{ChatTransport, Signals,
//! labels, …}`) are re-exports of the items here.
//!
//! **The rule for provider crates** (`cargo xtask tidy` checks it): import the kit from
//! `tollgate::provider` alone. Nothing comes from `tollgate::pipeline`, `tollgate::wire`,
//! `tollgate::limit`, `tollgate::http` or the crate root directly: those paths stay for
//! applications and for tollgate itself, and everything of theirs a provider needs is
//! here. The application's vocabulary a codec reads and writes (`LlmRequest`,
//! `LlmResponse`, `ResponseBody`, `ResponseStream`, `StreamEvent`, `Block`, `Error`,
//! `Result`, `Usage`, `ModelEntry`, …) is re-exported here too, so a provider crate
//! imports everything from this one module, as `examples/ollama` does.
//!
//! What is here, by what it is for:
//!
//! - building: [`Provider`], [`ProviderContext`], [`CredentialRef`], [`ProviderTransports`],
//!   [`register_provider!`](crate::register_provider) (invoked as
//!   `tollgate::register_provider!`, where `#[macro_export]` puts it, and as tollgate's own
//!   checks look for it), [`async_trait`](crate::async_trait);
//! - the transports the pipeline drives: [`ChatTransport`], [`EmbeddingsTransport`] and
//!   [`EmbeddingsReply`], [`DecisionTransport`] and [`DecisionReply`] (with [`labels`] for
//!   decisions over logprobs); what an answer said about limits, [`Signals`]; how the
//!   provider counts tokens against them, [`AccountingRule`]; what its own token counter
//!   said, [`TokenCounting`];
//! - token estimates: [`TokenEstimator`], [`DefaultEstimator`] (and, with the `tiktoken`
//!   feature, `TiktokenEstimator`);
//! - a model's catalog options: [`ModelOptions`], [`ToolChoice`], [`CatalogError`]; the
//!   limiter settings a provider's defaults fill in, [`LimiterConfig`];
//! - credentials resolved by id: [`CredentialStore`], [`Secret`] (for a token exchange);
//! - answers replayed offline (the `fake` provider): [`ReplayCache`], [`compute_cache_key`];
//! - the codec's side: an error answer as a [`WireError`], an undecodable answer
//!   ([`malformed`], [`undecodable`], [`parse_json`], [`keep_raw`]), text-only blocks
//!   ([`text_only`]), secrets cut out of text ([`redact`]), transport failures classified
//!   by type ([`connection_error`]);
//! - streams: the codec's [`ChunkDecoder`] in the [`StreamDecoder`] shell, blocks from
//!   their deltas by a [`BlockAssembler`], any event source pumped by [`decode_events`]
//!   through an [`EventDecoder`];
//! - HTTP (the `http` feature): [`http`], the client, the send-once endpoint, rate-limit
//!   headers and the SSE/NDJSON pumps.
//!
//! A provider crate registers itself once, at the crate's top level:
//!
//! ```
//! use std::sync::Arc;
//! use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
//!
//! #[derive(Debug, Default)]
//! struct MyProvider;
//!
//! #[derive(Debug)]
//! struct MyTransports; // overrides `chat`, `embeddings` or `decision` with its transports
//! impl ProviderTransports for MyTransports {}
//!
//! #[tollgate::async_trait]
//! impl Provider for MyProvider {
//!     fn key(&self) -> &'static str { "my-provider" }
//!     async fn build(&self, _context: &ProviderContext) -> tollgate::Result<Arc<dyn ProviderTransports>> {
//!         Ok(Arc::new(MyTransports))
//!     }
//! }
//!
//! tollgate::register_provider!(|| Arc::new(MyProvider));
//! # fn main() {
//! assert!(tollgate::provider::linked_providers().iter().any(|p| p.key() == "my-provider"));
//! # }
//! ```
//!
//! and an application links it with one line, `use tollgate_myprovider as _;`, so the
//! crate is not dropped by the linker (a crate that nothing mentions is not linked, and
//! its registration with it).
//!
//! The registration also tells the catalog that the key exists, which crate registers it
//! (the registering crate's package name) and whether its models need a credential
//! ([`Provider::requires_credential`]); see [`crate::catalog::KnownProviders::linked`].

pub mod batch;
mod estimate;
#[cfg(feature = "http")]
pub mod http;
pub mod labels;
mod plugin;
mod registry;
mod retry_after;
mod transport;
mod transports;
pub mod wire;

pub use crate::context::{CredentialRef, ProviderContext};
pub use plugin::Provider;
pub use registry::{ProviderRegistration, ProviderRegistry, linked_providers};
pub use transports::ProviderTransports;

pub use crate::{async_trait, register_provider};

// The transports the pipeline drives, and what they tell it.
pub use crate::limit::{AccountingRule, CacheReadAccounting, OutputAccounting};
pub use retry_after::parse_retry_after;
pub use transport::{
    ChatTransport, DecisionReply, DecisionTransport, EmbeddingsReply, EmbeddingsTransport, Signals,
    TokenCounting,
};

// Token estimates.
pub use estimate::{
    ByteBoundEstimator, DefaultEstimator, IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, PDF_PAGE_TOKENS,
    REQUEST_OVERHEAD_TOKENS, TokenEstimator,
};
#[cfg(feature = "tiktoken")]
pub use estimate::{TiktokenEncoding, TiktokenEstimator};

// A model's catalog options, and the limiter settings a provider's defaults fill in.
pub use crate::catalog::CatalogError;
pub use crate::limit::LimiterConfig;
pub use wire::{ModelOptions, ToolChoice};

// The codec's side: errors, undecodable answers, text-only blocks, secrets.
pub use wire::{
    DnsFailure, MALFORMED_RAW_BYTES, REDACTED, WireError, connection_cause, connection_error,
    keep_raw, malformed, parse_json, redact, redact_bytes, redacted_stream, text_only, undecodable,
};
/// The no-silent-drop rule: a codec names the settings it writes; the rest are refused.
pub use wire::{Setting, refuse_unwritten, unwritten};
/// Later system messages folded into the turns, for wire formats with a leading system only.
pub use wire::{folded_turns, has_later_system};

// Streams.
pub use wire::{BlockAssembler, ChunkDecoder, EventDecoder, StreamDecoder, decode_events};

// The application's vocabulary a codec reads and writes (also at the crate root).
pub use crate::catalog::{Catalog, Dimension, ModelEntry};
pub use crate::client::{Decision, DecisionRequest, DecisionWeights, EmbeddingPurpose};
pub use crate::conversation::{
    Block, CacheMark, DocumentSource, ImageSource, Message, NativeTool, Role, ToolDefinition,
};
pub use crate::error::{ConnectionCause, Error, ProviderError, ProviderRequestError, Result};
pub use crate::json::Json;
pub use crate::request::{LlmRequest, ResponseShape, SamplingParams};
pub use crate::response::{LlmResponse, Refusal, ResponseBody, StopReason};
pub use crate::settings::{Reasoning, ReasoningEffort, ReasoningSummary, Thinking};
pub use crate::stream::{ResponseStream, StreamEvent};
pub use crate::usage::Usage;

// Credentials a provider resolves by id (a token exchange's store, the secret it reads).
pub use crate::credentials::{CredentialStore, Secret};

// Answers replayed offline from recorded calls (the `fake` provider's replay mode).
pub use crate::cache::{CacheKey, ReplayCache, compute_cache_key};

// The clock every wait and `retry-after` date is read on (tokio's, paused in tests).
pub use crate::clock;
