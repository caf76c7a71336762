//! The reservation script (`limiter.lua`), with the throttle's constants filled in, and
//! the arguments every call passes it; [`Lua`], a script sent as `EVALSHA`, and as
//! `EVAL` (which caches it again) when the node answers `NOSCRIPT`.

use std::sync::LazyLock;
use std::time::Duration;

use tollgate::limit::throttle;

/// How long a model's hash is kept, at least, while it holds a provider's limit learned
/// from its headers (below the catalog's): an absent hash means full buckets at the
/// catalog's limits, so expiring it once the buckets are full would forget the limit and
/// let the next burst out at the catalog's size. Longer remembers a lower limit across
/// longer idle spells; a provider that raised its limit again says so in its next answer.
pub(crate) const LEARNED_LIMIT_TTL: Duration = Duration::from_secs(10 * 60);

/// The script's source, with the throttle's constants filled in.
pub(crate) static SCRIPT: LazyLock<Lua> = LazyLock::new(|| {
    let us = |d: Duration| d.as_micros().to_string();
    let src = include_str!("limiter.lua")
        .replace("@HOLDOFF_US@", &us(throttle::DECREASE_HOLDOFF))
        .replace("@RECOVERY_US@", &us(throttle::RECOVERY_DELAY))
        .replace(
            "@RATE_LIMITED_BETA@",
            &throttle::RATE_LIMITED_BETA.to_string(),
        )
        .replace("@OVERLOADED_BETA@", &throttle::OVERLOADED_BETA.to_string())
        .replace("@MIN_RATE_FACTOR@", &throttle::MIN_RATE_FACTOR.to_string())
        .replace(
            "@APPROACH_PER_SECOND@",
            &throttle::APPROACH_PER_SECOND.to_string(),
        )
        .replace(
            "@LEARNED_LIMIT_TTL_MS@",
            &LEARNED_LIMIT_TTL.as_millis().to_string(),
        );
    Lua::new(src)
});

/// A Lua script: its source and SHA1. Unlike `redis::Script`, whose reload on `NOSCRIPT`
/// is a `SCRIPT LOAD` that a cluster client sends to every node (and fails while one is
/// down, as after a failover), the reload here is one `EVAL` on the node the keys route
/// to: one more round trip, on that node only.
#[derive(Debug)]
pub(crate) struct Lua {
    src: String,
    hash: String,
}

impl Lua {
    /// The script `src`.
    pub(crate) fn new(src: String) -> Lua {
        let hash = redis::Script::new(&src).get_hash().to_owned();
        Lua { src, hash }
    }

    /// An invocation with no keys or arguments yet.
    pub(crate) fn prepare_invoke(&'static self) -> Invocation {
        Invocation {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// An invocation with `key` as its first key.
    pub(crate) fn key(&'static self, key: impl redis::ToRedisArgs) -> Invocation {
        let mut inv = self.prepare_invoke();
        inv.key(key);
        inv
    }
}

/// One call of a [`Lua`] script: its keys (every one in one hash slot) and arguments.
#[derive(Debug)]
pub(crate) struct Invocation {
    script: &'static Lua,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Invocation {
    /// Appends a key.
    pub(crate) fn key(&mut self, key: impl redis::ToRedisArgs) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Appends an argument.
    pub(crate) fn arg(&mut self, arg: impl redis::ToRedisArgs) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// `EVALSHA` (`cached`) or `EVAL` of the script with these keys and arguments.
    fn cmd(&self, cached: bool) -> redis::Cmd {
        let mut cmd = if cached {
            let mut c = redis::cmd("EVALSHA");
            c.arg(&self.script.hash);
            c
        } else {
            let mut c = redis::cmd("EVAL");
            c.arg(&self.script.src);
            c
        };
        cmd.arg(self.keys.len()).arg(&self.keys).arg(&self.args);
        cmd
    }

    /// Runs the script on `con`: `EVALSHA`, then `EVAL` if the node lacks the script (a
    /// restarted server, or a replica promoted after a failover, starts with none).
    pub(crate) async fn invoke_async<T: redis::FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<T> {
        match self.cmd(true).query_async(con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.cmd(false).query_async(con).await
            }
            other => other,
        }
    }
}

/// `ARGV[3]` to `ARGV[11]` of a script call, whose meaning depends on the operation (see
/// the head of `limiter.lua`); empty where unused.
#[derive(Debug, Default)]
pub(crate) struct ScriptArgs(pub(crate) [String; 9]);

/// A header report's arguments (`ARGV[6]` to `ARGV[11]` of a `report` feedback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReportArgs {
    /// The dimension's index among the call's dimensions, from 1.
    pub(crate) index: usize,
    /// The limit per minute the bucket is to have, and the capacity in tokens that goes
    /// with it; `None`: the one in force is kept.
    pub(crate) limit: Option<(u64, u64)>,
    /// What the provider had left, if it said.
    pub(crate) remaining: Option<u64>,
    /// µs since the answer's request was sent.
    pub(crate) sent_ago_us: u64,
    /// µs until the provider's bucket is full again, if it said (a fixed window's turn).
    pub(crate) reset_us: Option<u64>,
}

impl ScriptArgs {
    /// A reservation that waits at most `max_wait_us` (-1: any), holding the refill for
    /// `allowance_us` after a grant out of a full bucket.
    pub(crate) fn reserve(max_wait_us: i64, allowance_us: u64) -> Self {
        let mut args = ScriptArgs::default();
        args.0[0] = max_wait_us.to_string();
        args.0[1] = allowance_us.to_string();
        args
    }

    /// A settle whose id is kept `id_ttl_ms`; `unsent`: it gives back a reservation that
    /// was never sent (which leaves the line of bookings too).
    pub(crate) fn settle(id_ttl_ms: u64, unsent: bool) -> Self {
        let mut args = ScriptArgs::default();
        args.0[0] = id_ttl_ms.to_string();
        if unsent {
            args.0[1] = "1".into();
        }
        args
    }

    /// Feedback of `kind` (`ok`, `429`, `529`, `pause` or `report`), pausing the model
    /// `pause_us` from now if given.
    pub(crate) fn feedback(kind: &str, pause_us: Option<u64>, report: Option<ReportArgs>) -> Self {
        let mut args = ScriptArgs::default();
        args.0[1] = kind.to_owned();
        args.0[2] = pause_us.map(|p| p.to_string()).unwrap_or_default();
        if let Some(r) = report {
            args.0[3] = r.index.to_string();
            if let Some((limit, capacity)) = r.limit {
                args.0[4] = limit.to_string();
                args.0[5] = capacity.to_string();
            }
            args.0[6] = r.remaining.map(|x| x.to_string()).unwrap_or_default();
            args.0[7] = r.sent_ago_us.to_string();
            args.0[8] = r.reset_us.map(|x| x.to_string()).unwrap_or_default();
        }
        args
    }
}
