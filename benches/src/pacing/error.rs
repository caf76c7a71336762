//! tollgate's pacing error in benchmark 2: its limiter's log replayed against exact shadow
//! buckets, each grant compared with the earliest instant it could have been made.

use std::time::Duration;

use tollgate::limit::Cost;
use tollgate_sim::{ContinuousBucket, SimCapacity, SimLimits};

use crate::clients::LimiterEvent;
use crate::stats;

/// Pacing error of tollgate's grants against a shadow bucket replaying its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacingError {
    /// Grants replayed.
    pub grants: usize,
    /// Of those, grants that had to wait.
    pub waited: usize,
    /// Median over grants that waited, nanoseconds.
    pub p50_ns: i64,
    /// Smallest over all grants (negative would mean granted too early).
    pub min_ns: i64,
    /// Largest over all grants.
    pub max_ns: i64,
}

/// Replays tollgate's log against exact shadow buckets: for each grant, the earliest
/// instant it could have been granted (not before it asked, not before the grant ahead of
/// it, and when every bucket held its cost), and how much later it was.
pub fn pacing_error(log: &[LimiterEvent], limits: SimLimits, capacity: SimCapacity) -> PacingError {
    let shadow = Shadow::new(limits, capacity);
    let mut checkpoints: Vec<(u64, Shadow)> = vec![(0, shadow)];
    let mut prev_grant = 0u64;
    let mut errors = Vec::new();
    for event in log {
        match *event {
            LimiterEvent::Adjust { at, delta } => {
                let at = ns(at);
                let mut s = checkpoints
                    .last()
                    .map(|c| c.1.clone())
                    .expect("a checkpoint");
                s.refill(at);
                s.adjust([delta.requests, delta.input_tokens, delta.output_tokens]);
                checkpoints.push((at, s));
            }
            LimiterEvent::Grant { joined, at, cost } => {
                let (joined, at) = (ns(joined), ns(at));
                let start = joined.max(prev_grant);
                let first = checkpoints
                    .iter()
                    .rposition(|(t, _)| *t <= start)
                    .unwrap_or(0);
                let mut earliest = u64::MAX;
                for k in first..checkpoints.len() {
                    let from = checkpoints[k].0.max(start);
                    let mut s = checkpoints[k].1.clone();
                    s.refill(from);
                    let candidate = from.saturating_add(s.wait_ns(&cost));
                    let next = checkpoints.get(k + 1).map_or(u64::MAX, |c| c.0);
                    if candidate <= next {
                        earliest = candidate;
                        break;
                    }
                }
                errors.push((at as i64 - earliest as i64, at > start));
                let mut s = checkpoints
                    .last()
                    .map(|c| c.1.clone())
                    .expect("a checkpoint");
                s.refill(at);
                s.take(&cost);
                checkpoints = vec![(at, s)];
                prev_grant = at;
            }
        }
    }
    let waited: Vec<f64> = errors
        .iter()
        .filter(|(_, waited)| *waited)
        .map(|(e, _)| *e as f64)
        .collect();
    PacingError {
        grants: errors.len(),
        waited: waited.len(),
        p50_ns: stats::percentile(&waited, 0.5) as i64,
        min_ns: errors.iter().map(|(e, _)| *e).min().unwrap_or(0),
        max_ns: errors.iter().map(|(e, _)| *e).max().unwrap_or(0),
    }
}

#[derive(Debug, Clone)]
struct Shadow([Option<ContinuousBucket>; 3]);

impl Shadow {
    fn new(limits: SimLimits, capacity: SimCapacity) -> Self {
        let b = |l: u64| (l > 0).then(|| ContinuousBucket::new(l, capacity.tokens(l)));
        Shadow([b(limits.rpm), b(limits.input_tpm), b(limits.output_tpm)])
    }

    fn refill(&mut self, at: u64) {
        self.0.iter_mut().flatten().for_each(|b| b.refill(at));
    }

    fn adjust(&mut self, delta: [i64; 3]) {
        for (b, d) in self.0.iter_mut().zip(delta) {
            if let Some(b) = b {
                if d < 0 {
                    b.give(d.unsigned_abs());
                } else {
                    b.take(d.unsigned_abs());
                }
            }
        }
    }

    fn amounts(cost: &Cost) -> [u64; 3] {
        [cost.requests, cost.input_tokens, cost.output_tokens]
    }

    fn take(&mut self, cost: &Cost) {
        for (b, n) in self.0.iter_mut().zip(Self::amounts(cost)) {
            if let Some(b) = b {
                b.take(n);
            }
        }
    }

    fn wait_ns(&self, cost: &Cost) -> u64 {
        self.0
            .iter()
            .zip(Self::amounts(cost))
            .filter_map(|(b, n)| b.as_ref().map(|b| b.wait_ns(n).unwrap_or(u64::MAX)))
            .max()
            .unwrap_or(0)
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
