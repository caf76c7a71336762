//! Which candidate of a fallback chain waits when none can serve now (`fallback_wait`).

/// Which candidate of a fallback chain waits when none of them can serve a call now.
///
/// Either way a candidate that can serve now is taken at once, preferred first; the rule
/// only decides whose queue the call joins when every candidate is busy or paused.
/// Set per model in the catalog (`fallback_wait = "soonest" | "last"`), or in code on
/// [`FallbackChain::with_wait`](crate::limit::FallbackChain::with_wait) and
/// [`FallbackOptions::wait`](crate::pipeline::FallbackOptions::wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum FallbackWait {
    /// The candidate that could serve soonest waits (the later one on a tie): the call is
    /// answered as early as the chain allows. The default.
    #[default]
    Soonest,
    /// Only the last remaining candidate waits, however long, even when an earlier one
    /// would be free sooner: PicoClaw's rule, for a chain whose last model is the one
    /// meant to absorb the overflow (a cheap or high-quota model).
    Last,
}

impl FallbackWait {
    /// The catalog spelling: `soonest` or `last`.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackWait::Soonest => "soonest",
            FallbackWait::Last => "last",
        }
    }

    /// The rule a catalog spelling names, `None` for any other text.
    pub fn from_catalog(text: &str) -> Option<Self> {
        [FallbackWait::Soonest, FallbackWait::Last]
            .into_iter()
            .find(|w| w.as_str() == text)
    }
}
