//! Benchmark 2's section of `docs/benchmarks.md`: one row per profile and client, and
//! what each column means.

use tollgate_sim::SimDimension;

use super::{BatchReport, PacingConfig, PacingReport, Profile, profiles};
use crate::clients::{RequestOutcome, Strategy};
use crate::report::{Section, Table, num, ratio};

/// Benchmark 2's section: one row per profile and client.
pub fn section(reports: &[PacingReport], config: PacingConfig) -> Section {
    let mut table = Table::new(&[
        "profile",
        "client",
        "goodput",
        "of the most possible",
        "lost by the provider: idle / refunds",
        "429s / 1k sends",
        "quota wasted",
        "pacing error p50 / max",
        "max 60 s window / (L+C)",
        "batch makespan (× tollgate)",
        "queue delay p50 / p99",
        "Jain",
        "FIFO violations",
        "oversize request",
    ]);
    for r in reports {
        let tollgate_makespan = reports
            .iter()
            .find(|t| t.profile == r.profile && t.strategy == Strategy::Tollgate)
            .and_then(|t| t.batch.and_then(|b| b.makespan));
        let makespan = match r.batch {
            Some(BatchReport {
                makespan: Some(m),
                failed,
                bound,
            }) => {
                let times =
                    tollgate_makespan.map_or(f64::NAN, |t| m.as_secs_f64() / t.as_secs_f64());
                let failed = if failed > 0 {
                    format!(", {failed} failed")
                } else {
                    String::new()
                };
                format!(
                    "{:.0} s ({}×, bound {:.0} s){failed}",
                    m.as_secs_f64(),
                    ratio(times),
                    bound.as_secs_f64()
                )
            }
            Some(BatchReport { makespan: None, .. }) => "unfinished".to_owned(),
            None => "–".to_owned(),
        };
        let oversize = match r.oversize.outcome {
            Some(RequestOutcome::TooLarge) if r.oversize.sends == 0 => {
                format!(
                    "refused at once, 0 sends ({:.0} s)",
                    r.oversize.after.as_secs_f64()
                )
            }
            Some(outcome) => format!(
                "{:?} after {} sends, {:.0} s",
                outcome,
                r.oversize.sends,
                r.oversize.after.as_secs_f64()
            ),
            None => format!(
                "still waiting after {:.0} s, {} sends",
                r.oversize.after.as_secs_f64(),
                r.oversize.sends
            ),
        };
        table.row(vec![
            r.profile.split(':').next().unwrap_or(r.profile).to_owned(),
            r.strategy.name().to_owned(),
            format!("{} ({})", num(r.goodput, 3), dimension_name(r.binding)),
            num(r.goodput_of_possible, 3),
            format!(
                "{}% / {}%",
                num(r.spilled.0 * 100.0, 1),
                num(r.spilled.1 * 100.0, 1)
            ),
            num(r.rate_limited as f64 * 1000.0 / r.sends.max(1) as f64, 1),
            format!("{}%", num(r.wasted * 100.0, 1)),
            r.pacing_error.map_or("–".to_owned(), |p| {
                format!(
                    "{} / {} ms",
                    num(p.p50_ns as f64 / 1e6, 2),
                    num(p.max_ns as f64 / 1e6, 2)
                )
            }),
            num(r.window_ratio, 3),
            makespan,
            format!("{} / {} s", num(r.delay_p50, 1), num(r.delay_p99, 1)),
            num(r.jain, 3),
            r.fifo_violations.to_string(),
            oversize,
        ]);
    }
    let profiles = profiles();
    let describe = |p: &Profile| {
        let l = p.client.limits;
        format!(
            "**{}**: {} rpm, {} input tpm, {} output tpm",
            p.name, l.rpm, l.input_tpm, l.output_tpm
        )
    };
    Section {
        title: "2. Pacing and goodput against a simulated provider".to_owned(),
        intro: vec![
            format!(
                "{} callers in a closed loop for {} simulated minutes on tokio's paused clock, \
                 against `tollgate_sim::SimProvider` (answers in 300 ms + 15 ms per output \
                 token). Seeded sizes: input 200–8,000 tokens, output limit 256–4,096, output \
                 produced 20–100% of the limit. One request larger than the input bucket arrives \
                 at {} s. A second run sends a fixed batch of {} requests through the same callers.",
                config.callers,
                config.duration.as_secs() / 60,
                config.oversize_at.as_secs(),
                config.batch
            ),
            format!(
                "Profiles: {}; {}.",
                describe(&profiles[0]),
                describe(&profiles[1])
            ),
        ],
        table,
        notes: vec![
            "goodput (BENCHMARKS.md's measure, the target ≥ 0.98): what the provider counted \
             against the binding limit (named) per minute, over the limit. A bucket that starts \
             full lets the first minute take a whole extra bucket, so with minute buckets \
             (profile A) it exceeds 1. of the most possible: the same over `limit × minutes + \
             capacity`, the most the provider accepts in the run from any client."
                .to_owned(),
            "lost by the provider: capacity the provider's bucket of the binding limit lost, \
             over the most possible, which no client can use. idle: refill arriving while the \
             bucket was full (nobody was waiting, e.g. every caller was waiting for an answer). \
             refunds: output given back after an answer (profile B) that overflowed the bucket \
             (output limits of up to 4,096 tokens against a 5,000-token one-second bucket). \
             Goodput of the most possible plus these is 1.00 for tollgate: its pacing loses \
             nothing the provider could have accepted."
                .to_owned(),
            "quota wasted: tokens the provider charged for refused sends (profile A counts them) \
             over tokens of accepted sends."
                .to_owned(),
            "pacing error: grant time minus the earliest time an exact bucket replaying the \
             limiter's grants and settlements allows (not before the request asked, nor before \
             the grant ahead of it); p50 over grants that waited, max over all grants (a \
             negative value would be a grant too early); tollgate only, in runs without 429s."
                .to_owned(),
            "max 60 s window: the most sent (accepted or refused) in any closed 60 s window over \
             `limit + capacity`, highest over requests, input and (profile A) output; ≤ 1.00 \
             means the bound held. In profile B output is refunded after the answer, so output \
             sent may legitimately exceed it."
                .to_owned(),
            "batch makespan: from the first send to the last answer (or give-up), and its ratio \
             to tollgate's; bound: the binding limit's refill time for what the batch charges \
             beyond one bucket (the last answer's own time, up to 62 s, comes on top)."
                .to_owned(),
            "queue delay: from issuing a request to the provider accepting it, retries included; \
             Jain: fairness of accepted tokens per caller (1 = equal); FIFO violations: pairs of \
             requests accepted in the opposite order to their issue."
                .to_owned(),
            "naive retry and governor sleep `retry-after` (whole seconds) after a 429; the \
             cookbook pauses every caller 15 s. Every client makes at most 6 sends per request."
                .to_owned(),
        ],
    }
}

/// A dimension's short name.
pub fn dimension_name(d: SimDimension) -> &'static str {
    match d {
        SimDimension::Requests => "rpm",
        SimDimension::InputTokens => "input",
        SimDimension::OutputTokens => "output",
    }
}
