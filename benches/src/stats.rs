//! Small statistics for reports: percentiles, Jain's fairness index, sliding windows, FIFO
//! inversions.

use std::time::Duration;

/// The `q`-quantile (0–1) of `values` by nearest rank; `NaN` when empty.
pub fn percentile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The arithmetic mean; `NaN` when empty.
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Coefficient of variation: standard deviation over mean.
pub fn coefficient_of_variation(values: &[f64]) -> f64 {
    let m = mean(values);
    let var = values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / values.len() as f64;
    var.sqrt() / m
}

/// Jain's fairness index, `(Σx)² / (n·Σx²)`: 1 when everyone gets the same, `1/n` when
/// one gets everything.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (values.len() as f64 * squares)
}

/// The largest total of `amounts` whose times fall in any closed window `[t, t + window]`.
/// `events` must be sorted by time.
pub fn max_in_window(events: &[(Duration, u64)], window: Duration) -> u64 {
    let mut best = 0;
    let mut sum = 0u64;
    let mut end = 0;
    for (start, &(t0, _)) in events.iter().enumerate() {
        while end < events.len() && events[end].0 <= t0 + window {
            sum += events[end].1;
            end += 1;
        }
        best = best.max(sum);
        sum -= events[start].1;
    }
    best
}

/// How many pairs were served out of order: `a` issued strictly before `b` but served
/// strictly after it.
pub fn fifo_violations(issued_served: &[(Duration, Duration)]) -> u64 {
    let mut pairs = issued_served.to_vec();
    pairs.sort();
    let mut violations = 0;
    for (i, (issued_a, served_a)) in pairs.iter().enumerate() {
        for (issued_b, served_b) in &pairs[i + 1..] {
            if issued_a < issued_b && served_b < served_a {
                violations += 1;
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn stats_basics() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(&v, 0.5), 2.0);
        assert_eq!(percentile(&v, 0.99), 4.0);
        assert_eq!(jain(&[1.0, 1.0, 1.0]), 1.0);
        assert_eq!(jain(&[1.0, 0.0, 0.0, 0.0]), 0.25);
        let events = [(s(0), 5), (s(30), 1), (s(60), 2), (s(61), 10)];
        assert_eq!(max_in_window(&events, s(60)), 13);
        assert_eq!(max_in_window(&events, s(1)), 12);
        let fifo = [(s(0), s(5)), (s(1), s(4)), (s(1), s(3)), (s(2), s(9))];
        assert_eq!(fifo_violations(&fifo), 2);
    }
}
