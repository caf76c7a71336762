//! The `perplexity` provider for tollgate (being written: registers nothing yet).
#![deny(missing_docs)]
#![forbid(unsafe_code)]
