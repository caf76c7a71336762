//! How a Redis backend is configured: the server, the clock, the failure policy, and
//! what a failed Redis call says.

use std::time::Duration;

use tokio::time::Instant;

/// Which clock the buckets refill by.
#[derive(Debug, Clone, Copy, Default)]
pub enum RedisClock {
    /// Redis `TIME`, read inside the script: one clock for every process, immune to
    /// client clock skew. The production setting.
    #[default]
    Server,
    /// The tokio clock, as microseconds since `epoch`, passed to the script: for tests on
    /// tokio's paused clock. Every process sharing the keys must use the same epoch, so
    /// this is for one test process only. Disables the call timeout (a paused clock
    /// would fire it while a reply is on its way).
    Tokio {
        /// The instant that is 0 µs.
        epoch: Instant,
    },
}

/// What to do when Redis cannot be reached or does not answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Fail the reservation with [`Error::LimiterUnavailable`](tollgate::Error::LimiterUnavailable) (names Redis and the
    /// model); nothing is sent unreserved. The default.
    #[default]
    FailClosed,
    /// Reserve from an in-process limiter at `limit / expected_processes` until Redis
    /// answers again. Opt-in: if more processes than expected run, the provider sees
    /// more than its limit.
    LocalFallback {
        /// How many processes share the quota.
        expected_processes: u32,
    },
}

/// Where and how the buckets live in Redis.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// The Redis URL: one node, e.g. `redis://127.0.0.1:6379/`, or a Redis Cluster,
    /// `redis+cluster://host:7000` or comma-separated seeds
    /// `redis://a:7000,redis://b:7001` (see `docs/distributed.md`).
    pub url: String,
    /// The key prefix (default `tollgate`): keys are `{prefix}:{<model>}:lim`.
    pub key_prefix: String,
    /// What to do when Redis is unreachable.
    pub failure_policy: FailurePolicy,
    /// The clock.
    pub clock: RedisClock,
    /// How long one script call may take before it counts as a failure (default 1 s;
    /// not applied on [`RedisClock::Tokio`]).
    pub call_timeout: Duration,
}

impl RedisConfig {
    /// Defaults for `url`: prefix `tollgate`, fail closed, Redis `TIME`, 1 s timeout.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            key_prefix: "tollgate".into(),
            failure_policy: FailurePolicy::FailClosed,
            clock: RedisClock::Server,
            call_timeout: Duration::from_secs(1),
        }
    }

    /// Sets the key prefix.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets the failure policy.
    pub fn with_failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Sets the clock.
    pub fn with_clock(mut self, clock: RedisClock) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the call timeout.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }
}

/// Why a Redis call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisLimiterError {
    /// The Redis client reported an error (connection refused, reset, server error).
    #[error("redis at {url}: {source}")]
    Redis {
        /// The URL (without credentials).
        url: String,
        /// The client's error.
        #[source]
        source: redis::RedisError,
    },
    /// Redis did not answer within the call timeout.
    #[error("redis at {url} did not answer within {timeout:?}")]
    Timeout {
        /// The URL (without credentials).
        url: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The script answered something it never answers.
    #[error("redis at {url} gave an unexpected reply: {reply}")]
    Reply {
        /// The URL (without credentials).
        url: String,
        /// The reply, for the log.
        reply: String,
    },
}

/// The model's key: the model id is the hash tag, so every key of a model is in one
/// Redis Cluster slot.
pub(crate) fn key_for(prefix: &str, model_id: &str) -> String {
    // A `}` in the id would end the tag early; keep the tag the whole id.
    let tag = model_id.replace('}', "_");
    format!("{prefix}:{{{tag}}}:lim")
}

/// The URL (or comma-separated URLs) without a password.
pub(crate) fn shown(url: &str) -> String {
    if url.contains(',') {
        return url.split(',').map(shown).collect::<Vec<_>>().join(",");
    }
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}
