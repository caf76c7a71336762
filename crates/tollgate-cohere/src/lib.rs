//! The `cohere` provider for tollgate: Cohere's v2 Chat API (`POST /v2/chat`, whole or
//! streamed, with tools and tool results) and Embed API (`POST /v2/embed`).
//!
//! Link it with one line, `use tollgate_cohere as _;`, and name it in the catalog:
//!
//! ```toml
//! [models.command]
//! provider = "cohere"
//! name = "command-a-03-2025"
//! credential = "cohere-main"          # the API key's id in the credential store
//! max_output_tokens = 8000
//! [models.command.options]
//! base_url = "https://api.cohere.com"  # the default, without /v2; set it for a proxy
//! tool_choice = "required"             # `auto` (default), `required` or `none`
//! ```
//!
//! How a call flows through this crate (the pipeline in `tollgate` does everything
//! else: pricing, spend caps, rate-limit reservations, retries, settling, records):
//!
//! 1. [`CohereProvider::build`](tollgate::provider::Provider::build) (once per `Models`)
//!    makes the kit's [`HttpClient`](tollgate::provider::http::HttpClient);
//! 2. each call encodes the request ([`codec::encode_request`]: a setting Cohere cannot
//!    carry fails here, before anything is sent) and the kit's endpoint sends it once,
//!    with the key from the credential store as `Authorization: Bearer`;
//! 3. the kit passes the answer's headers to the pipeline as
//!    [`Signals`](tollgate::provider::Signals) ([`COHERE_RATE_LIMITS`]: a trial key's
//!    per-minute call limit); an error answer is read by [`codec::read_error`] and judged
//!    by the core's one verdict;
//! 4. a body is decoded by [`codec::decode_response`], a stream by the kit's SSE pump and
//!    [`codec::StreamDecoder`] (the kit's shell around [`codec::Events`]).
//!
//! A client for it, as an application makes one (building it sends nothing: the provider
//! is built on the first `chat` and reads the key from the store on every call):
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Conversation, Models, SamplingParams};
//! use tollgate_cohere as _; // links the provider: its key is now known to catalogs
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tollgate::Result<()> {
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.command]
//!     provider = "cohere"
//!     name = "command-a-03-2025"
//!     credential = "cohere-main"
//!     max_output_tokens = 8000
//!     rpm = 500
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("cohere-main", "key-from-your-secret-store"))
//!     .build()?;
//! let chat = models.chat("command").await?;
//! let request = Conversation::new().user("Hello?").request("command", SamplingParams::new())?;
//! // `chat.single_response(&request).await?` sends it to `https://api.cohere.com/v2/chat`
//! // (it needs a real key and the network, so this example stops here).
//! # drop((chat, request));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod chat;
pub mod codec;
mod embeddings;
mod options;
mod provider;

pub use chat::CohereChat;
pub use embeddings::CohereEmbeddings;
pub use options::{CohereOptions, InputType};
pub use provider::{COHERE_RATE_LIMITS, CohereProvider};

/// The provider key catalog entries name.
pub const KEY: &str = "cohere";

/// The default API address (without `/v2`).
pub const DEFAULT_BASE_URL: &str = "https://api.cohere.com";

/// The most texts one Embed request takes (Cohere's documented limit), and the default
/// batch.
pub const MAX_EMBEDDING_BATCH: usize = 96;

tollgate::register_provider!(|| std::sync::Arc::new(CohereProvider));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
