//! The `fake` provider: answers from a script or a replay cache, streams answers as
//! deltas, and injects the failures real providers produce, all offline.
//!
//! How a call flows through it: [`FakeProvider`] is registered under the key `fake`
//! (link it with `use tollgate_fake as _;`), or passed to
//! [`tollgate::ModelsBuilder::provider`] when a test wants to script it. Each call to a
//! model is counted; the answer is, in order of precedence:
//!
//! 1. a fault injected on that call number ([`FakeProvider::inject`]);
//! 2. the first matching rule ([`FakeProvider::on`]);
//! 3. the next step queued for the model ([`FakeProvider::reply`], [`FakeProvider::fail`]),
//!    or for any model ([`FakeProvider::reply_any`]);
//! 4. the replay cache ([`FakeProvider::replay`]);
//! 5. otherwise [`tollgate::Error::UnmatchedRequest`].
//!
//! Catalog entries can script the registered provider without code:
//! `[models.m.options] replies = ["first answer", "second answer"]`, and
//! `replay_dir = "path"` with `replay_key = "activation"`; `max_batch = 96` makes its
//! embeddings (texts) and decision (questions) transports take at most that many items per
//! request, as a real provider's would (unset: any number).
//!
//! ```
//! use tollgate::{Catalog, Conversation, Models, SamplingParams, catalog::ModelEntry};
//! use tollgate_fake::{FakeProvider, FakeReply, Fault};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> tollgate::Result<()> {
//! let fake = FakeProvider::new();
//! fake.fail("m", Fault::Overloaded { retry_after: None });
//! fake.reply("m", FakeReply::text("Hello!"));
//!
//! let catalog = Catalog::builder().model(ModelEntry::new("m", "fake", "fake-1").with_output_tokens(100, 50)).build()?;
//! let models = Models::builder().catalog(catalog).provider(fake.clone()).build()?;
//! let chat = models.chat("m").await?;
//! let request = Conversation::new().user("Hi").request("m", SamplingParams::new())?;
//! // The injected 529 is retried by the pipeline; the caller sees only the answer.
//! assert_eq!(chat.single_response(&request).await?.text(), "Hello!");
//! assert_eq!(fake.calls("m"), 2);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod options;
mod provider;
mod script;
mod transports;

pub use provider::FakeProvider;
pub use script::{FakeReply, Fault};
/// The core crate, re-exported so a binary that depends only on provider crates can use it.
pub use tollgate;

/// The provider key.
pub const KEY: &str = "fake";

tollgate::register_provider!(|| std::sync::Arc::new(FakeProvider::new()));
