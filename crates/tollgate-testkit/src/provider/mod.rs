//! The provider contract kit: a provider crate scripts how its wire format looks
//! ([`WireScript`]); the kit runs the behaviours every provider shares against a local
//! scripted server ([`ScriptServer`]) through `Models`, and checks the typed outcome,
//! the number of sends, what was recorded and that the secret never shows.
//!
//! ```ignore
//! // crates/my-provider/tests/contract.rs
//! struct MyWire;
//! impl tollgate_testkit::provider::WireScript for MyWire { /* … */ }
//! tollgate_testkit::provider_contract_tests!(MyWire);
//! ```

pub mod checks;
mod contract;
mod counting;
mod forms;
mod harness;
mod outcome;
mod script;
mod server;

pub use counting::CountingLimiters;
pub use forms::{Form, find_secret};
pub use harness::{
    BASE_URL, CREDENTIAL, EMBEDDING_WIDTH, EMBEDDINGS, Kit, LARGER, LARGER_WINDOW, Logs, MODEL,
    PRICE, RPM, SECRET, Tweak, USAGE, assert_no_task_left, embeddings_entry, models, request,
    streamed_text,
};
pub use outcome::{Checked, Declared};
pub use script::{EmbeddingsWire, StreamScript, WireScript, WireToolCall, WireUsage};
pub use server::{Body, End, Recorded, RefusingPort, Reply, Responder, ScriptServer};
/// What [`WireScript::register`] registers a scripted provider's models on, here so a
/// provider crate's script imports it from the kit rather than the application's root.
pub use tollgate::ModelsBuilder;
