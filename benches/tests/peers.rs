//! Benchmark 9's reading of llmock: a hand-made journal through the parser, the traces,
//! the clock and the bucket replay, with figures worked out by hand; and, when the
//! conformance peers are installed (`TOLLGATE_LLMOCK_URL` set, as `cargo xtask test-all`
//! does), a tiny real row against an llmock of its own, checked for counts and structure
//! only (never for times).

use std::time::Duration;

use tollgate_bench::peers::journal::{ClientTrace, parse_journal};
use tollgate_bench::peers::measure::{Targets, measure, verdicts};
use tollgate_bench::peers::oracle::BucketLimits;
use tollgate_bench::peers::run::{Context, PeersConfig, Phase, run_phase};
use tollgate_bench::peers::server::{Clock, PROBE_MODEL, PeersRun};

fn record(seq: u64, model: &str, index: Option<usize>, at: (f64, f64), status: u16) -> String {
    let content = index.map_or("no marker".to_owned(), |i| format!("req-{i:05} hello"));
    let fault = if status == 429 {
        "\"ratelimit:requests\""
    } else {
        "null"
    };
    format!(
        r#"{{"seq": {seq}, "provider": "openai", "method": "POST", "path": "/v1/chat/completions",
            "started_at": {}, "ended_at": {}, "status": {status}, "fingerprint": "f",
            "model": "{model}", "stream": false, "fault": {fault}, "retry_after": null,
            "completed": true, "chunks_sent": 1, "body": {{"model": "{model}",
            "messages": [{{"role": "user", "content": "{content}"}}], "max_tokens": 5}},
            "duration": 0.2}}"#,
        at.0, at.1
    )
}

/// Client `m-a` of a 4-request batch against rpm 2 (a bucket of 2, one more every 30 s):
/// requests 0 and 1 at once, request 2 refused and then accepted 30 s later, request 3
/// never sent; plus the probe, another client's request and one without a marker.
fn journal() -> String {
    let records = [
        record(1, PROBE_MODEL, None, (99.9, 100.1), 200),
        record(2, "m-a", Some(0), (100.0, 100.2), 200),
        record(3, "m-a", Some(1), (100.0, 100.2), 200),
        record(4, "m-a", Some(2), (100.1, 100.3), 429),
        record(7, "m-a", None, (100.5, 100.6), 500),
        record(6, "m-b", Some(0), (100.0, 100.2), 200),
        record(5, "m-a", Some(2), (130.0, 130.2), 200),
    ];
    format!(
        r#"{{"count": {}, "requests": [{}]}}"#,
        records.len(),
        records.join(",")
    )
}

#[test]
fn a_hand_made_journal_is_grouped_by_request_and_client() {
    let records = parse_journal(&journal()).unwrap();
    assert_eq!(
        records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7]
    );
    assert!(records[3].is_rate_limited() && !records[5].is_rate_limited());
    let trace = ClientTrace::from_records(&records, "m-a", 4);
    let r = &trace.requests;
    assert_eq!(
        r.iter().map(|r| r.attempts).collect::<Vec<_>>(),
        [1, 1, 2, 0]
    );
    assert_eq!(r[2].rate_limited, 1);
    assert_eq!(r[2].accepted, Some((130.0, 130.2)));
    assert_eq!(r[3].accepted, None);
    assert_eq!(trace.unmatched, 1);
    assert_eq!(trace.sends(), 5);
    assert_eq!(trace.rate_limited(), 1);
    assert_eq!(trace.other_errors(), 0);
    assert_eq!(trace.failed(), 1);
    assert_eq!(trace.first_start(99.0), Some(1.0));
    assert_eq!(trace.last_accepted_start(100.0), Some(30.0));
    assert_eq!(ClientTrace::from_records(&records, "m-b", 4).sends(), 1);
    assert!(parse_journal("{}").is_err());
}

#[test]
fn the_replay_and_the_figures_of_a_hand_made_journal() {
    let records = parse_journal(&journal()).unwrap();
    let trace = ClientTrace::from_records(&records, "m-a", 4);
    let limits = BucketLimits {
        rpm: Some(2),
        tpm: None,
    };
    let (m, best) = measure("client a", &trace, 100.0, limits, 2, 0.0);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    // Measured: answers at 0.2, 0.2 and 30.2 s (request 3 was never sent).
    assert!(close(m.makespan, 30.2), "{m:?}");
    assert!(close(m.mean, (0.2 + 0.2 + 30.2) / 3.0));
    assert!(close(m.first_send, 0.0));
    // Best: two at once, then one every 30 s, each answered 0.2 s after it goes (request
    // 3 takes the median service time).
    assert!(
        close(best.sends[2], 30.0) && close(best.sends[3], 60.0),
        "{best:?}"
    );
    assert!(close(m.best_makespan, 60.2));
    assert!(close(m.best_mean, (0.2 + 0.2 + 30.2 + 60.2) / 4.0));
    // 3 accepted by 30 s: the bucket's 2 and one refill.
    assert!(close(m.goodput, 1.0));
    assert_eq!(
        (m.rate_limited, m.failed, m.sends, m.requests),
        (1, 1, 5, 4)
    );
    let v = verdicts(Targets::CatalogRight, &m, &[&m]);
    let missed: Vec<&str> = v
        .iter()
        .filter(|v| !v.met)
        .map(|v| v.target.as_str())
        .collect();
    assert_eq!(
        missed,
        [
            "0 429s",
            "every request answered",
            "makespan < client a",
            "mean completion < client a"
        ]
    );
}

#[tokio::test]
async fn the_probe_maps_local_instants_onto_llmocks_clock() {
    let records = parse_journal(&journal()).unwrap();
    let sent = tollgate::clock::now();
    let clock = Clock::from_journal(sent, &records).unwrap();
    assert!((clock.server(sent + Duration::from_millis(100)) - 100.0).abs() < 1e-9);
    assert!((clock.server(sent) - 99.9).abs() < 1e-9);
    assert!(Clock::from_journal(sent, &records[1..]).is_none());
}

/// A tiny version of the OpenAI phase against a real llmock: both rows, every client,
/// every request accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_real_row_against_llmock() {
    if tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL").is_none() {
        return;
    }
    let config = PeersConfig {
        rpm: 600,
        requests: 200,
        concurrency: 8,
        words: (3, 8),
        max_tokens: 8,
        latency_ms: 10,
        processes: 2,
        ..PeersConfig::FULL
    };
    let peers = PeersRun::new(format!("test-peers-{}", std::process::id()));
    let context = Context {
        peers: &peers,
        redis: None,
        prefix: "unused".into(),
    };
    let rows = run_phase(
        Phase::Dialect(tollgate_bench::peers::wire::Dialect::OpenAi),
        &config,
        &context,
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let clients: Vec<&str> = row.clients.iter().map(|m| m.client.as_str()).collect();
        assert_eq!(
            clients,
            ["tollgate", "cookbook port", "naive"],
            "{}",
            row.title
        );
        for m in &row.clients {
            assert_eq!(m.requests, config.requests);
            assert!(m.sends as usize >= m.requests - m.failed, "{m:?}");
            assert!(
                m.best_makespan.is_finite() && m.best_makespan > 0.0,
                "{m:?}"
            );
        }
        assert_eq!(row.clients[0].failed, 0, "{:?}", row.clients[0]);
        assert!(!row.verdicts.is_empty());
    }
}
