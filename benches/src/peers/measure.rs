//! One client's figures from llmock's journal beside the best possible schedule, and the
//! targets benchmark 9 holds tollgate to.

use super::journal::ClientTrace;
use super::oracle::{BucketLimits, OracleRequest, Schedule, best_schedule};

/// One client's figures in one row. Times are seconds from the client's start, on
/// llmock's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The client, as the table names it.
    pub client: String,
    /// Requests in the batch.
    pub requests: usize,
    /// When its first request reached llmock (start-up: a process, a connection, a
    /// provider built on first use).
    pub first_send: f64,
    /// The last answer (or last failed attempt's end).
    pub makespan: f64,
    /// The mean answer time.
    pub mean: f64,
    /// The best possible makespan with this client's service times.
    pub best_makespan: f64,
    /// The best possible mean answer time.
    pub best_mean: f64,
    /// Rate-limit 429s.
    pub rate_limited: u32,
    /// Other failed attempts.
    pub other_errors: u32,
    /// Requests never accepted.
    pub failed: usize,
    /// Attempts sent.
    pub sends: u32,
    /// What llmock accepted over what its buckets would have admitted by the last accepted
    /// admission (capacity + refill over that time), on the binding limit.
    pub goodput: f64,
}

impl Measured {
    /// Makespan over the best.
    pub fn makespan_ratio(&self) -> f64 {
        self.makespan / self.best_makespan
    }

    /// Mean answer time over the best.
    pub fn mean_ratio(&self) -> f64 {
        self.mean / self.best_mean
    }
}

fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The replay's input for `trace`: each request's charge and service time as observed
/// (the medians stand in for a request never accepted or never sent).
pub fn oracle_requests(trace: &ClientTrace) -> Vec<OracleRequest> {
    let services = trace.service_times();
    let charges: Vec<f64> = trace
        .requests
        .iter()
        .filter_map(|r| r.charge.map(|c| c as f64))
        .collect();
    let (service, charge) = (median(&services), median(&charges) as u64);
    trace
        .requests
        .iter()
        .map(|r| OracleRequest {
            tokens: r.charge.unwrap_or(charge),
            service: r.accepted.map_or(service, |(s, e)| e - s),
        })
        .collect()
}

/// The share of the limit used: on each limited dimension, what was accepted over the
/// bucket's capacity plus its refill until `span` seconds; the larger (binding) one.
pub fn goodput(limits: BucketLimits, requests: f64, tokens: f64, span: f64) -> f64 {
    [(limits.rpm, requests), (limits.tpm, tokens)]
        .into_iter()
        .filter_map(|(limit, used)| {
            limit.map(|l| used / (l as f64 + l as f64 / 60.0 * span.max(0.0)))
        })
        .fold(0.0, f64::max)
}

/// `client`'s figures from `trace`, started at `t0` (llmock's clock), against llmock's
/// `limits` with `concurrency` callers and `pre_admission` seconds before llmock admits.
pub fn measure(
    client: &str,
    trace: &ClientTrace,
    t0: f64,
    limits: BucketLimits,
    concurrency: usize,
    pre_admission: f64,
) -> (Measured, Schedule) {
    let completions: Vec<f64> = trace.completions(t0).into_iter().flatten().collect();
    let best = best_schedule(limits, concurrency, pre_admission, &oracle_requests(trace));
    let accepted: Vec<_> = trace
        .requests
        .iter()
        .filter(|r| r.accepted.is_some())
        .collect();
    let tokens: u64 = accepted.iter().filter_map(|r| r.charge).sum();
    let span = trace
        .last_accepted_start(t0)
        .map_or(0.0, |s| s + pre_admission);
    let measured = Measured {
        client: client.to_owned(),
        requests: trace.requests.len(),
        first_send: trace.first_start(t0).unwrap_or(f64::NAN),
        makespan: completions.iter().copied().fold(0.0, f64::max),
        mean: if completions.is_empty() {
            0.0
        } else {
            completions.iter().sum::<f64>() / completions.len() as f64
        },
        best_makespan: best.makespan(),
        best_mean: best.mean_completion(),
        rate_limited: trace.rate_limited(),
        other_errors: trace.other_errors(),
        failed: trace.failed(),
        sends: trace.sends(),
        goodput: goodput(limits, accepted.len() as f64, tokens as f64, span),
    };
    (measured, best)
}

