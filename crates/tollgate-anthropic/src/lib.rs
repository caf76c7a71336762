//! The `anthropic-direct` provider for tollgate: Anthropic's Messages API, over HTTP,
//! with streaming and prompt caching.
//!
//! Link it with one line, `use tollgate_anthropic as _;`, and name it in the catalog:
//!
//! ```toml
//! [models.claude-sonnet]
//! provider = "anthropic-direct"
//! name = "claude-sonnet-4-5"
//! credential = "anthropic-main"     # the API key's id in the credential store
//! max_output_tokens = 64000
//! [models.claude-sonnet.options]
//! base_url = "https://api.anthropic.com"      # the default; set it for a proxy
//! beta = ["extended-cache-ttl-2025-04-11"]     # sent as `anthropic-beta`
//! ```
//!
//! How a call flows through this crate (the pipeline in `tollgate` does everything
//! else: pricing, spend caps, rate-limit reservations, retries, settling, records):
//!
//! 1. [`AnthropicProvider::build`](tollgate::provider::Provider::build) (once per
//!    `Models`, on first use) makes the kit's
//!    [`HttpClient`](tollgate::provider::http::HttpClient);
//! 2. each call, the transport encodes the request ([`codec::encode_request`]; more than
//!    four cache marks fail here, before anything is sent) and the kit's endpoint sends it
//!    once with the key from the credential store (`x-api-key`, `anthropic-version`,
//!    `anthropic-beta`);
//! 3. the kit passes the answer's headers to the pipeline as
//!    [`Signals`](tollgate::provider::Signals) (`anthropic-ratelimit-*`,
//!    `x-should-retry`); an
//!    error answer is read by [`codec::read_error`] and judged by the core's one verdict;
//! 4. a body is decoded by [`codec::decode_response`], a stream by the kit's SSE pump and
//!    [`codec::StreamDecoder`] (the kit's shell around [`codec::Chunks`]).
//!
//! The codec is public so that `tollgate-bedrock` can reuse it for Claude on Bedrock.
//!
//! The same model's Message Batches API (`Models::batch`, for `tollgate run --via
//! batch`) is [`AnthropicBatch`]: each request encoded as the live call encodes it, each
//! result decoded as a live answer or error is.
//!
//! A client for it, as an application makes one (building it sends nothing: the provider
//! is built on the first `chat` and reads the key from the store on every call):
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Conversation, Models, SamplingParams};
//! use tollgate_anthropic as _; // links the provider: its key is now known to catalogs
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tollgate::Result<()> {
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.claude]
//!     provider = "anthropic-direct"
//!     name = "claude-sonnet-4-5"
//!     credential = "anthropic-main"
//!     max_output_tokens = 8192
//!     rpm = 50
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("anthropic-main", "key-from-your-secret-store"))
//!     .build()?;
//! let chat = models.chat("claude").await?;
//! let request = Conversation::new().user("Hello?").request("claude", SamplingParams::new())?;
//! // `chat.single_response(&request).await?` sends it to `https://api.anthropic.com/v1/messages` (it needs a real key
//! // and the network, so this example stops here).
//! # drop((chat, request));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod batch;
mod chat;
pub mod codec;
mod options;
mod provider;

pub use batch::AnthropicBatch;
pub use chat::AnthropicChat;
pub use options::AnthropicOptions;
pub use provider::AnthropicProvider;

/// The provider key catalog entries name.
pub const KEY: &str = "anthropic-direct";

/// The default API address.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

tollgate::register_provider!(|| std::sync::Arc::new(AnthropicProvider));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
