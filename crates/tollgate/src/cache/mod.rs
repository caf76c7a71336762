//! Cache keys and the replay cache.
//!
//! A [`CacheKey`] names one request in one activation: sha256 over the canonical JSON
//! of the request's four components, the caller's activation key and a sequence number.
//! The replay cache maps keys to canonical response bytes, so a recorded run can be
//! replayed offline (the `fake` provider does this).

mod key;
mod replay;

pub use key::{CacheKey, compute_cache_key};
pub use replay::{DirReplayStore, MemoryReplayStore, ReplayCache, ReplayStore};
