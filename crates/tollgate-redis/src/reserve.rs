//! A reservation on Redis: one script call books a slot in every dimension at once, or
//! none, and answers when it starts (*reserve-ahead*); the caller sleeps until then,
//! holding the booked slot and nothing else. A lower priority class asks again while the
//! slot offered lies beyond its horizon (`priority.rs`). A reserve that Redis cannot
//! answer goes to the local fallback, or fails closed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::limit::{BucketLedger, Cost, CostDelta, Priority, Reservation, TryReserveError};
use tollgate::{Dimension, Error, Result};

use crate::background::{InFlight, Ledger};
use crate::buckets::{Buckets, micros};
use crate::config::{RedisClock, RedisLimiterError};
use crate::priority;
use crate::script::ScriptArgs;

/// What the script answered to a reserve.
enum ReserveAnswer {
    /// Granted: start `wait_us` after `now_us` (the limiter's clock).
    Granted { wait_us: u64, now_us: u64 },
    /// Not within the caller's longest wait; nothing taken.
    Later { wait_us: u64 },
    /// Dimension `index` (0-based) can never hold the cost.
    TooLarge { index: usize, capacity: u64 },
}

/// The slot a reservation booked in the shared buckets, as
/// [`RedisLimiter::reserve_booked`](crate::RedisLimiter::reserve_booked) reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookedSlot {
    /// When the slot starts, in µs on the limiter's clock (Redis `TIME`, or since the
    /// [`RedisClock::Tokio`] epoch).
    pub start_us: u64,
    /// How long the caller was told to wait.
    pub wait: Duration,
    /// How long the booking call took (request to answer).
    pub round_trip: Duration,
}

impl Buckets {
    /// A reservation of `cost` at `priority`, with the slot it booked (none without
    /// limits, or from the local fallback), once the slot has started.
    pub(crate) async fn reserve_booked(
        self: &Arc<Self>,
        cost: Cost,
        priority: Priority,
    ) -> Result<(Reservation, Option<BookedSlot>)> {
        if self.dims.is_empty() {
            return Ok((Reservation::unlimited(cost), None));
        }
        let started = tollgate::clock::now();
        let mut sent_at = started;
        let mut horizon = priority::horizon(priority, Duration::ZERO, self.aging);
        loop {
            let max_wait = horizon.map_or(-1, |h| i64::try_from(micros(h)).unwrap_or(i64::MAX));
            match self.book(sent_at, cost, max_wait).await {
                // A lower class asked for a slot beyond its horizon: nothing was taken;
                // ask again when the slot is within it (or the reservation has aged).
                Ok(ReserveAnswer::Later { wait_us }) if horizon.is_some() => {
                    // The offered slot starts `wait_us` after the call's `sent_at` (the
                    // script's now); asleep until it is within the horizon, or aged.
                    let slot = sent_at + Duration::from_micros(wait_us);
                    let h = horizon.unwrap_or_default();
                    tokio::time::sleep_until(priority::ask_again_at(
                        slot,
                        h,
                        started + self.aging,
                        tollgate::clock::now(),
                    ))
                    .await;
                    sent_at = tollgate::clock::now();
                    horizon = priority::horizon(priority, sent_at - started, self.aging);
                }
                answer => return self.granted_or_not(answer, sent_at, cost, priority).await,
            }
        }
    }

    /// A reservation of `cost` only if the buckets can take it now.
    pub(crate) async fn try_reserve(
        self: &Arc<Self>,
        cost: Cost,
        priority: Priority,
    ) -> Result<Reservation, TryReserveError> {
        if self.dims.is_empty() {
            return Ok(Reservation::unlimited(cost));
        }
        match self.book(tollgate::clock::now(), cost, 0).await {
            Ok(ReserveAnswer::Granted { .. }) => Ok(self.reservation(cost)),
            Ok(ReserveAnswer::Later { wait_us }) => Err(TryReserveError::WouldWait {
                ready_in: Duration::from_micros(wait_us),
            }),
            Ok(ReserveAnswer::TooLarge { index, capacity }) => Err(TryReserveError::TooLarge(
                self.too_large(&cost, index, capacity),
            )),
            // Fail closed: fallback chains read it as "this candidate cannot serve now".
            Err(e) => match &self.fallback {
                Some(local) => local.try_reserve_with(cost, priority),
                None => Err(TryReserveError::Unavailable(self.unavailable(e))),
            },
        }
    }

