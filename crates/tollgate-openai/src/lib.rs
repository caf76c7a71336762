//! The `openai` and `openai-compatible` providers for tollgate: OpenAI's Chat Completions
//! API (streamed or not), embeddings, and a decision client over logprobs; the same
//! codec serves vLLM, Ollama, llama.cpp's server and other OpenAI-compatible servers.
//!
//! Link it with one line, `use tollgate_openai as _;`, and name it in the catalog:
//!
//! ```toml
//! [models.gpt]
//! provider = "openai"
//! name = "gpt-4o-mini"
//! credential = "openai-main"        # the API key's id in the credential store
//! max_output_tokens = 16384
//! [models.gpt.options]
//! organization = "org-…"             # optional, sent as `OpenAI-Organization`
//!
//! [models.local]
//! provider = "openai-compatible"     # no credential needed
//! name = "Qwen/Qwen2.5-7B-Instruct"
//! [models.local.options]
//! base_url = "http://127.0.0.1:8000"  # required: the server, without `/v1`
//! ```
//!
//! How a call flows through this crate (the pipeline in `tollgate` does everything
//! else: pricing, spend caps, rate-limit reservations, retries, settling, records):
//!
//! 0. `Models::build` asks [`OpenAiProvider`] each model's `base_url`, which for an
//!    `openai` model also starts loading its tiktoken table on a thread of its own, so
//!    that the first call finds it loaded (or waits only for the rest of the load);
//! 1. [`OpenAiProvider::build`](tollgate::provider::Provider::build) (once per
//!    `Models`) makes the kit's [`HttpClient`](tollgate::provider::http::HttpClient);
//! 2. each call encodes the request ([`codec::encode_request`]) and the kit's endpoint
//!    sends it once, with the API key from the credential store when the model names one;
//! 3. the kit passes the answer's headers to the pipeline as
//!    [`Signals`](tollgate::provider::Signals) (`x-ratelimit-*`, resets as Go durations,
//!    `x-should-retry`); an error answer is read by [`codec::read_error`] and judged by
//!    the core's one verdict (with `retry-after-ms` / `retry-after`);
//! 4. a body is decoded by [`codec::decode_response`], a stream by the kit's SSE pump and
//!    [`codec::StreamDecoder`] (the kit's shell around [`codec::Chunks`]).
//!
//! Batches (`Models::batch`, for `tollgate run --via batch`): a chat model whose preset
//! names a batch API ([`preset::BatchApi`]; `openai`'s is OpenAI's Batch API, files and
//! `/v1/batches`) gets a batch transport whose lines are step 2's request bodies, whose
//! answers are decoded by step 4's decoder and whose errors are read as in step 3, and
//! whose every request (upload, create, status, results, cancel, list) is sent through
//! the model's endpoint as a call is (`Endpoint::request`).
//!
//! What differs between the two keys (which output-limit field is sent, whether streams
//! are asked for usage, whether `[DONE]` is required, how input is estimated) is held in
//! one place, [`Quirks`].
//!
//! A client for it, as an application makes one (building it sends nothing: the provider
//! is built on the first `chat` and reads the key from the store on every call):
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Conversation, Models, SamplingParams};
//! use tollgate_openai as _; // links the provider: its key is now known to catalogs
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tollgate::Result<()> {
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.gpt]
//!     provider = "openai"
//!     name = "gpt-4o-mini"
//!     credential = "openai-main"
//!     max_output_tokens = 8192
//!     rpm = 50
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("openai-main", "key-from-your-secret-store"))
//!     .build()?;
//! let chat = models.chat("gpt").await?;
//! let request = Conversation::new().user("Hello?").request("gpt", SamplingParams::new())?;
//! // `chat.single_response(&request).await?` sends it to `https://api.openai.com/v1/chat/completions` (it needs a real key
//! // and the network, so this example stops here).
//! # drop((chat, request));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod batch;
mod chat;
pub mod codec;
mod decision;
mod dialect;
mod embeddings;
mod options;
pub mod preset;
mod provider;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use chat::OpenAiChat;
pub use decision::{MAX_OPTIONS, OpenAiDecision};
pub use dialect::{OutputLimitField, Quirks};
pub use embeddings::OpenAiEmbeddings;
pub use options::{Api, OpenAiOptions, PROVISIONAL_ESTIMATE_TOKENS};
pub use provider::OpenAiProvider;

/// The provider key of OpenAI's own API.
pub const KEY: &str = "openai";

/// The provider key of OpenAI-compatible servers (vLLM, Ollama, llama.cpp, …).
pub const COMPATIBLE_KEY: &str = "openai-compatible";

/// The default API address of `openai` (without `/v1`).
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com";

/// The default most inputs sent in one embeddings request (OpenAI's documented limit).
pub const DEFAULT_EMBEDDING_BATCH: usize = 2048;

tollgate::register_provider!(|| std::sync::Arc::new(OpenAiProvider::OPENAI));
tollgate::register_provider!(|| std::sync::Arc::new(OpenAiProvider::COMPATIBLE));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
