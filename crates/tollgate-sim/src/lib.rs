//! The `sim` provider: a simulated provider that enforces rate limits exactly like a real
//! one, for demos, benchmarks and pacing tests, with no keys and no network.
//!
//! How a call flows through this crate:
//!
//! 1. A catalog model with `provider = "sim"` (link the crate with
//!    `use tollgate_sim as _;`) gets one [`SimProvider`] built from its limits
//!    ([`provider::sim_config_for`]): `rpm`, `input_tpm` (or `tpm`), `output_tpm`,
//!    `burst_seconds = 1` for per-second buckets, and `[models.ID.options]` for answer
//!    times (fixed or drawn), network delays and output size.
//! 2. The model's chat transport turns each request into three numbers (input tokens as
//!    tollgate estimates them, the output limit, the output it will produce) and calls
//!    the simulated provider on tokio's clock (the call reaches it after its network
//!    delay, is admitted or refused and given its headers then, and answers after its
//!    answer time, so concurrent calls can arrive and come back out of order); a refusal becomes
//!    `ProviderError::RateLimited { retry_after }` or `ProviderError::Overloaded`, an
//!    acceptance a generated answer with its usage.
//! 3. [`http::serve`] puts a [`SimProvider`] behind an OpenAI chat-completions endpoint on
//!    127.0.0.1 (with `retry-after` and `x-ratelimit-*` headers), so the
//!    `openai-compatible` provider, or any other client, can be measured against it.
//!
//! The simulation itself ([`SimProvider`], [`SimConfig`] ...) knows nothing of HTTP or
//! of tollgate's request types: a call is three numbers ([`SimRequest`]), so the
//! benchmarks measure any client strategy against it (`simulator.rs` says how a call
//! flows through it). Tests and examples use the scripted `fake` provider
//! (crate `tollgate-fake`) instead.
//!
//! ```
//! use tollgate::{Catalog, Conversation, Models, SamplingParams};
//! use tollgate_sim as _; // links the `sim` provider
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> tollgate::Result<()> {
//! // 60 requests a minute, enforced by the simulation as one a second.
//! let catalog = Catalog::from_toml_str(r#"
//!     [models.demo]
//!     provider = "sim"
//!     max_output_tokens = 256
//!     rpm = 60
//!     burst_seconds = 1
//! "#)?;
//! let models = Models::builder().catalog(catalog).build()?;
//! let chat = models.chat("demo").await?;
//! let request = Conversation::new().user("Hi").request("demo", SamplingParams::new())?;
//! for _ in 0..3 {
//!     // Paced by tollgate's limiter, so the simulation never has to refuse.
//!     let answer = chat.single_response(&request).await?;
//!     assert!(answer.usage().output_tokens > 0);
//! }
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod answer;
mod bucket;
mod call;
mod config;
mod delay;
pub mod http;
pub mod provider;
mod rng;
mod simulator;

pub use bucket::{ContinuousBucket, FRACTION_ONE, Spilled};
pub use call::{
    SimAnswer, SimCall, SimCharge, SimDimension, SimOutcome, SimRefusal, SimRequest, SimStats,
};
pub use config::{
    OutputCharge, RetryAfter, SimCapacity, SimConfig, SimHeaderStyle, SimHeaders, SimLatency,
    SimLimitHeader, SimLimits, SimReset, SimWindow,
};
pub use delay::{SimDelay, SimTimings};
pub use provider::{KEY, SimClientProvider};
pub use rng::SimRng;
pub use simulator::SimProvider;

#[cfg(test)]
mod tests;
