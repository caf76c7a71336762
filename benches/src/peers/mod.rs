//! Benchmark 9: pacing against a third-party server, llmock (PyPI `llmock==0.2.2`),
//! started by `scripts/peers.sh llmock NAME --rpm N --tpm N --latency-ms N` with its own
//! rate limits (continuous buckets per API key that start full, rate-limit headers, 429
//! with `retry-after`).
//!
//! - [`journal`]: llmock's journal (`GET /_llmock/requests`) read back: send times,
//!   answers, 429s, and what each request was charged.
//! - [`oracle`]: the best possible, by replaying llmock's buckets.
//! - [`wire`]: the dialects, the seeded workload, and raw requests for the baselines.
//! - [`clients`]: tollgate (`Models`), the cookbook's pacing, the naive client.
//! - [`child`]: clients in other processes (`tollgate run`; the Redis row's parts).
//! - [`server`]: llmock instances and their clock.
//! - [`measure`]: one client's figures beside the best, and tollgate's targets.
//! - [`run`]: the rows, run in phases whose clients share one llmock on separate keys.
//! - [`section`]: the tables for `docs/benchmarks.md`.
//!
//! `benches/peers.rs` runs it for `cargo xtask bench`; `tests/peers.rs` checks the parser
//! and the replay on hand-made journals and, when llmock can be started, runs a tiny row.

pub mod child;
pub mod clients;
pub mod journal;
pub mod measure;
pub mod oracle;
pub mod run;
pub mod section;
pub mod server;
pub mod wire;
