//! The `azure-openai` provider for tollgate: Azure OpenAI's Chat Completions (whole,
//! streamed, with tools), embeddings and Responses API, on a resource's deployment URLs,
//! through the OpenAI codec of `tollgate-openai`. The guide is
//! `docs/providers/azure-openai.md`.
//!
//! ```toml
//! [models.azure-gpt]
//! provider = "azure-openai"
//! name = "gpt-4o"                        # the deployment's name unless `deployment` says
//! credential = "azure-key"               # the resource key's id in the credential store
//! max_output_tokens = 16384
//! [models.azure-gpt.options]
//! endpoint = "https://myres.openai.azure.com"   # required: the resource's address
//! deployment = "prod-gpt-4o"             # optional (default: `name`)
//! api_version = "2024-10-21"             # optional (default 2024-10-21; "v1": the v1 API)
//! auth = "api-key"                       # or "entra"
//! ```
//!
//! What differs from OpenAI, and where it is handled:
//!
//! - **addresses** ([`AzureOptions`]): `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=V`
//!   and `…/embeddings?api-version=V`; the Responses API (`api = "responses"`) at
//!   `{endpoint}/openai/responses?api-version=V` with the deployment as the body's
//!   `model`; with `api_version = "v1"`, `{endpoint}/openai/v1/{chat/completions,embeddings,responses}`.
//! - **sign-in** ([`AuthMode`]): the resource key as the `api-key` header, or an Entra
//!   ID token as a bearer ([`entra`]: a service principal's record from the credential
//!   store, or the application's [`TokenSource`] via [`AzureProvider::with_tokens`]).
//! - **content filter** ([`dialect`]): a `content_filter` finish is a refusal whose
//!   category names the filtered categories of `content_filter_results`
//!   (`content_filter:hate,violence`), whole and streamed; a prompt refused with HTTP 400
//!   `code = "content_filter"` is `Error::ProviderRefusal` whose category names those of
//!   `innererror.content_filter_result`.
//! - **rate limits** ([`AZURE_RATE_LIMITS`]): only the token headers, which are per
//!   minute; the request headers count a shorter window and are not read.
//!
//! A client for it (building sends nothing):
//!
//! ```
//! use tollgate::credentials::MemoryCredentialStore;
//! use tollgate::{Catalog, Models};
//! use tollgate_azure as _; // links the provider
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> tollgate::Result<()> {
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.azure-gpt]
//!     provider = "azure-openai"
//!     name = "gpt-4o"
//!     credential = "azure-key"
//!     max_output_tokens = 4096
//!     [models.azure-gpt.options]
//!     endpoint = "https://myres.openai.azure.com"
//! "#)?;
//! let models = Models::builder()
//!     .catalog(catalog)
//!     .credentials(MemoryCredentialStore::new().with("azure-key", "key-from-your-secret-store"))
//!     .build()?;
//! let chat = models.chat("azure-gpt").await?;
//! # drop(chat);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::Arc;

use tollgate::provider::Dimension;
use tollgate::provider::http::{RateLimitHeaders, Reset};
use tollgate_openai::preset::{Dialect, Paths, Preset};

pub mod dialect;
pub mod entra;
mod options;
mod provider;

pub use entra::{COGNITIVE_SERVICES_SCOPE, ClientSecretTokens, TokenSource};
pub use options::{AuthMode, AzureOptions, DEFAULT_API_VERSION, DEFAULT_AUTHORITY_HOST, V1};
pub use provider::AzureProvider;

/// The provider key.
pub const KEY: &str = "azure-openai";

/// The rate-limit headers read: the deployment's tokens per minute
/// (`x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens`). Azure's
/// `x-ratelimit-*-requests` count a window shorter than a minute and are not read as
/// requests per minute; its reset headers are not documented and are not read.
pub const AZURE_RATE_LIMITS: &[RateLimitHeaders] = &[RateLimitHeaders {
    dimension: Dimension::Tokens,
    limit: "x-ratelimit-limit-tokens",
    remaining: "x-ratelimit-remaining-tokens",
    reset: "",
    reset_format: Reset::Seconds,
}];

/// Azure OpenAI as an OpenAI-like preset: OpenAI's quirks (`max_completion_tokens`,
/// stream usage, `[DONE]`, logprobs, tiktoken), Azure's rate-limit headers,
/// content filter and error reader. Its paths are the v1 API's; each model's own
/// (deployment, `api-version`) come from its options ([`AzureOptions`]), and so does
/// its address (`endpoint`: the preset's `base_url` is a placeholder never sent to).
pub const PRESET: Preset = Preset {
    key: KEY,
    conventions_name: "azure.ai.openai",
    base_url: Some(""),
    paths: Paths {
        chat: "/openai/v1/chat/completions",
        embeddings: Some("/openai/v1/embeddings"),
        responses: Some("/openai/v1/responses"),
    },
    requires_credential: true,
    rate_limits: AZURE_RATE_LIMITS,
    dialect: Dialect {
        provider: KEY,
        filtered: Some(dialect::filtered),
        error: dialect::read_error,
        ..Dialect::OPENAI
    },
    ..Preset::OPENAI
};

tollgate::register_provider!(|| Arc::new(AzureProvider::new()));

/// Re-exported so that binaries depending only on this crate can name tollgate's types.
pub use tollgate;
