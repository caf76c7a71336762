//! A reservation on Redis: one script call books a slot in every dimension at once, or
//! none, and answers when it starts (*reserve-ahead*); the caller sleeps until then,
//! holding the booked slot and nothing else. If the model's epoch moved while it slept
//! (feedback slowed the model: a 429, a pause, a lower limit), or this process may have
//! missed a move, it asks again at the start (`check`) and sleeps on if its place in line
//! now comes later (`epochs.rs`). A lower priority class asks again while the slot
//! offered lies beyond its horizon (`priority.rs`). A reserve that Redis cannot answer
//! goes to the local fallback, or fails closed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tollgate::limit::{BucketLedger, Cost, Priority, Reservation, TryReserveError};
use tollgate::{Dimension, Error, Result};

use crate::background::{InFlight, Ledger};
use crate::buckets::{Buckets, micros};
use crate::config::{RedisClock, RedisLimiterError};
use crate::priority;
use crate::script::ScriptArgs;

/// What the script answered to a reserve.
enum ReserveAnswer {
    /// Granted: start `wait_us` after `now_us` (the limiter's clock); booked at `epoch`,
    /// its place in line on each dimension is `tickets`.
    Granted {
        wait_us: u64,
        now_us: u64,
        epoch: u64,
        tickets: Vec<i64>,
    },
    /// Not within the caller's longest wait; nothing taken.
    Later { wait_us: u64 },
    /// Dimension `index` (0-based) can never hold the cost.
    TooLarge { index: usize, capacity: u64 },
}

