//! The shared behaviours, one function per behaviour, each run against a fresh
//! scripted server by [`provider_contract_tests!`](crate::provider_contract_tests).

mod answers;
mod embeddings;
mod errors;
mod faults;
mod overflow;
mod secrets;
mod settings;
mod streams;
mod tools;

pub use answers::*;
pub use embeddings::*;
pub use errors::*;
pub use faults::*;
pub use overflow::*;
pub use secrets::*;
pub use settings::*;
pub use streams::*;
pub use tools::*;
