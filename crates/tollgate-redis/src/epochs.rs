//! What this process knows of each model's *epoch*: a number the script moves (to a µs
//! reading of its clock) whenever feedback slows the model (a 429, a pause, a lower
//! limit or level), and publishes on the model's channel `{prefix}:{model}:lim:ep`. A
//! waiter that booked a slot at epoch E asks Redis again (`check`) as soon as it sees the
//! epoch move past E, and at its start if this process may have missed a move (its
//! subscription was down at some point since the booking); otherwise it starts without a
//! second round trip.
//!
//! One subscription (`PSUBSCRIBE {prefix}:*:ep`) per connection (`conn.rs`), on one of its own,
//! started by the first reservation and reconnected when it drops. Each reply to a script
//! call carries the epoch too, so the process also learns it from its own calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OnceCell};

/// One model's latest epoch seen, and a wake-up for its waiters when it moves.
#[derive(Default)]
pub(crate) struct EpochCell {
    value: AtomicU64,
    pub(crate) moved: Notify,
}

impl EpochCell {
    /// The latest epoch seen.
    pub(crate) fn get(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }

    /// Records `epoch` (from a reply or a message); wakes the waiters if it is news.
    pub(crate) fn saw(&self, epoch: u64) {
        if self.value.fetch_max(epoch, Ordering::SeqCst) < epoch {
            self.moved.notify_waiters();
        }
    }
}

/// The epochs this process has seen, and the state of its subscription.
#[derive(Default)]
pub(crate) struct Epochs {
    /// Each model key's latest epoch seen, shared with its buckets.
    models: Mutex<HashMap<String, Arc<EpochCell>>>,
    /// Whether the subscription is up now (below).
    /// How many times it has (re)subscribed: a waiter that saw one generation at booking
    /// and another at its start may have missed a message in between.
    pub(crate) generation: AtomicU64,
    pub(crate) up: AtomicBool,
    pub(crate) started: OnceCell<()>,
}

impl Epochs {
    /// The cell holding `key`'s latest epoch seen (one per key, shared by every limiter
    /// of this process on that key).
    pub(crate) fn cell(&self, key: &str) -> Arc<EpochCell> {
        let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        models.entry(key.to_owned()).or_default().clone()
    }

    /// The subscription's generation if it is up now; `None` if it is not (then a booking
    /// must be checked at its start).
    pub(crate) fn live(&self) -> Option<u64> {
        // The generation first: if the subscription went down and up in between, the
        // generation read is the older one and a later comparison fails, as it should.
        let generation = self.generation.load(Ordering::SeqCst);
        self.up.load(Ordering::SeqCst).then_some(generation)
    }

    /// Records a message: `key`'s epoch is now `epoch`.
    pub(crate) fn seen(&self, key: &str, epoch: u64) {
        let models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cell) = models.get(key) {
            cell.saw(epoch);
        }
    }
}