/// A booked slot being waited for: answered at `at` (this process's clock), to start
/// `wait_us` after `now_us` (the limiter's clock), as of `epoch`; `watched`: the epoch
/// subscription's generation when it was asked, if it was up.
struct Turn {
    at: Instant,
    wait_us: u64,
    now_us: u64,
    epoch: u64,
    watched: Option<u64>,
    tickets: Vec<i64>,
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
    /// How many times the slot was checked again at its start, the model's epoch having
    /// moved (0 in the common case: one round trip per reservation).
    pub checks: u32,
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
        // Before the first booking: its waiter can then rely on the epochs arriving.
        // Counted in flight, as the booking is, for `flush`.
        let flight = InFlight::new(self);
        self.conn.watch_epochs().await;
        drop(flight);
        let started = tollgate::clock::now();
        let mut sent_at = started;
        let mut horizon = priority::horizon(priority, Duration::ZERO, self.aging);
        loop {
            let max_wait = horizon.map_or(-1, |h| i64::try_from(micros(h)).unwrap_or(i64::MAX));
            // Read before booking: a move after this is in the answer's epoch, or arrives.
            let watched = self.conn.epochs.live();
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
                answer => {
                    return self
                        .granted_or_not(answer, (sent_at, watched), cost, priority)
                        .await;
                }
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
        (sent_at, watched): (Instant, Option<u64>),
        cost: Cost,
        priority: Priority,
    ) -> Result<(Reservation, Option<BookedSlot>)> {
        match answer {
            Ok(ReserveAnswer::Granted {
                wait_us,
                now_us,
                epoch,
                tickets,
            }) => {
                // Held while sleeping: dropping the future gives the booked slot back.
                let reservation = self.reservation(cost);
                let round_trip = sent_at.elapsed();
                let turn = Turn {
                    at: sent_at,
                    wait_us,
                    now_us,
                    epoch,
                    watched,
                    tickets,
                };
                let slot = self.wait_for_turn(turn).await;
                Ok((reservation, Some(BookedSlot { round_trip, ..slot })))
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
                Ledger(buckets.clone()).refund(&cost);
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

    /// Sleeps until the booked slot starts. If the model's epoch moves meanwhile (feedback
    /// slowed it), asks at once where its place in line stands now and sleeps on as told;
    /// at the start, asks if a move may have been missed (the subscription was down).
    async fn wait_for_turn(self: &Arc<Self>, mut turn: Turn) -> BookedSlot {
        let booked_at = turn.at;
        let mut checks = 0;
        while turn.wait_us > 0 {
            let wait = Duration::from_micros(turn.wait_us);
            let deadline = match self.conn.config.clock {
                // The answer was given at `turn.at` on this clock.
                RedisClock::Tokio { .. } => turn.at + wait,
                // Measured from the answer: at worst late by the trip back.
                RedisClock::Server => tollgate::clock::now() + wait,
            };
            let start = tokio::time::sleep_until(deadline);
            let moved = self.epoch.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.epoch.get() <= turn.epoch {
                tokio::select! {
                    () = start => {
                        let missed = turn.watched.is_none() || self.conn.epochs.live() != turn.watched;
                        if !missed && self.epoch.get() <= turn.epoch {
                            break;
                        }
                    }
                    () = moved => {}
                }
            }
            // Read before asking: a move after this is in the answer's epoch, or arrives.
            let watched = self.conn.epochs.live();
            let at = tollgate::clock::now();
            let flight = InFlight::new(self);
            let answer = self.check_call(at, &turn.tickets).await;
            drop(flight);
            match answer {
                Ok((wait_us, now_us, epoch)) => {
                    checks += 1;
                    turn = Turn {
                        at,
                        wait_us,
                        now_us,
                        epoch,
                        watched,
                        tickets: turn.tickets,
                    };
                }
                // Redis unreachable: the slot it booked stands (nothing new is known).
                Err(_) => {
                    tokio::time::sleep_until(deadline).await;
                    break;
                }
            }
        }
        BookedSlot {
            start_us: turn.now_us.saturating_add(turn.wait_us),
            wait: turn.at.saturating_duration_since(booked_at)
                + Duration::from_micros(turn.wait_us),
            round_trip: Duration::ZERO,
            checks,
        }
    }

    /// Asks where a booking stands now: how long until its place in line (`tickets`)
    /// comes, the clock's `now`, and the epoch.
    async fn check_call(
        &self,
        at: Instant,
        tickets: &[i64],
    ) -> Result<(u64, u64, u64), RedisLimiterError> {
        let ticket = |d: Dimension| {
            self.dims
                .iter()
                .position(|x| x.dimension == d)
                .and_then(|i| tickets.get(i).copied())
                .unwrap_or(0)
        };
        let inv = self.invocation(at, "check", None, ScriptArgs::default(), ticket);
        let reply = self.counted_call(&inv).await?;
        let u = |x: i64| u64::try_from(x).unwrap_or(0);
        match reply.as_slice() {
            [1, wait, now, factor, epoch] => {
                self.factor_micro.store(u(*factor), Ordering::Relaxed);
                self.epoch.saw(u(*epoch));
                Ok((u(*wait), u(*now), u(*epoch)))
            }
            other => Err(RedisLimiterError::Reply {
                url: self.conn.shown_url.clone(),
                reply: format!("{other:?}"),
            }),
        }
    }

    /// One script call answered by integers, counted (and its failure too).
    async fn counted_call(
        &self,
        inv: &crate::script::Invocation,
    ) -> Result<Vec<i64>, RedisLimiterError> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.conn.invoke(inv).await.inspect_err(|_| {
            self.failures.fetch_add(1, Ordering::Relaxed);
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
        self.reserve_round_trips.fetch_add(1, Ordering::Relaxed);
        let reply = self.counted_call(&inv).await?;
        let u = |x: i64| u64::try_from(x).unwrap_or(0);
        match reply.as_slice() {
            [1, wait, now, factor, epoch, tickets @ ..] if tickets.len() == self.dims.len() => {
                self.factor_micro.store(u(*factor), Ordering::Relaxed);
                self.epoch.saw(u(*epoch));
                Ok(ReserveAnswer::Granted {
                    wait_us: u(*wait),
                    now_us: u(*now),
                    epoch: u(*epoch),
                    tickets: tickets.to_vec(),
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
