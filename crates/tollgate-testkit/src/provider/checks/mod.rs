//! The shared behaviours, one function per behaviour, each run against a fresh
//! scripted server by [`provider_contract_tests!`](crate::provider_contract_tests).

mod answers;
mod errors;
mod faults;
mod overflow;
mod secrets;
mod streams;

pub use answers::*;
pub use errors::*;
pub use faults::*;
pub use overflow::*;
pub use secrets::*;
pub use streams::*;
