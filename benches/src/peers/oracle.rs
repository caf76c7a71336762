//! The best possible schedule against llmock's buckets: each request, in file order, is
//! admitted at the earliest instant a caller is free and llmock's buckets would accept
//! it, with the row's concurrency and each request's observed service time.
//!
//! llmock 0.2.2 (`ratelimit.py`) keeps, per provider and API key, a requests bucket and a
//! tokens bucket, each holding one minute's limit, full at the start, refilled
//! continuously at limit / 60 per second; a request is admitted when every bucket holds
//! what it needs (1 request; its [`super::journal::llmock_charge`] tokens), which is then
//! taken. It admits at arrival, after its configured latency (`--latency-ms`): here
//! `pre_admission`. A request is sent at `s`, admitted at `s + pre_admission`, and its
//! caller is free again at `s + service`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// llmock's limits for one API key (`None`: not limited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BucketLimits {
    /// `--rpm`.
    pub rpm: Option<u64>,
    /// `--tpm`.
    pub tpm: Option<u64>,
}

/// One request as the replay sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OracleRequest {
    /// Tokens llmock charges it.
    pub tokens: u64,
    /// Seconds from send to answer.
    pub service: f64,
}

/// The replayed schedule, seconds from the start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schedule {
    /// When each request is sent.
    pub sends: Vec<f64>,
    /// When each is answered.
    pub completions: Vec<f64>,
}

impl Schedule {
    /// The last answer.
    pub fn makespan(&self) -> f64 {
        self.completions.iter().copied().fold(0.0, f64::max)
    }

    /// The mean answer time.
    pub fn mean_completion(&self) -> f64 {
        if self.completions.is_empty() {
            return 0.0;
        }
        self.completions.iter().sum::<f64>() / self.completions.len() as f64
    }

    /// When the last request is admitted, given the admission delay.
    pub fn last_admission(&self, pre_admission: f64) -> f64 {
        self.sends.iter().copied().fold(0.0, f64::max) + pre_admission
    }
}

/// A continuous bucket as llmock keeps it.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    capacity: f64,
    rate: f64,
    level: f64,
    updated: f64,
}

impl Bucket {
    fn new(per_minute: u64) -> Self {
        Bucket {
            capacity: per_minute as f64,
            rate: per_minute as f64 / 60.0,
            level: per_minute as f64,
            updated: 0.0,
        }
    }

    fn refill(&mut self, now: f64) {
        let elapsed = (now - self.updated).max(0.0);
        self.level = (self.level + elapsed * self.rate).min(self.capacity);
        self.updated = self.updated.max(now);
    }

    /// Seconds after `updated` until `amount` is there (infinite if it never fits).
    fn wait_for(&self, amount: f64) -> f64 {
        if amount > self.capacity {
            f64::INFINITY
        } else {
            ((amount - self.level) / self.rate).max(0.0)
        }
    }
}

