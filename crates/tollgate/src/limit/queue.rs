//! The limiter's waiters: who goes first, and each waiter's slot.

use std::collections::{HashMap, VecDeque};
use std::task::Waker;
use std::time::Duration;

use super::cost::Cost;
use super::priority::Priority;

/// One waiter: what it asks for, whether it has been granted, and how to wake it.
/// Lives in [`WaitQueue::slots`] from the first poll of its [`super::Reserve`] until it
/// picks up its grant or is dropped.
#[derive(Debug)]
struct Slot {
    cost: Cost,
    /// Set (under the limiter's lock) by [`WaitQueue::grant_head`], which has already
    /// taken the capacity; read by the waiter's next poll.
    granted: bool,
    /// The waker of the waiter's last poll; taken when granted.
    waker: Option<Waker>,
}

/// What [`WaitQueue::cancel`] found.
#[derive(Debug)]
pub(super) enum Cancelled {
    /// The waiter had been granted but never picked it up: its cost must be given back.
    Granted(Cost),
    /// The waiter was still waiting; `was_head` if it went first (the driver's deadline
    /// may move).
    Waiting {
        /// Whether the waiter was the head.
        was_head: bool,
    },
    /// Unknown id (already picked up or cancelled).
    Gone,
}

/// The waiters, one FIFO queue per [`Priority`] class, each entry with its arrival time
/// (ns since the limiter's epoch), and each waiter's slot. Every field is private and the
/// queue lives inside the limiter's one mutex: its methods, called with the lock held,
/// are the only way a waiter joins, is granted, picks up or leaves, and they implement the
/// order described in the limiter's docs.
#[derive(Debug)]
pub(super) struct WaitQueue {
    /// Per class, lowest first: (waiter id, arrival ns), in arrival order. Every id here
    /// has a slot that is not granted.
    classes: [VecDeque<(u64, u64)>; 3],
    /// Waiters queued (the sum of the classes' lengths).
    len: usize,
    /// How long a waiter waits before it is promoted above every class.
    aging_ns: u64,
    /// Every waiter that has not yet picked up its grant or left, by id.
    slots: HashMap<u64, Slot>,
    /// The next waiter's id.
    next_id: u64,
}

impl WaitQueue {
    pub(super) fn new(aging: Duration) -> Self {
        WaitQueue {
            classes: Default::default(),
            len: 0,
            aging_ns: u64::try_from(aging.as_nanos()).unwrap_or(u64::MAX),
            slots: HashMap::new(),
            next_id: 0,
        }
    }

    /// A new waiter for `cost` of class `priority`, arrived at `now`, at the back of its
    /// class; returns its id.
    pub(super) fn enqueue(
        &mut self,
        cost: Cost,
        priority: Priority,
        now: u64,
        waker: Waker,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.slots.insert(
            id,
            Slot {
                cost,
                granted: false,
                waker: Some(waker),
            },
        );
        self.push(id, priority, now);
        id
    }

    /// The waiter that goes first at `now`, with its cost.
    pub(super) fn head(&self, now: u64) -> Option<(u64, Cost)> {
        let id = self.front(now)?;
        self.slots.get(&id).map(|slot| (id, slot.cost))
    }

    /// Grants the head waiter (its capacity already taken by the caller): removes it from
    /// the order, marks its slot granted and adds its waker to `wakers`, to be woken
    /// after the lock is released.
    pub(super) fn grant_head(&mut self, now: u64, wakers: &mut Vec<Waker>) {
        let Some(id) = self.pop_front(now) else {
            return;
        };
        if let Some(slot) = self.slots.get_mut(&id) {
            slot.granted = true;
            wakers.extend(slot.waker.take());
        }
    }

