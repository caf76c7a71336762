//! Benchmark 10: the gateway, `tollgate serve`, beside LiteLLM's proxy (pinned 1.81.16,
//! installed into `target/peers` by `scripts/peers.sh litellm`), in one run
//! (`benches/gateway.rs`):
//!
//! - [`overhead`]: added latency, throughput, CPU and peak RSS at concurrency 1 to 256,
//!   in front of a fast upstream;
//! - [`pacing`]: three client processes through two replicas sharing Redis, against
//!   llmock enforcing a limit; LiteLLM with its `rpm` setting beside;
//! - [`head_of_line`]: small streamed turns' first token while a 100k-token request
//!   goes through.
//!
//! [`process`] starts and stops the servers and reads `/proc`; [`load`] is the client.

pub mod head_of_line;
pub mod load;
pub mod overhead;
pub mod pacing;
pub mod process;