/// Which targets a row holds tollgate to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets {
    /// The catalog is right: makespan ≤ 1.03× best, mean ≤ 1.1× best, no 429.
    CatalogRight,
    /// The catalog says 2× what llmock serves: ≤ 3 429s, makespan ≤ 1.1× best.
    CatalogDouble,
    /// Many processes on one shared limit: goodput ≥ 0.95, no 429.
    Shared,
}

/// One target, tollgate's figure for it, and whether it was met.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The target, e.g. `makespan ≤ 1.03× best`.
    pub target: String,
    /// tollgate's figure.
    pub figure: String,
    /// Met?
    pub met: bool,
}

/// tollgate's verdicts in a row: its own targets, no failed request, and ahead of every
/// cookbook client of the row on makespan and mean answer time.
pub fn verdicts(targets: Targets, tollgate: &Measured, cookbooks: &[&Measured]) -> Vec<Verdict> {
    let v = |target: &str, figure: String, met: bool| Verdict {
        target: target.to_owned(),
        figure,
        met,
    };
    let ratio = |x: f64| format!("{x:.3}×");
    let mut out = match targets {
        Targets::CatalogRight => vec![
            v(
                "makespan ≤ 1.03× best",
                ratio(tollgate.makespan_ratio()),
                tollgate.makespan_ratio() <= 1.03,
            ),
            v(
                "mean completion ≤ 1.1× best",
                ratio(tollgate.mean_ratio()),
                tollgate.mean_ratio() <= 1.1,
            ),
            v(
                "0 429s",
                tollgate.rate_limited.to_string(),
                tollgate.rate_limited == 0,
            ),
        ],
        Targets::CatalogDouble => vec![
            v(
                "≤ 3 429s",
                tollgate.rate_limited.to_string(),
                tollgate.rate_limited <= 3,
            ),
            v(
                "makespan ≤ 1.1× best",
                ratio(tollgate.makespan_ratio()),
                tollgate.makespan_ratio() <= 1.1,
            ),
        ],
        Targets::Shared => vec![
            v(
                "goodput ≥ 0.95",
                format!("{:.3}", tollgate.goodput),
                tollgate.goodput >= 0.95,
            ),
            v(
                "0 429s",
                tollgate.rate_limited.to_string(),
                tollgate.rate_limited == 0,
            ),
        ],
    };
    out.push(v(
        "every request answered",
        format!("{} failed", tollgate.failed),
        tollgate.failed == 0,
    ));
    for c in cookbooks {
        out.push(v(
            &format!("makespan < {}", c.client),
            format!("{:.2} s vs {:.2} s", tollgate.makespan, c.makespan),
            tollgate.makespan < c.makespan,
        ));
        out.push(v(
            &format!("mean completion < {}", c.client),
            format!("{:.2} s vs {:.2} s", tollgate.mean, c.mean),
            tollgate.mean < c.mean,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_is_what_was_accepted_over_what_the_bucket_allowed() {
        let rpm = BucketLimits {
            rpm: Some(60),
            tpm: None,
        };
        // 120 accepted by 60 s: the full bucket (60) and 60 s of refill.
        assert!((goodput(rpm, 120.0, 0.0, 60.0) - 1.0).abs() < 1e-9);
        assert!((goodput(rpm, 90.0, 0.0, 60.0) - 0.75).abs() < 1e-9);
        let both = BucketLimits {
            rpm: Some(600),
            tpm: Some(6000),
        };
        // Tokens bind: 6000 / (6000 + 100·30) beats 40 / (600 + 10·30).
        assert!((goodput(both, 40.0, 6000.0, 30.0) - 6000.0 / 9000.0).abs() < 1e-9);
    }
}