    /// A waiter's poll: `Some(true)` if it was granted (its slot is removed: the grant is
    /// picked up), `Some(false)` if it still waits (its waker is updated), `None` if the
    /// id is unknown.
    pub(super) fn poll_granted(&mut self, id: u64, waker: &Waker) -> Option<bool> {
        let slot = self.slots.get_mut(&id)?;
        if slot.granted {
            self.slots.remove(&id);
            return Some(true);
        }
        if !slot.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            slot.waker = Some(waker.clone());
        }
        Some(false)
    }

    /// A waiter of class `priority` leaves (its future was dropped) at `now`.
    pub(super) fn cancel(&mut self, id: u64, priority: Priority, now: u64) -> Cancelled {
        match self.slots.remove(&id) {
            Some(slot) if slot.granted => Cancelled::Granted(slot.cost),
            Some(_) => {
                let was_head = self.front(now) == Some(id);
                self.remove(id, priority);
                Cancelled::Waiting { was_head }
            }
            None => Cancelled::Gone,
        }
    }

    /// Whether waiter `id` goes first at `now`.
    pub(super) fn is_head(&self, id: u64, now: u64) -> bool {
        self.front(now) == Some(id)
    }

    /// The costs of the waiters that would go before a newcomer of class `priority`
    /// arriving at `now` (see [`WaitQueue::blocks`]).
    pub(super) fn costs_ahead_of(
        &self,
        priority: Priority,
        now: u64,
    ) -> impl Iterator<Item = Cost> + '_ {
        self.ahead_of(priority, now)
            .filter_map(|id| self.slots.get(&id).map(|slot| slot.cost))
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waiters per class, lowest first.
    pub(super) fn counts(&self) -> [usize; 3] {
        self.classes.each_ref().map(VecDeque::len)
    }

    /// Adds waiter `id` of class `priority`, arrived at `now`, at the back of its class.
    fn push(&mut self, id: u64, priority: Priority, now: u64) {
        self.classes[priority.index()].push_back((id, now));
        self.len += 1;
    }

    /// Removes waiter `id` of class `priority`; false if it was not queued.
    fn remove(&mut self, id: u64, priority: Priority) -> bool {
        let class = &mut self.classes[priority.index()];
        let Some(i) = class.iter().position(|(x, _)| *x == id) else {
            return false;
        };
        class.remove(i);
        self.len -= 1;
        true
    }

    /// Whether a waiter that arrived at `arrived` is promoted at `now`.
    fn promoted(&self, arrived: u64, now: u64) -> bool {
        now.saturating_sub(arrived) >= self.aging_ns
    }

    /// The class whose first waiter goes first at `now` (see the module docs).
    fn head_class(&self, now: u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        // Each class's first waiter is its oldest: the oldest promoted waiter is one of
        // them. Highest class first, so that a tie goes to the higher class.
        let mut oldest: Option<(usize, u64)> = None;
        for (c, class) in self.classes.iter().enumerate().rev() {
            if let Some(&(_, arrived)) = class.front()
                && self.promoted(arrived, now)
                && oldest.is_none_or(|(_, at)| arrived < at)
            {
                oldest = Some((c, arrived));
            }
        }
        if let Some((c, _)) = oldest {
            return Some(c);
        }
        self.classes.iter().rposition(|class| !class.is_empty())
    }

    /// The waiter that goes first at `now`.
    fn front(&self, now: u64) -> Option<u64> {
        let c = self.head_class(now)?;
        self.classes[c].front().map(|(id, _)| *id)
    }

    /// Removes and returns the waiter that goes first at `now`.
    fn pop_front(&mut self, now: u64) -> Option<u64> {
        let c = self.head_class(now)?;
        let (id, _) = self.classes[c].pop_front()?;
        self.len -= 1;
        Some(id)
    }

    /// Whether a newcomer of class `priority` arriving at `now` would have to let
    /// someone go first: a waiter of its own or a higher class, or a promoted one.
    pub(super) fn blocks(&self, priority: Priority, now: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let p = priority.index();
        self.classes[p..].iter().any(|c| !c.is_empty())
            || self.classes[..p]
                .iter()
                .any(|c| c.front().is_some_and(|(_, at)| self.promoted(*at, now)))
    }

    /// The waiters that would go before a newcomer of class `priority` arriving at `now`
    /// (those [`WaitQueue::blocks`] counts), if nothing else changed.
    fn ahead_of(&self, priority: Priority, now: u64) -> impl Iterator<Item = u64> + '_ {
        let p = priority.index();
        let higher = self.classes[p..].iter().flatten();
        // Within a class the promoted waiters are the oldest: a prefix.
        let promoted = self.classes[..p]
            .iter()
            .flat_map(move |c| c.iter().take_while(move |(_, at)| self.promoted(*at, now)));
        higher.chain(promoted).map(|(id, _)| *id)
    }

    /// When the head may change by time alone: the first instant a lower class's first
    /// waiter is promoted while the head is not. `None` if no such instant comes.
    pub(super) fn next_promotion(&self, now: u64) -> Option<u64> {
        let c = self.head_class(now)?;
        let &(_, head_arrived) = self.classes[c].front()?;
        if self.promoted(head_arrived, now) {
            // The oldest promoted waiter keeps the lead: anyone promoted later is younger.
            return None;
        }
        self.classes[..c]
            .iter()
            .filter_map(|class| class.front())
            .map(|(_, at)| at.saturating_add(self.aging_ns))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> WaitQueue {
        WaitQueue::new(Duration::from_secs(10))
    }

    #[test]
    fn grant_head_takes_the_highest_class_first_and_hands_its_waker_over_once() {
        let mut q = queue();
        let batch = q.enqueue(Cost::call(1, 0), Priority::Batch, 0, Waker::noop().clone());
        let interactive = q.enqueue(
            Cost::call(2, 0),
            Priority::Interactive,
            1,
            Waker::noop().clone(),
        );
        assert_eq!(q.head(2), Some((interactive, Cost::call(2, 0))));
        let mut wakers = Vec::new();
        q.grant_head(2, &mut wakers);
        assert_eq!(wakers.len(), 1);
        assert_eq!(q.len(), 1);
        assert!(q.is_head(batch, 2));
        // The granted waiter picks its grant up once; then it is gone.
        assert_eq!(q.poll_granted(interactive, Waker::noop()), Some(true));
        assert_eq!(q.poll_granted(interactive, Waker::noop()), None);
        assert_eq!(q.poll_granted(batch, Waker::noop()), Some(false));
    }

    #[test]
    fn cancel_says_whether_the_waiter_was_granted_or_went_first() {
        let mut q = queue();
        let first = q.enqueue(
            Cost::call(1, 0),
            Priority::Default,
            0,
            Waker::noop().clone(),
        );
        let second = q.enqueue(
            Cost::call(5, 0),
            Priority::Default,
            1,
            Waker::noop().clone(),
        );
        let third = q.enqueue(
            Cost::call(7, 0),
            Priority::Default,
            2,
            Waker::noop().clone(),
        );
        q.grant_head(3, &mut Vec::new());
        // Granted but never picked up: its cost must be given back.
        assert!(
            matches!(q.cancel(first, Priority::Default, 3), Cancelled::Granted(c) if c == Cost::call(1, 0))
        );
        assert!(matches!(
            q.cancel(third, Priority::Default, 3),
            Cancelled::Waiting { was_head: false }
        ));
        assert!(matches!(
            q.cancel(second, Priority::Default, 3),
            Cancelled::Waiting { was_head: true }
        ));
        assert!(matches!(
            q.cancel(second, Priority::Default, 3),
            Cancelled::Gone
        ));
        assert!(q.is_empty());
        assert_eq!(q.head(3), None);
    }

    #[test]
    fn costs_ahead_of_a_newcomer_are_its_class_and_higher() {
        let mut q = queue();
        q.enqueue(Cost::call(1, 0), Priority::Batch, 0, Waker::noop().clone());
        q.enqueue(
            Cost::call(2, 0),
            Priority::Default,
            0,
            Waker::noop().clone(),
        );
        q.enqueue(
            Cost::call(3, 0),
            Priority::Interactive,
            0,
            Waker::noop().clone(),
        );
        let ahead: Vec<Cost> = q.costs_ahead_of(Priority::Default, 1).collect();
        assert_eq!(ahead.len(), 2);
        assert!(ahead.contains(&Cost::call(2, 0)) && ahead.contains(&Cost::call(3, 0)));
    }
}
