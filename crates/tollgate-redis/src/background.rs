//! The script calls a reservation does not wait for: settlements and refunds (from its
//! [`BucketLedger`]) and a provider's feedback. Each runs on a task of its own, retried
//! with back-off while Redis is unreachable, and counted until it lands so that
//! [`RedisLimiter::flush`](crate::RedisLimiter::flush) can wait for it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tollgate::limit::{BucketLedger, Cost, CostDelta};

use crate::buckets::Buckets;
use crate::config::RedisLimiterError;
use crate::feedback::FeedbackCall;
use crate::script::ScriptArgs;

/// How long a settle's id is remembered, so that a retried settle is applied once.
const SETTLE_ID_TTL_MS: u64 = 10 * 60 * 1000;
/// How often a settle or feedback call is tried before it is given up (logged).
const SETTLE_ATTEMPTS: u32 = 8;

/// Counts a script call in flight for [`RedisLimiter::flush`](crate::RedisLimiter::flush).
pub(crate) struct InFlight(Arc<Buckets>);

impl InFlight {
    pub(crate) fn new(buckets: &Arc<Buckets>) -> Self {
        buckets.pending.fetch_add(1, Ordering::SeqCst);
        InFlight(buckets.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// What a background call sends.
pub(crate) enum Sent {
    /// A correction; `unsent`: it gives back a reservation that was never sent, which
    /// also leaves the line of bookings (`tk:<name>` in the script).
    Settle {
        delta: CostDelta,
        unsent: bool,
    },
    Feedback(FeedbackCall),
}

impl Buckets {
    /// A settle or feedback call, retried while Redis is unreachable (a settle carries
    /// an id, so a retry after a lost reply is not applied twice).
    async fn send_retried(self: Arc<Self>, what: &'static str, sent: Sent) {
        let mut delay = Duration::from_millis(20);
        let mut settle_id: Option<String> = None;
        for attempt in 1..=SETTLE_ATTEMPTS {
            // A settle carries an id (its process's, from Redis, then a counter), so that
            // a retry after a lost answer is applied once.
            if matches!(sent, Sent::Settle { .. }) && settle_id.is_none() {
                match self.conn.instance().await {
                    Ok(instance) => {
                        settle_id = Some(format!(
                            "{}:op:{instance}:{}",
                            self.key.trim_end_matches(":lim"),
                            self.conn.next_op()
                        ));
                    }
                    Err(e) => {
                        if !self.back_off(what, attempt, &mut delay, &e).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            // Made again on each attempt: a report's age is counted to the call's `now`.
            let at = tollgate::clock::now();
            let inv = match &sent {
                Sent::Settle { delta, unsent } => self.invocation(
                    at,
                    "settle",
                    settle_id.as_deref(),
                    ScriptArgs::settle(SETTLE_ID_TTL_MS, *unsent),
                    |d| delta.on(d),
                ),
                Sent::Feedback(call) => self.invocation(at, "feedback", None, call.args(at), |_| 0),
            };
            self.round_trips.fetch_add(1, Ordering::Relaxed);
            match self.conn.invoke::<Vec<i64>>(&inv).await {
                Ok(reply) => {
                    // A feedback's answer carries the epoch it left.
                    if let [1, _, _, epoch] = reply.as_slice() {
                        self.epoch.saw(u64::try_from(*epoch).unwrap_or(0));
                    }
                    return;
                }
                Err(e) => {
                    if !self.back_off(what, attempt, &mut delay, &e).await {
                        return;
                    }
                }
            }
        }
    }

    /// After failed attempt `attempt`: counts the failure, and either gives up (logged;
    /// `false`) after the last attempt or sleeps `delay` and doubles it (up to 2 s).
    async fn back_off(
        &self,
        what: &str,
        attempt: u32,
        delay: &mut Duration,
        error: &RedisLimiterError,
    ) -> bool {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if attempt == SETTLE_ATTEMPTS {
            tracing::warn!(model = %self.model_id, error = %error, "tollgate-redis: {what} given up");
            return false;
        }
        tokio::time::sleep(*delay).await;
        *delay = (*delay * 2).min(Duration::from_secs(2));
        true
    }

    /// Sends `sent` on a task of its own (lost, with a warning, outside a tokio runtime).
    pub(crate) fn spawn(self: &Arc<Self>, what: &'static str, sent: Sent) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(model = %self.model_id, "tollgate-redis: {what} outside a tokio runtime is lost");
            return;
        };
        let flight = InFlight::new(self);
        let buckets = self.clone();
        runtime.spawn(async move {
            buckets.send_retried(what, sent).await;
            drop(flight);
        });
    }
}

/// Issues the Redis reservations' refunds and settlements.
pub(crate) struct Ledger(pub(crate) Arc<Buckets>);

impl BucketLedger for Ledger {
    fn adjust(&self, delta: CostDelta) {
        if !delta.is_zero() {
            let unsent = false;
            self.0.spawn("settle", Sent::Settle { delta, unsent });
        }
    }

    /// Gives back a reservation that was never sent: its booking leaves the line too, so
    /// that the bookings behind it keep their place (`check`).
    fn refund(&self, cost: &Cost) {
        let delta = CostDelta::refund(cost);
        if !delta.is_zero() {
            let unsent = true;
            self.0.spawn("settle", Sent::Settle { delta, unsent });
        }
    }
}
