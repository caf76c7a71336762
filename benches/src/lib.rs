//! Benchmarks of tollgate's rate limiter beside the baselines it should beat, and the
//! simulations behind them (`cargo xtask bench` runs them all and writes
//! `docs/benchmarks.md`).
//!
//! - [`overhead`] (benchmark 1): a queue of waiters released by a manual clock or by
//!   hand-off, with wake-ups counted; the nanosecond rows are measured with criterion in
//!   `benches/overhead.rs`.
//! - [`pacing`] (benchmark 2): closed-loop callers against
//!   [`tollgate_sim::SimProvider`] for ten simulated minutes.
//! - [`adaptive`] (benchmark 3): a provider that serves less than it publishes.
//! - [`priority`] (benchmark 4): interactive calls' queue delay under a saturating batch
//!   load, one FIFO queue against priority classes.
//! - [`headers`] (benchmark 5): pacing by the provider's rate-limit headers, continuous
//!   and fixed-window providers, Anthropic- and OpenAI-style headers.
//! - [`first_call`]: a fresh process's first call through `openai` and
//!   `openai-compatible`, many processes against a minimal server on loopback
//!   (`benches/first_call.rs`).
//! - [`peers`] (benchmark 9): pacing against llmock, a third-party server run with its
//!   own rate limits: tollgate beside the cookbook's pacing and a naive client, each
//!   against the best possible replayed from llmock's buckets (`benches/peers.rs`).
//! - [`gateway`] (benchmark 10): `tollgate serve` beside LiteLLM's proxy: overhead,
//!   pacing through two replicas on Redis, head-of-line blocking (`benches/gateway.rs`).
//! - [`clients`]: the strategies compared: tollgate, naive retry, the OpenAI cookbook's
//!   pacer, governor, a port of the AWS SDK's adaptive mode (CUBIC), AIMD.
//! - [`sim_http`]: the simulated provider served over HTTP on loopback, for benchmark 4
//!   (`benches/distributed.rs`: four OS processes sharing one quota, with `tollgate-redis`).
//! - [`redis_server`]: the Redis the multi-process benchmarks share.
//! - [`report`], [`stats`], [`workload`]: tables, statistics, seeded sizes.
//!
//! The simulations run on tokio's paused clock, so ten simulated minutes take a fraction
//! of a second and the same seed gives the same figures on every run. The tests in
//! `tests/` run reduced versions with hard assertions on behaviour, never on wall time.

#![deny(missing_docs)]

pub mod adaptive;
pub mod clients;
pub mod first_call;
pub mod gateway;
pub mod headers;
pub mod overhead;
pub mod pacing;
pub mod peers;
pub mod priority;
pub mod redis_server;
pub mod report;
pub mod sim_http;
pub mod stats;
pub mod workload;

/// A two-worker runtime on the real clock, for a benchmark against real servers.
pub fn real_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Builds a current-thread runtime whose clock starts paused, for a simulation.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}
