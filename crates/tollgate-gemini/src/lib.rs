//! The `gemini`, `vertex` and `anthropic-vertex` providers for tollgate: Google's Gemini
//! models through the Gemini API (`generativelanguage.googleapis.com`, an API key) and
//! through Vertex AI (`{location}-aiplatform.googleapis.com`, OAuth), with one codec:
//! chat (streamed or not), tools, thought signatures, embeddings, and a decision client
//! over logprobs; and Anthropic's Claude models on Vertex AI (`anthropic-vertex`, module
//! `claude`): Claude's Messages with `tollgate-anthropic`'s codec over Vertex's
//! `rawPredict` and `streamRawPredict`, with the same OAuth as `vertex`.
//!
//! Link it with one line, `use tollgate_gemini as _;`, and name it in the catalog:
//!
//! ```toml
//! [models.flash]
//! provider = "gemini"
//! name = "gemini-2.5-flash"
//! credential = "gemini-main"        # the API key's id in the credential store
//! rpm = 1000
//! input_tpm = 1000000               # Gemini's TPM counts input tokens only
//! max_output_tokens = 65536
//! [models.flash.options]
//! thinking_budget = 1024            # tokens; 0 off, -1 automatic
//!
//! [models.flash-vertex]
//! provider = "vertex"
//! name = "gemini-2.5-flash"
//! credential = "vertex-sa"          # a service-account key (JSON); without it, ADC
//! [models.flash-vertex.options]
//! project = "my-project"            # required, never defaulted
//! location = "global"               # required: a region, `us`, `eu` or `global`
//!
//! [models.claude-vertex]
//! provider = "anthropic-vertex"
//! name = "claude-sonnet-4-5@20250929"
//! credential = "vertex-sa"          # as for `vertex`
//! [models.claude-vertex.options]
//! project = "my-project"            # required, never defaulted
//! region = "us-east5"               # required: a region, or `global`
//! ```
//!
//! How a call flows through this crate (the pipeline in `tollgate` does everything
//! else: pricing, spend caps, rate-limit reservations, retries, settling, records):
//!
//! 1. [`GeminiProvider::build`](tollgate::provider::Provider::build) (once per `Models`)
//!    makes the kit's [`HttpClient`](tollgate::provider::http::HttpClient) and, for `vertex`, the token source
//!    ([`auth`]);
//! 2. each call encodes the request ([`codec::encode_request`]) and the kit's endpoint
//!    POSTs it once to `…/models/{model}:generateContent` (or
//!    `:streamGenerateContent?alt=sse`), with `x-goog-api-key` from the credential store
//!    (`gemini`) or a bearer token (`vertex`);
//! 3. an error answer (a `google.rpc.Status`) is read by [`codec::read_error`] (its
//!    `RetryInfo` wait, its per-day `QuotaFailure`) and judged by the core's one verdict;
//! 4. a body is decoded by [`codec::decode_response`], a stream by the kit's SSE pump and
//!    [`codec::StreamDecoder`] (the kit's shell around [`codec::Chunks`]).
//!
//! Embeddings: [`GeminiEmbeddings`]; decisions: [`GeminiDecision`]; the Gemini API's
//! batch mode (`gemini` only): [`GeminiBatch`] ([`batch`]); catalog options:
//! [`GeminiOptions`]. The guide is `docs/providers/gemini.md`; for `anthropic-vertex`
//! (built with the `vertex` feature, on by default), `docs/providers/anthropic-vertex.md`.
//!
//! A client for it, as an application makes one (building it sends nothing: the provider
//! is built on the first `chat` and reads the key from the store on every call):
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Conversation, Models, SamplingParams};
//! use tollgate_gemini as _; // links the provider: its key is now known to catalogs
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tollgate::Result<()> {
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.flash]
//!     provider = "gemini"
//!     name = "gemini-2.5-flash"
//!     credential = "gemini-main"
//!     max_output_tokens = 8192
//!     rpm = 50
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("gemini-main", "key-from-your-secret-store"))
//!     .build()?;
//! let chat = models.chat("flash").await?;
//! let request = Conversation::new().user("Hello?").request("flash", SamplingParams::new())?;
//! // `chat.single_response(&request).await?` sends it to `generativelanguage.googleapis.com` (it needs a real key
//! // and the network, so this example stops here).
//! # drop((chat, request));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod auth;
pub mod batch;
mod chat;
#[cfg(feature = "vertex")]
pub mod claude;
pub mod codec;
mod decision;
mod embeddings;
mod options;
mod provider;

pub use auth::TokenSource;
pub use batch::GeminiBatch;
pub use chat::GeminiChat;
#[cfg(feature = "vertex")]
pub use claude::{AnthropicVertexChat, AnthropicVertexOptions, AnthropicVertexProvider};
pub use decision::{GeminiDecision, MAX_OPTIONS};
pub use embeddings::{GeminiEmbeddings, VERTEX_PREDICT_BATCH};
pub use options::{BatchBody, EmbeddingApi, GeminiOptions, VertexPlace};
pub use provider::GeminiProvider;

/// The provider key of the Gemini API.
pub const KEY: &str = "gemini";

/// The provider key of Gemini on Vertex AI.
pub const VERTEX_KEY: &str = "vertex";

/// The provider key of Claude on Vertex AI (Anthropic's Messages over `rawPredict`).
pub const ANTHROPIC_VERTEX_KEY: &str = "anthropic-vertex";

/// The Gemini API's address (without the version).
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

tollgate::register_provider!(|| std::sync::Arc::new(GeminiProvider::GEMINI));
// Without Google's auth crate `vertex` could not authenticate: not registered.
#[cfg(feature = "vertex")]
tollgate::register_provider!(|| std::sync::Arc::new(GeminiProvider::VERTEX));
#[cfg(feature = "vertex")]
tollgate::register_provider!(|| std::sync::Arc::new(AnthropicVertexProvider::GOOGLE));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
