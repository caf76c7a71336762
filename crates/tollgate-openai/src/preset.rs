//! The OpenAI wire format for other provider crates: a [`Preset`] names an OpenAI-like
//! API (its key, address, paths, rate-limit headers, quirks) and its [`Dialect`] says how
//! its wire format differs from OpenAI's, so that such a provider is a preset plus its
//! differences, registered with [`OpenAiProvider::new`](crate::OpenAiProvider::new).
//!
//! ```
//! use tollgate::provider::StopReason;
//! use tollgate_openai::preset::{Dialect, Preset};
//!
//! /// An API that says `any` for "call some tool" and `model_length` for a cut answer.
//! const EXAMPLE: Preset = Preset {
//!     key: "example",
//!     base_url: Some("https://api.example.com"),
//!     dialect: Dialect {
//!         provider: "example",
//!         required_tool_choice: "any",
//!         finish_reasons: &[("model_length", StopReason::MaxTokens)],
//!         ..Dialect::OPENAI
//!     },
//!     ..Preset::COMPATIBLE
//! };
//! assert_eq!(EXAMPLE.paths.chat, "/v1/chat/completions");
//! ```

pub use crate::dialect::{BatchApi, Dialect, OutputLimitField, Paths, Preset, Quirks, RequestHook};
pub use crate::options::OpenAiOptions;
pub use crate::provider::OpenAiProvider;
/// The rate-limit headers a preset reads, and how their resets are written.
pub use tollgate::provider::http::{RateLimitHeaders, Reset};
/// The request settings a dialect may refuse, and the stop reasons its finish reasons
/// mean.
pub use tollgate::provider::{Setting, StopReason};
