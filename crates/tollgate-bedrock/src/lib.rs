//! Amazon Bedrock providers for tollgate:
//!
//! - `bedrock-converse`: any Bedrock chat model over Converse / ConverseStream (text,
//!   images, documents, tool use and results, reasoning and redacted reasoning, system,
//!   tools with tool choice and `strict`, inference config, structured output, effort,
//!   Claude's thinking, `CacheMark` as `cachePoint`; a setting Converse cannot carry is
//!   refused, never dropped); its `kind = "embeddings"` entries are Titan Text
//!   Embeddings or Cohere Embed over InvokeModel ([`BedrockEmbeddings`]);
//! - `anthropic-bedrock`: Claude over InvokeModel / InvokeModelWithResponseStream, with
//!   the Anthropic Messages body and decoder of `tollgate_anthropic::codec`.
//!
//! Link it with one line, `use tollgate_bedrock as _;`, and name a key in the catalog:
//!
//! ```toml
//! [models.claude-bedrock]
//! provider = "anthropic-bedrock"
//! name = "anthropic.claude-sonnet-4-5-20250929-v1:0"   # the Bedrock model id
//! credential = "aws-main"        # optional: an AWS record in the credential store
//! max_output_tokens = 64000
//! [models.claude-bedrock.options]
//! region = "us-east-1"           # required, never defaulted
//! # endpoint_url = "http://127.0.0.1:4566"   # an override, for proxies and tests
//! ```
//!
//! The credential record is JSON: `{"access_key_id": "AKIA…", "secret_access_key":
//! "…", "session_token": "…"}` (`session_token` optional). It is read from the store on
//! every call, never copied. A model without `credential` uses the AWS default
//! credential chain (environment, profile, web identity, ECS, IMDS), which the AWS SDK
//! reads itself.
//!
//! The SDK's own retries are disabled (`RetryConfig::disabled()`) and its connect
//! timeout is tollgate's: the pipeline in `tollgate` is the one place that retries,
//! times out, rate-limits and records. Errors are mapped by modeled exception name; see
//! `docs/providers/bedrock.md`.
//!
//! A client for it, as an application makes one (building it sends nothing: the provider
//! is built on the first `chat` and reads the key from the store on every call):
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Conversation, Models, SamplingParams};
//! use tollgate_bedrock as _; // links the provider: its key is now known to catalogs
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tollgate::Result<()> {
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.claude]
//!     provider = "anthropic-bedrock"
//!     name = "anthropic.claude-sonnet-4-5-20250929-v1:0"
//!     credential = "aws-main"
//!     max_output_tokens = 8192
//!     rpm = 50
//!     options = { region = "us-east-1" }   # required, never defaulted
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("aws-main", r#"{"access_key_id": "AKIA…", "secret_access_key": "…"}"#))
//!     .build()?;
//! let chat = models.chat("claude").await?;
//! let request = Conversation::new().user("Hello?").request("claude", SamplingParams::new())?;
//! // `chat.single_response(&request).await?` sends it to Bedrock in us-east-1, signed with the record's keys (it needs a real key
//! // and the network, so this example stops here).
//! # drop((chat, request));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod anthropic;
mod client;
mod codec;
mod converse;
mod embeddings;
mod exceptions;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod provider;
mod response_cap;

pub use anthropic::{AnthropicBedrockChat, BEDROCK_ANTHROPIC_VERSION};
pub use converse::ConverseChat;
pub use embeddings::BedrockEmbeddings;
pub use provider::{AnthropicBedrockProvider, BedrockConverseProvider};

/// The provider key for Bedrock's Converse API.
pub const BEDROCK_CONVERSE: &str = "bedrock-converse";

/// The provider key for Claude over InvokeModel with the Anthropic body.
pub const ANTHROPIC_BEDROCK: &str = "anthropic-bedrock";

tollgate::register_provider!(|| std::sync::Arc::new(AnthropicBedrockProvider));
tollgate::register_provider!(|| std::sync::Arc::new(BedrockConverseProvider));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
