//! [`Reserve`], the future a waiting reservation is, and the driver task that grants
//! waiters when their cost has refilled.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use super::cost::Cost;
use super::priority::Priority;
use super::queue::Cancelled;
use super::reservation::Reservation;
use super::state::Shared;
use super::sync::Runtime;
use crate::error::{Error, Result};

/// The driver: sleeps until the head waiter fits, grants, repeats; exits when nobody waits.
pub(super) async fn drive(weak: Weak<Shared>) {
    loop {
        let (deadline, notify) = {
            let Some(shared) = weak.upgrade() else { return };
            let (wakers, deadline) = {
                let mut state = shared.lock();
                let now = shared.now_ns();
                let wakers = state.grant_ready(now);
                let deadline = state.head_deadline(now);
                if deadline.is_none() {
                    state.driver_running = false;
                }
                (wakers, deadline)
            };
            wakers.into_iter().for_each(Waker::wake);
            let Some(deadline) = deadline else { return };
            (shared.instant_at(deadline), shared.notify.clone())
            // The strong reference ends here: a sleeping driver holds no part of the
            // limiter, so it is not counted as a reservation (`LimiterSnapshot::held`).
        };
        // A notification sent meanwhile is kept by `Notify` as a permit: none is lost.
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {}
            () = notify.notified() => {}
        }
    }
}

/// The future of [`TokenBucketRateLimiter::reserve`](super::TokenBucketRateLimiter::reserve). Holds nothing until granted.
#[must_use = "a reservation is only made when the future is awaited"]
pub struct Reserve {
    /// The limiter; `None` once the future has finished (handed on to the
    /// [`Reservation`] when granted).
    shared: Option<Arc<Shared>>,
    cost: Cost,
    priority: Priority,
    id: Option<u64>,
}

impl fmt::Debug for Reserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reserve")
            .field("cost", &self.cost)
            .field("priority", &self.priority)
            .field("queued", &self.id.is_some())
            .finish()
    }
}

impl Reserve {
    /// A future that reserves `cost` of class `priority` on `shared` when polled.
    pub(super) fn new(shared: Arc<Shared>, cost: Cost, priority: Priority) -> Self {
        Reserve {
            shared: Some(shared),
            cost,
            priority,
            id: None,
        }
    }

    /// Ends the future with a reservation that takes over its handle on the limiter
    /// (counted as opened by the caller, under the lock).
    fn granted(&mut self) -> Poll<Result<Reservation>> {
        Poll::Ready(
            self.shared
                .take()
                .map(|shared| Reservation::counted(shared, self.cost))
                .ok_or(Error::Cancelled),
        )
    }

    /// Ends the future with `error`.
    fn failed(&mut self, error: Error) -> Poll<Result<Reservation>> {
        self.shared = None;
        Poll::Ready(Err(error))
    }
}

impl Future for Reserve {
    type Output = Result<Reservation>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(shared) = this.shared.as_ref() else {
            return Poll::Ready(Err(Error::Cancelled));
        };
        let mut state = shared.lock();
        let Some(id) = this.id else {
            // First poll: the fast path, or join the queue.
            let now = shared.now_ns();
            if state.take_if_ready(&this.cost, this.priority, now) {
                drop(state);
                return this.granted();
            }
            if let Err(e) = state.check_size(&shared.model_id, &this.cost) {
                drop(state);
                return this.failed(e);
            }
            let Ok(runtime) = Runtime::try_current() else {
                drop(state);
                return this.failed(Error::InvalidRequest {
                    field: "runtime".into(),
                    reason:
                        "TokenBucketRateLimiter::reserve must be awaited inside a tokio runtime"
                            .into(),
                });
            };
            let id = state
                .queue
                .enqueue(this.cost, this.priority, now, cx.waker().clone());
            this.id = Some(id);
            if !state.driver_running {
                state.driver_running = true;
                runtime.spawn(drive(Arc::downgrade(shared)));
            } else if state.queue.is_head(id, now) {
                // A new head (the first waiter, or one of a higher class): its deadline
                // is not the driver's. A newcomer that is not the head needs no nudge:
                // it is younger than the head, so the head is promoted before it.
                drop(state);
                shared.notify.notify_one();
            }
            return Poll::Pending;
        };
        match state.queue.poll_granted(id, cx.waker()) {
            Some(true) => {
                drop(state);
                this.granted()
            }
            Some(false) => Poll::Pending,
            None => {
                drop(state);
                this.failed(Error::Cancelled)
            }
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        // Never queued, or already finished: nothing to clean up.
        let (Some(id), Some(shared)) = (self.id, self.shared.as_ref()) else {
            return;
        };
        let mut state = shared.lock();
        let now = shared.now_ns();
        match state.queue.cancel(id, self.priority, now) {
            // Granted but never picked up: nothing was sent, give it all back.
            Cancelled::Granted(cost) => {
                state.take_back(&cost);
                shared.kick(state);
            }
            Cancelled::Waiting { was_head: true } => shared.kick(state),
            Cancelled::Waiting { was_head: false } | Cancelled::Gone => {}
        }
    }
}