    /// What a reservation's final answer from the script comes to.
    async fn granted_or_not(
        self: &Arc<Self>,
        answer: Result<ReserveAnswer, RedisLimiterError>,
        sent_at: Instant,
        cost: Cost,
        priority: Priority,
    ) -> Result<(Reservation, Option<BookedSlot>)> {
        match answer {
            Ok(ReserveAnswer::Granted { wait_us, now_us }) => {
                let slot = BookedSlot {
                    start_us: now_us.saturating_add(wait_us),
                    wait: Duration::from_micros(wait_us),
                    round_trip: sent_at.elapsed(),
                };
                // Held while sleeping: dropping the future gives the booked slot back.
                let reservation = self.reservation(cost);
                if wait_us > 0 {
                    match self.conn.config.clock {
                        // The booking was made at `sent_at` on this clock.
                        RedisClock::Tokio { .. } => {
                            tokio::time::sleep_until(sent_at + slot.wait).await;
                        }
                        // Measured from the answer: at worst late by the trip back.
                        RedisClock::Server => tokio::time::sleep(slot.wait).await,
                    }
                }
                Ok((reservation, Some(slot)))
            }
            Ok(ReserveAnswer::TooLarge { index, capacity }) => {
                Err(self.too_large(&cost, index, capacity))
            }
            // An unbounded reserve is always granted; this reply would be a script bug.
            Ok(ReserveAnswer::Later { .. }) => Err(self.unavailable(RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: "an unbounded reserve was refused".into(),
            })),
            Err(e) => match &self.fallback {
                Some(local) => local.reserve_with(cost, priority).await.map(|r| (r, None)),
                None => Err(self.unavailable(e)),
            },
        }
    }

    /// One reserve call on a task of its own: if the caller goes away while the answer
    /// is on its way, the task gives back what was booked.
    async fn book(
        self: &Arc<Self>,
        at: Instant,
        cost: Cost,
        max_wait_us: i64,
    ) -> Result<ReserveAnswer, RedisLimiterError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let buckets = self.clone();
        let flight = InFlight::new(&buckets);
        tokio::spawn(async move {
            let answer = buckets.reserve_call(at, cost, max_wait_us).await;
            if let Err(Ok(ReserveAnswer::Granted { .. })) = tx.send(answer) {
                // The caller is gone: nothing will be sent.
                Ledger(buckets.clone()).adjust(CostDelta::refund(&cost));
            }
            drop(flight);
        });
        rx.await.unwrap_or_else(|_| {
            Err(RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: "the reserve task ended without an answer".into(),
            })
        })
    }

    async fn reserve_call(
        &self,
        at: Instant,
        cost: Cost,
        max_wait_us: i64,
    ) -> Result<ReserveAnswer, RedisLimiterError> {
        let args = ScriptArgs::reserve(max_wait_us, self.arrival_allowance_us);
        let inv = self.invocation(at, "reserve", None, args, |d| {
            i64::try_from(cost.on(d)).unwrap_or(i64::MAX)
        });
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.reserve_round_trips.fetch_add(1, Ordering::Relaxed);
        let reply: Vec<i64> = self.conn.invoke(&inv).await.inspect_err(|_| {
            self.failures.fetch_add(1, Ordering::Relaxed);
        })?;
        let u = |x: i64| u64::try_from(x).unwrap_or(0);
        match reply.as_slice() {
            [1, wait, now, factor] => {
                self.factor_micro.store(u(*factor), Ordering::Relaxed);
                Ok(ReserveAnswer::Granted {
                    wait_us: u(*wait),
                    now_us: u(*now),
                })
            }
            [0, wait, _now, factor] => {
                self.factor_micro.store(u(*factor), Ordering::Relaxed);
                Ok(ReserveAnswer::Later { wait_us: u(*wait) })
            }
            [-1, index, capacity] => Ok(ReserveAnswer::TooLarge {
                index: usize::try_from(*index - 1).unwrap_or(0),
                capacity: u(*capacity),
            }),
            other => Err(RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: format!("{other:?}"),
            }),
        }
    }

    fn too_large(&self, cost: &Cost, index: usize, capacity: u64) -> Error {
        let dimension = self
            .dims
            .get(index)
            .map_or(Dimension::Requests, |d| d.dimension);
        Error::TooLargeForBucket {
            model_id: self.model_id.clone(),
            dimension,
            needed: cost.on(dimension),
            capacity,
        }
    }

    fn reservation(self: &Arc<Self>, cost: Cost) -> Reservation {
        Reservation::new(Arc::new(Ledger(self.clone())), cost)
    }
}
