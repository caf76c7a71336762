//! Benchmark 10: the gateway, `tollgate serve`, beside LiteLLM's proxy (pinned 1.81.16,
//! installed into `target/peers` by `scripts/peers.sh litellm`), in one run
//! (`benches/gateway.rs`):
//!
//! - [`overhead`]: added latency, throughput, CPU per request and peak RSS of
//!   `tollgate serve`, Portkey's gateway and LiteLLM's proxy, each pinned alone to one
//!   core in front of nginx, driven by wrk at concurrency 1 to 256 (streamed too) and
//!   by an open-loop driver ([`open_loop`]) at a constant rate; [`overhead_report`] its
//!   tables and target lines, [`pinned`] nginx, wrk and Portkey;
//! - [`pacing`]: three client processes through two replicas sharing Redis, against
//!   llmock enforcing a limit; LiteLLM with its `rpm` setting beside;
//! - [`head_of_line`]: small streamed turns' first token while a 100k-token request
//!   goes through.
//!
//! [`process`] starts and stops the servers and reads `/proc`; [`load`] is the
//! head-of-line part's client (and the small request the open loop sends too).

pub mod head_of_line;
pub mod load;
pub mod open_loop;
pub mod overhead;
pub mod overhead_report;
pub mod pacing;
pub mod pinned;
pub mod process;
