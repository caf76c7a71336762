//! Benchmark 9's tables for `docs/benchmarks.md`: every client's figures, then tollgate's
//! targets, each marked met or missed.

use super::clients::{COOKBOOK_ATTEMPTS, NAIVE_MAX_ATTEMPTS, TOLLGATE_RETRIES};
use super::run::{PeersConfig, RowResult};
use crate::report::{Section, Table, num};

/// The figures' heading.
pub const TITLE: &str = "7. Pacing against a third-party server (llmock)";

/// The two sections: figures, and targets. `seconds`: how long the run took.
pub fn sections(
    rows: &[RowResult],
    c: &PeersConfig,
    problems: &[String],
    seconds: f64,
) -> Vec<Section> {
    let mut figures = Table::new(&[
        "row",
        "client",
        "first send",
        "makespan (best)",
        "× best",
        "mean completion (best)",
        "× best",
        "429s",
        "other errors",
        "failed",
        "sends",
        "goodput",
    ]);
    for row in rows {
        for (i, m) in row.clients.iter().enumerate() {
            figures.row(vec![
                if i == 0 {
                    format!("{} ({})", row.title, row.setting)
                } else {
                    String::new()
                },
                m.client.clone(),
                format!("{} s", num(m.first_send, 2)),
                format!("{} s ({} s)", num(m.makespan, 1), num(m.best_makespan, 1)),
                num(m.makespan_ratio(), 3),
                format!("{} s ({} s)", num(m.mean, 1), num(m.best_mean, 1)),
                num(m.mean_ratio(), 3),
                m.rate_limited.to_string(),
                m.other_errors.to_string(),
                format!("{} / {}", m.failed, m.requests),
                m.sends.to_string(),
                num(m.goodput, 3),
            ]);
        }
    }
    let mut targets = Table::new(&["row", "target (tollgate)", "figure", "verdict"]);
    for row in rows {
        for (i, v) in row.verdicts.iter().enumerate() {
            targets.row(vec![
                if i == 0 {
                    row.title.clone()
                } else {
                    String::new()
                },
                v.target.clone(),
                v.figure.clone(),
                if v.met { "met" } else { "**missed**" }.to_owned(),
            ]);
        }
    }
    let met = rows
        .iter()
        .flat_map(|r| &r.verdicts)
        .filter(|v| v.met)
        .count();
    let all = rows.iter().map(|r| r.verdicts.len()).sum::<usize>();
    let mut notes = vec![
        "makespan: the last answer; mean completion: the mean answer time; both from the \
         client's start, on llmock's clock (a probe request maps this process's clock onto \
         it). Best: llmock's buckets replayed with this client's own service times: each \
         request, in file order, admitted at the earliest instant a caller is free and the \
         buckets hold what llmock charges it (1 request; body bytes / 4 + `max_tokens` \
         tokens), the same concurrency, admission after llmock's latency."
            .into(),
        "first send: when the client's first request reached llmock, from its start: \
         what starting up costs (a process for `tollgate run` and the Redis row's clients, \
         connections, a provider built on first use); the best sends at 0."
            .into(),
        "goodput: what llmock accepted over what its buckets would have admitted by the last \
         accepted admission (one minute's capacity plus the refill since the start), on the \
         binding limit. sends and 429s come from llmock's journal, not from the clients."
            .into(),
        format!(
            "Clients: tollgate is `Models` with the provider (`openai`, `anthropic-direct`, \
             `gemini`) at llmock's address, {TOLLGATE_RETRIES} retries per call (`tollgate \
             run`'s default); the cookbook port is `clients::cookbook`'s pacer (float \
             buckets told the catalog's limits, a request's tokens = tollgate's estimate of \
             its prompt + `max_tokens`, everyone pauses 15 s after any 429, \
             {COOKBOOK_ATTEMPTS} attempts) in front of raw requests; naive sends at once and \
             after a 429 sleeps `retry-after-ms` (up to {NAIVE_MAX_ATTEMPTS} attempts). All \
             three at the same concurrency."
        ),
        "The best keeps file order, as the target asks; a client that lets later requests \
         overtake (naive, which sends whatever fits) can beat it on mean completion when \
         prompt sizes are mixed, so its ratio can fall below 1. Each client's best uses the \
         charges of its own bodies: tollgate's transports send slightly larger bodies than \
         the hand-written ones, so its best is a little later in the tokens-bound row."
            .into(),
    ];
    notes.extend(problems.iter().map(|p| format!("Not measured: {p}")));
    vec![
        Section {
            title: TITLE.into(),
            intro: vec![
                format!(
                    "llmock 0.2.2 (PyPI), a mock server this project did not write, started by \
                     `scripts/peers.sh llmock NAME --rpm N --tpm N --latency-ms {}` on \
                     127.0.0.1: continuous buckets per API key holding one minute's limit, \
                     full at the start; rate-limit headers on every answer (`x-ratelimit-*`, \
                     Anthropic's `anthropic-ratelimit-*`); a 429 with the exact wait when a \
                     bucket is short. It answers {} ms after a request arrives and admits it \
                     then.",
                    c.latency_ms, c.latency_ms
                ),
                format!(
                    "Rows: each dialect at rpm {} ({} requests of {} to {} words, `max_tokens` \
                     {}, concurrency {}), the catalog right and at 2×; a tokens-bound row \
                     (OpenAI, tpm {}, {} requests of {} to {} words, `max_tokens` {}); the \
                     rpm row through the `tollgate run` binary; and {} OS processes of {} \
                     callers each on one key, tollgate sharing its limit through \
                     `tollgate-redis`. Each client of a row has its own API key on the same \
                     llmock (its buckets are per key), and the clients of a row (and the two \
                     catalog rows of a dialect) run at the same time, so a row takes about \
                     one batch's time; this run took {seconds:.0} s.",
                    c.rpm,
                    c.requests,
                    c.words.0,
                    c.words.1,
                    c.max_tokens,
                    c.concurrency,
                    c.tpm,
                    c.tokens_requests,
                    c.tokens_words.0,
                    c.tokens_words.1,
                    c.tokens_max_tokens,
                    c.processes,
                    c.concurrency / c.processes.max(1),
                ),
            ],
            table: figures,
            notes,
        },
        Section {
            title: "7b. Targets against llmock".into(),
            intro: vec![format!(
                "tollgate's targets in each row of section 7 ({met} of {all} met). Catalog \
                 right: makespan ≤ 1.03× best, mean completion ≤ 1.1× best, no 429; catalog \
                 at 2×: ≤ 3 429s, makespan ≤ 1.1× best; processes on Redis: goodput ≥ 0.95, \
                 no 429; in every row every request answered, and ahead of the cookbook port \
                 on makespan and mean completion."
            )],
            table: targets,
            notes: Vec::new(),
        },
    ]
}