/// The best schedule of `requests` against `limits` with `concurrency` callers (at least
/// one). A request larger than a bucket never fits: its times are infinite.
pub fn best_schedule(
    limits: BucketLimits,
    concurrency: usize,
    pre_admission: f64,
    requests: &[OracleRequest],
) -> Schedule {
    let mut buckets: Vec<(Bucket, bool)> = [(limits.rpm, false), (limits.tpm, true)]
        .into_iter()
        .filter_map(|(limit, tokens)| limit.map(|l| (Bucket::new(l), tokens)))
        .collect();
    // Free callers as a min-heap of the instants they are free (in whole nanoseconds,
    // so that they order totally).
    let nanos = |s: f64| (s * 1e9).round() as u64;
    let mut free: BinaryHeap<Reverse<u64>> = (0..concurrency.max(1)).map(|_| Reverse(0)).collect();
    let mut last_admission = 0.0f64;
    let mut schedule = Schedule::default();
    for request in requests {
        let Reverse(caller) = free.pop().unwrap_or(Reverse(0));
        let mut admit = (caller as f64 / 1e9 + pre_admission).max(last_admission);
        // Refill to `admit`, then wait for the slowest bucket; the others only fill more.
        for (bucket, _) in &mut buckets {
            bucket.refill(admit);
        }
        let wait = buckets
            .iter()
            .map(|(b, tokens)| b.wait_for(if *tokens { request.tokens as f64 } else { 1.0 }))
            .fold(0.0, f64::max);
        admit += wait;
        if !admit.is_finite() {
            schedule.sends.push(f64::INFINITY);
            schedule.completions.push(f64::INFINITY);
            free.push(Reverse(caller));
            continue;
        }
        for (bucket, tokens) in &mut buckets {
            bucket.refill(admit);
            bucket.level -= if *tokens { request.tokens as f64 } else { 1.0 };
        }
        last_admission = admit;
        let send = admit - pre_admission;
        let done = send + request.service;
        schedule.sends.push(send);
        schedule.completions.push(done);
        free.push(Reverse(nanos(done)));
    }
    schedule
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn a_full_bucket_then_one_per_refill() {
        // rpm 60: 60 at once, then one a second; 0.5 s service, enough callers.
        let requests = vec![
            OracleRequest {
                tokens: 1,
                service: 0.5
            };
            62
        ];
        let limits = BucketLimits {
            rpm: Some(60),
            tpm: None,
        };
        let s = best_schedule(limits, 100, 0.0, &requests);
        assert!(s.sends[..60].iter().all(|t| close(*t, 0.0)));
        assert!(close(s.sends[60], 1.0));
        assert!(close(s.sends[61], 2.0));
        assert!(close(s.makespan(), 2.5));
    }

    #[test]
    fn callers_bound_what_is_in_flight() {
        // 2 callers, 1 s service, no limit: pairs go at 0, 1, 2.
        let requests = vec![
            OracleRequest {
                tokens: 1,
                service: 1.0
            };
            5
        ];
        let s = best_schedule(BucketLimits::default(), 2, 0.0, &requests);
        assert_eq!(s.sends, vec![0.0, 0.0, 1.0, 1.0, 2.0]);
        assert!(close(
            s.mean_completion(),
            (1.0 + 1.0 + 2.0 + 2.0 + 3.0) / 5.0
        ));
    }

    #[test]
    fn tokens_bind_and_admission_waits_for_the_latency() {
        // tpm 600 (10 a second), 0.2 s before admission: 400 leaves 200 at 0.2 s; 300
        // needs 100 more, 10 s later; 200 then needs all of it, 20 s more.
        let r = |tokens| OracleRequest {
            tokens,
            service: 0.3,
        };
        let limits = BucketLimits {
            rpm: Some(60),
            tpm: Some(600),
        };
        let s = best_schedule(limits, 8, 0.2, &[r(400), r(300), r(200)]);
        assert!(close(s.sends[0], 0.0));
        assert!(close(s.sends[1], 10.0));
        assert!(close(s.completions[1], 10.3));
        assert!(close(s.sends[2], 30.0));
        assert!(close(s.last_admission(0.2), 30.2));
        // One larger than the bucket never fits.
        let never = best_schedule(limits, 1, 0.0, &[r(601)]);
        assert!(never.makespan().is_infinite());
    }

    #[test]
    fn file_order_holds_even_when_a_later_request_would_fit_sooner() {
        let r = |tokens| OracleRequest {
            tokens,
            service: 0.0,
        };
        let limits = BucketLimits {
            rpm: None,
            tpm: Some(60),
        };
        // 50 leaves 10; 30 waits 20 s; the 5 after it, which fits at once, waits for it
        // and then for its own 5 s.
        let s = best_schedule(limits, 4, 0.0, &[r(50), r(30), r(5)]);
        assert!(close(s.sends[1], 20.0));
        assert!(close(s.sends[2], 25.0));
    }
}
