//! What a model's shared buckets hold now, read in one script call: each dimension's
//! level and the capacity in force, the throttle factor, and the grant counters.

use std::sync::atomic::Ordering;

use tollgate::Result;
use tollgate::limit::LimiterSnapshot;

use crate::buckets::Buckets;
use crate::config::RedisLimiterError;
use crate::script::ScriptArgs;

impl Buckets {
    /// The buckets' [`LimiterSnapshot`]: levels as Redis holds them (a waiter's booking is
    /// a negative level; reserve-ahead keeps no queue).
    pub(crate) async fn snapshot(&self) -> Result<LimiterSnapshot> {
        if self.dims.is_empty() {
            return Ok(LimiterSnapshot {
                levels: Vec::new(),
                queued: 0,
                queued_by_class: [0; 3],
                rate_factor: 1.0,
                grants: 0,
                waited: 0,
                held: 0,
            });
        }
        let inv = self.invocation(
            tollgate::clock::now(),
            "snapshot",
            None,
            ScriptArgs::default(),
            |_| 0,
        );
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let reply: Vec<redis::Value> = self
            .conn
            .invoke(&inv)
            .await
            .map_err(|e| self.unavailable(e))?;
        let bad = || {
            self.unavailable(RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: format!("{reply:?}"),
            })
        };
        let float = |v: &redis::Value| -> Option<f64> {
            redis::from_redis_value_ref::<String>(v).ok()?.parse().ok()
        };
        let int = |v: &redis::Value| redis::from_redis_value_ref::<u64>(v).ok();
        let n = self.dims.len();
        if reply.len() != 2 * n + 3 {
            return Err(bad());
        }
        let mut levels = Vec::with_capacity(n);
        for (i, d) in self.dims.iter().enumerate() {
            // The capacity in force: the catalog's, or a provider's lower limit's.
            let capacity = int(&reply[n + 3 + i]).ok_or_else(bad)?;
            levels.push((d.dimension, float(&reply[i]).ok_or_else(bad)?, capacity));
        }
        Ok(LimiterSnapshot {
            levels,
            // Reserve-ahead keeps no queue: a waiter's booking is the negative level.
            queued: 0,
            queued_by_class: [0; 3],
            rate_factor: float(&reply[n]).ok_or_else(bad)?,
            grants: int(&reply[n + 1]).ok_or_else(bad)?,
            waited: int(&reply[n + 2]).ok_or_else(bad)?,
            // Reservations live in each process: Redis cannot count them.
            held: 0,
        })
    }
}
