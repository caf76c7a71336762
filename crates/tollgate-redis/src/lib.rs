//! A [`LimiterBackend`](tollgate::limit::LimiterBackend) on Redis: many processes sharing one provider quota.
//!
//! Each catalog model's buckets (requests, tokens, input and output tokens per minute),
//! its adaptive throttle factor, its provider pause and any lower limit a provider's
//! headers said live in one Redis hash, `{prefix}:{model}:lim` (a hash tag, so one Redis
//! Cluster slot). One Lua script call (one round trip) reserves every dimension at once
//! or none and answers "granted, start after D" (*reserve-ahead*, as
//! `golang.org/x/time/rate`'s `Reserve`): order across processes is arrival order at
//! Redis, a large call is never starved, and the waiter sleeps exactly D holding a booked
//! slot and nothing else (no connection, no permit) (`reserve.rs`).
//! Dropping a reservation before it is sent gives it back; settlement after the answer
//! is a second call (`background.rs`), and so is what the answer said about the rate
//! (`feedback.rs`: 429s, 529s, rate-limit headers), which every process then sees. See
//! `docs/distributed.md`. [`RedisLimiters::spend`] puts spend caps' accounts on the same
//! Redis ([`RedisSpend`]), so a cap counts every process's calls, and
//! [`RedisLimiters::queue`] a batch API's queue limits ([`RedisQueueLedger`]: a hash of
//! holds per account, so enqueued tokens and pending batches count every process's). The URL may name a
//! Redis Cluster instead of one node (`redis+cluster://host:port`, or comma-separated
//! seeds `redis://a:7000,redis://b:7001`): every script's keys share one hash slot, so a
//! reservation is still one round trip, on the primary of its model's slot.
//!
//! ```
//! use tollgate_redis::{FailurePolicy, RedisConfig, RedisLimiters};
//! use tollgate_fake as _;
//!
//! # fn main() -> tollgate::Result<()> {
//! // Connects lazily, on the first reservation: building needs no server.
//! let redis = RedisLimiters::new(
//!     RedisConfig::new("redis://127.0.0.1:6379/").with_failure_policy(FailurePolicy::FailClosed),
//! )?;
//! let models = tollgate::Models::builder()
//!     .catalog(tollgate::Catalog::from_toml_str(
//!         "[models.m]\nprovider = \"fake\"\nmax_output_tokens = 100\nrpm = 60\n",
//!     )?)
//!     .limiter_backend(redis) // every model's buckets in Redis, shared by every process
//!     .build()?;
//! # drop(models);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod background;
mod buckets;
mod config;
mod conn;
mod epochs;
mod factory;
mod feedback;
mod limiter;
mod priority;
mod queue;
mod reserve;
mod script;
mod snapshot;
mod spend;
mod target;

pub use config::{FailurePolicy, RedisClock, RedisConfig, RedisLimiterError};
pub use factory::RedisLimiters;
pub use limiter::RedisLimiter;
pub use priority::BATCH_HORIZON;
pub use queue::RedisQueueLedger;
pub use reserve::BookedSlot;
pub use spend::{DEFAULT_SPEND_TTL, RedisSpend};

#[cfg(test)]
mod tests;
