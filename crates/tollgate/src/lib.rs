//! tollgate: one way to call every chat, embeddings and decision model, with each
//! provider's rate limits respected before a request is sent.
//!
//! How a call flows through this crate:
//!
//! 1. A [`Catalog`] (TOML or code) names each model, its provider key, limits and prices;
//!    it is validated when loaded ([`catalog`]).
//! 2. [`Models`] joins the catalog, a [`CredentialStore`] and the providers linked into
//!    the binary ([`provider`]); `models.chat(id)` builds the model's provider on first
//!    use and hands out an [`LlmClient`].
//! 3. The client takes an immutable [`LlmRequest`] and returns an [`LlmResponse`]
//!    (canonical bytes plus their digest) or a [`ResponseStream`]; failures are typed
//!    ([`Error`]), and `Error::Provider(_)` is exactly the retryable set.
//! 4. [`compute_cache_key`] names a request for the [`ReplayCache`], which the `fake`
//!    provider (crate `tollgate-fake`) replays offline.
//!
//! Time is read in one place, [`clock`] (tokio's clock, paused in tests). The modules
//! form layers with no circle (`cargo xtask core-graph` draws them): the catalog knows
//! the providers that registered themselves, never the [`provider`] registry, which
//! builds on the catalog.
//!
//! ```
//! use tollgate::catalog::KnownProviders;
//! use tollgate::{Catalog, Conversation, SamplingParams};
//!
//! // An application links the `fake` provider with `use tollgate_fake as _;`, and
//! // `Catalog::from_toml_str` accepts its key; this crate alone links no provider, so
//! // the key is given explicitly.
//! let known = KnownProviders::empty().with("fake", "tollgate-fake", false);
//! let catalog = Catalog::from_toml_str_with(r#"
//!     [models.assistant]
//!     provider = "fake"
//!     max_output_tokens = 1024
//!     rpm = 60
//! "#, &known)?;
//! let request = Conversation::new()
//!     .with_system("Be brief.")
//!     .user("Hello?")
//!     .request("assistant", SamplingParams::new())?;
//! assert_eq!(request.model_id(), "assistant");
//! assert!(catalog.model("assistant").is_some());
//! # Ok::<(), tollgate::Error>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cache;
pub mod catalog;
mod client;
pub mod clock;
mod context;
mod conversation;
pub mod credentials;
mod error;
mod json;
pub mod limit;
mod models;
#[cfg(feature = "otel")]
pub mod otel;
pub mod pipeline;
pub mod provider;
mod request;
mod response;
mod settings;
pub mod sse;
mod stream;
mod usage;

pub use async_trait::async_trait;
pub use cache::{CacheKey, ReplayCache, compute_cache_key};
pub use catalog::Dimension;
pub use catalog::{Catalog, ModelEntry, NameMatch};
pub use client::{
    Decision, DecisionClient, DecisionRequest, DecisionWeights, Embedding, EmbeddingPurpose,
    EmbeddingsClient, LlmClient, Question, TokenCount, TokenCounter,
};
pub use conversation::{
    Block, CacheMark, Conversation, DocumentSource, ImageSource, Message, NativeTool, Role,
    ToolDefinition,
};
pub use credentials::{CredentialStore, Secret};
pub use error::{ConnectionCause, Error, ProviderError, ProviderRequestError, Result};
pub use json::{Float, Json};
pub use models::{Models, ModelsBuilder};
pub use pipeline::{ChatTransport, JobContext, PipelineConfig, SpendCap};
/// The HTTP plumbing of the provider kit, defined at [`provider::http`] (feature `http`).
#[cfg(feature = "http")]
pub use provider::http;
/// The codec's side of the provider kit, defined at [`provider::wire`].
pub use provider::wire;
pub use provider::{Provider, ProviderContext, ProviderTransports};
pub use request::{LlmRequest, ResponseShape, SamplingParams};
pub use response::{LlmResponse, Refusal, ResponseBody, StopReason};
pub use settings::{Reasoning, ReasoningEffort, ReasoningSummary, Thinking, ToolChoice, Verbosity};
pub use stream::{ResponseStream, StreamEvent};
pub use usage::Usage;

#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
