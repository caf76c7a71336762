//! Priority classes: which waiter a model's limiter grants first.
//!
//! Within one model, a waiter of a higher class is granted before a lower one; within a
//! class the order is FIFO. A lower class that has waited too long is promoted (aging),
//! so nothing starves.

/// A call's priority class, carried by its [`crate::JobContext`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Priority {
    /// Background work (batches): granted after the other classes.
    Batch,
    /// Ordinary calls (the default).
    #[default]
    Default,
    /// A person is waiting: granted first.
    Interactive,
}

impl Priority {
    /// Every class, lowest first.
    pub const ALL: [Priority; 3] = [Priority::Batch, Priority::Default, Priority::Interactive];

    /// The class's spelling: `batch`, `default`, `interactive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Batch => "batch",
            Priority::Default => "default",
            Priority::Interactive => "interactive",
        }
    }

    /// The class's index, lowest first (0 = batch).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
