//! `--via batch` against a scripted batch API, on tokio's paused clock: grouping within
//! caps, the queue limit held and given back, requests refused before upload, a
//! resumed run that submits nothing twice, a batch failed for its queue limit sent
//! again, expired lines, `--cancel`.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::ProgressBar;
use serde_json::Value;
use tokio::sync::watch;
use tollgate::catalog::Price;
use tollgate::limit::{MemoryQueueLedger, QueueCaps};
use tollgate::provider::batch::{BatchCounts, BatchTransport};

use super::fake_api::{Api, Script};
use super::state::{self, Slot, State};
use super::{BatchRun, BatchTally, run_batches};
use crate::input::{Item, parse_line};
use crate::record::CliRecorder;
use crate::run::lines::LineWriter;

struct Fixture {
    _dir: tempfile::TempDir,
    out: std::path::PathBuf,
    script: Arc<Script>,
    ledger: Arc<MemoryQueueLedger>,
    cap: Option<tollgate::SpendCap>,
}

impl Fixture {
    fn new(script: Arc<Script>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        Fixture {
            out: dir.path().join("out.jsonl"),
            _dir: dir,
            script,
            ledger: Arc::new(MemoryQueueLedger::new()),
            cap: None,
        }
    }

    fn run(&self, caps: QueueCaps, cancel: bool) -> BatchRun {
        BatchRun {
            transport: Arc::new(Api(self.script.clone())),
            ledger: self.ledger.clone(),
            account: "fake::m-1".into(),
            caps,
            max_requests: None,
            max_bytes: None,
            price: Some(Price {
                input: 1.0,
                output: 2.0,
                ..Price::default()
            }),
            live_price: Some(Price {
                input: 2.0,
                output: 4.0,
                ..Price::default()
            }),
            poll_every: Duration::from_secs(30),
            state_path: state::path_for(&self.out),
            model_id: "m".into(),
            cancel,
            cap: self.cap.clone(),
            default_output_tokens: Some(1_000_000),
        }
    }

    fn writer(&self) -> LineWriter {
        LineWriter {
            model_id: "m".into(),
            recorder: Arc::new(CliRecorder::default()),
            out: Mutex::new(crate::output::open_append(&self.out).unwrap()),
            tally: Arc::default(),
            next_id: AtomicU64::new(1),
        }
    }

    async fn go(&self, items: Vec<Item>, caps: QueueCaps) -> BatchTally {
        let (tx, rx) = watch::channel(0u8);
        let writer = self.writer();
        let tally = run_batches(
            &self.run(caps, false),
            items,
            &writer,
            rx,
            &ProgressBar::hidden(),
        )
        .await
        .unwrap();
        drop(tx);
        tally
    }

    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn by_id(&self) -> HashMap<String, Value> {
        self.lines()
            .into_iter()
            .map(|l| (l["custom_id"].as_str().unwrap().to_owned(), l))
            .collect()
    }
}

fn items(n: usize) -> Vec<Item> {
    (1..=n)
        .map(|i| {
            parse_line(
                i,
                &format!(r#"{{"custom_id":"r{i}","prompt":"Question {i}"}}"#),
                "m",
            )
            .unwrap()
            .unwrap()
        })
        .collect()
}

const UNLIMITED: QueueCaps = QueueCaps {
    tokens: None,
    batches: None,
};

#[tokio::test(start_paused = true)]
async fn batch_run_groups_within_caps_and_writes_one_line_per_id_at_the_batch_price() {
    let f = Fixture::new(Script::new(2));
    let tally = f.go(items(5), UNLIMITED).await;
    let submitted = f.script.submitted();
    assert_eq!(
        submitted.iter().map(|b| b.ids.len()).collect::<Vec<_>>(),
        vec![2, 2, 1]
    );
    let lines = f.by_id();
    assert_eq!(lines.len(), 5);
    let r3 = &lines["r3"];
    assert_eq!(
        r3["response"]["body"]["choices"][0]["message"]["content"],
        "answer to r3"
    );
    // 1M input at $1 + 1M output at $2 (the batch price), against $6 live.
    assert_eq!(r3["tollgate"]["cost_usd"], 3.0);
    assert_eq!(r3["tollgate"]["via"], "batch:b2");
    assert_eq!(tally.requests, 5);
    assert_eq!((tally.cost_usd, tally.live_cost_usd), (15.0, 30.0));
    assert_eq!(
        (tally.submitted, tally.collected, tally.in_flight),
        (3, 3, 0)
    );
    assert!(
        !state::path_for(&f.out).exists(),
        "the state goes when done"
    );
}

#[tokio::test(start_paused = true)]
async fn batch_stream_line_is_refused_before_anything_is_uploaded() {
    let f = Fixture::new(Script::new(10));
    let mut input = items(2);
    input.push(
        parse_line(
            3,
            r#"{"custom_id":"s","messages":[{"role":"user","content":"Hi"}],"stream":true}"#,
            "m",
        )
        .unwrap()
        .unwrap(),
    );
    input.push(
        parse_line(4, r#"{"custom_id":"has space","prompt":"Hi"}"#, "m")
            .unwrap()
            .unwrap(),
    );
    let tally = f.go(input, UNLIMITED).await;
    let uploaded: Vec<String> = f
        .script
        .submitted()
        .into_iter()
        .flat_map(|b| b.ids)
        .collect();
    assert_eq!(uploaded, vec!["r1", "r2"]);
    let lines = f.by_id();
    assert_eq!(lines["s"]["error"]["code"], "invalid_request");
    assert!(
        lines["s"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("stream")
    );
    assert_eq!(lines["has space"]["error"]["code"], "invalid_request");
    assert!(
        lines["s"]["tollgate"]["via"].is_null(),
        "a refused line never reached a batch"
    );
    assert_eq!(tally.refused, 2);
}

#[tokio::test(start_paused = true)]
async fn batch_queue_tokens_limit_holds_a_batch_back_until_one_ends() {
    let f = Fixture::new(Script::new(2));
    // Each request is a few tokens: a cap that fits one two-request batch, not two.
    let per = {
        use tollgate::pipeline::{DefaultEstimator, TokenEstimator};
        let crate::input::Body::Chat(r) = &items(1)[0].body else {
            unreachable!()
        };
        DefaultEstimator.estimate_request(r)
    };
    let caps = QueueCaps {
        tokens: Some(per * 3),
        batches: None,
    };
    f.go(items(6), caps).await;
    assert_eq!(f.script.submitted().len(), 3);
    assert_eq!(*f.script.max_pending_lines.lock().unwrap(), 2);
    assert_eq!(f.by_id().len(), 6);
}

#[tokio::test(start_paused = true)]
async fn batch_pending_batches_limit_keeps_one_batch_at_the_provider_at_a_time() {
    let f = Fixture::new(Script::new(1));
    let caps = QueueCaps {
        tokens: None,
        batches: Some(1),
    };
    f.go(items(3), caps).await;
    assert_eq!(*f.script.max_pending_lines.lock().unwrap(), 1);
    assert_eq!(f.by_id().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn batch_run_interrupted_then_resumed_submits_nothing_twice_and_collects_everything() {
    let f = Fixture::new(Script::new(2));
    // Stopped at once: the batches are submitted, none collected.
    let (tx, rx) = watch::channel(0u8);
    let writer = f.writer();
    let run = f.run(UNLIMITED, false);
    let first = {
        let bar = ProgressBar::hidden();
        let go = run_batches(&run, items(4), &writer, rx, &bar);
        tokio::pin!(go);
        // Let it submit, then Ctrl-C while it sleeps before the first poll.
        tokio::select! {
            biased;
            t = &mut go => t,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                tx.send(1).unwrap();
                go.await
            }
        }
    }
    .unwrap();
    assert_eq!((first.submitted, first.in_flight), (2, 2));
    assert!(f.lines().is_empty());
    let saved = State::load(&state::path_for(&f.out), "m").unwrap();
    assert_eq!(saved.batches.len(), 2);
    assert!(saved.batches.iter().all(|s| s.handle.is_some()));

    // The same command again (a new process: a new ledger), with the same input.
    let f2 = Fixture {
        _dir: tempfile::tempdir().unwrap(),
        out: f.out.clone(),
        script: f.script.clone(),
        ledger: Arc::new(MemoryQueueLedger::new()),
        cap: None,
    };
    let second = f2.go(items(4), UNLIMITED).await;
    assert_eq!(f.script.submitted().len(), 2, "nothing submitted twice");
    assert_eq!((second.submitted, second.collected), (0, 2));
    let lines = f.lines();
    assert_eq!(lines.len(), 4);
    assert_eq!(f.by_id().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn batch_submitted_but_not_recorded_is_found_by_its_label_not_submitted_again() {
    let f = Fixture::new(Script::new(10));
    // An earlier run held the queue and submitted, then died before writing the handle.
    let label = "tollgate-earlier-1";
    Api(f.script.clone())
        .submit(&[b"r1".to_vec(), b"r2".to_vec()], label)
        .await
        .unwrap();
    State {
        model: "m".into(),
        batches: vec![Slot {
            label: label.into(),
            ids: vec!["r1".into(), "r2".into()],
            tokens: 10,
            handle: None,
            phase: None,
            counts: BatchCounts::default(),
            cancel_sent: false,
        }],
    }
    .save(&state::path_for(&f.out))
    .unwrap();
    let tally = f.go(items(3), UNLIMITED).await;
    let submitted = f.script.submitted();
    assert_eq!(submitted.len(), 2, "only r3 is new");
    assert_eq!(submitted[1].ids, vec!["r3"]);
    assert_eq!(f.by_id().len(), 3);
    assert_eq!(tally.collected, 2);
}

#[tokio::test(start_paused = true)]
async fn batch_failed_for_its_queue_limit_is_submitted_again_in_halves_and_answers() {
    let script = Script::new(10);
    script
        .fail_for_queue
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let f = Fixture::new(script);
    let tally = f.go(items(3), UNLIMITED).await;
    // Alone at the provider and still refused: the estimate was under the provider's
    // count, so the same requests go again as two smaller batches.
    let sizes: Vec<usize> = f.script.submitted().iter().map(|b| b.ids.len()).collect();
    assert_eq!(sizes, vec![3, 1, 2]);
    let lines = f.by_id();
    assert_eq!(lines.len(), 3);
    assert!(lines.values().all(|l| l["error"].is_null()));
    assert_eq!(tally.submitted, 3);
}

#[tokio::test(start_paused = true)]
async fn batch_of_one_the_queue_never_takes_ends_with_the_error_so_the_run_ends() {
    let script = Script::new(10);
    script
        .fail_for_queue
        .store(u64::MAX, std::sync::atomic::Ordering::SeqCst);
    let f = Fixture::new(script);
    f.go(items(2), UNLIMITED).await;
    // 2; then 1 and 1, refused at the same poll: the first while the other is still
    // pending goes again, the second, now alone, ends with its error; then the first
    // again, alone, ends too.
    assert_eq!(f.script.submitted().len(), 4);
    let lines = f.by_id();
    assert_eq!(lines.len(), 2);
    for l in lines.values() {
        assert_eq!(l["error"]["code"], "rate_limited");
        assert_eq!(l["error"]["retryable"], true);
    }
}

#[tokio::test(start_paused = true)]
async fn batch_line_missing_from_results_is_written_unfinished_and_sent_again_by_a_rerun() {
    let script = Arc::new(Script {
        drop_ids: vec!["r2".into()],
        max_requests: 10,
        ..Script::default()
    });
    let f = Fixture::new(script);
    f.go(items(3), UNLIMITED).await;
    let lines = f.by_id();
    let r2 = &lines["r2"]["error"];
    assert_eq!(r2["code"], "batch_unfinished");
    assert_eq!(r2["retryable"], true);
    assert!(r2["message"].as_str().unwrap().contains("expired"));
}

#[tokio::test(start_paused = true)]
async fn batch_cancel_cancels_what_is_in_flight_and_submits_nothing_new() {
    let f = Fixture::new(Script::new(2));
    let (tx, rx) = watch::channel(0u8);
    let writer = f.writer();
    let run = f.run(UNLIMITED, false);
    {
        let bar = ProgressBar::hidden();
        let go = run_batches(&run, items(4), &writer, rx, &bar);
        tokio::pin!(go);
        tokio::select! {
            biased;
            _ = &mut go => panic!("ended before Ctrl-C"),
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                tx.send(1).unwrap();
                go.await.unwrap();
            }
        }
    }
    let (_tx, rx) = watch::channel(0u8);
    let mut more = items(4);
    more.push(
        parse_line(5, r#"{"custom_id":"r5","prompt":"new"}"#, "m")
            .unwrap()
            .unwrap(),
    );
    let writer = f.writer();
    let tally = run_batches(
        &f.run(UNLIMITED, true),
        more,
        &writer,
        rx,
        &ProgressBar::hidden(),
    )
    .await
    .unwrap();
    assert!(f.script.submitted().iter().all(|b| b.cancelled));
    assert_eq!(f.script.submitted().len(), 2, "nothing new submitted");
    assert_eq!(tally.not_sent, 1);
    let lines = f.by_id();
    assert_eq!(lines.len(), 4);
    assert!(
        lines["r1"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
}

#[tokio::test(start_paused = true)]
async fn batch_submit_refused_with_a_429_waits_its_retry_after_then_submits() {
    let script = Script::new(10);
    script
        .refuse_submits
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let f = Fixture::new(script);
    let tally = f.go(items(2), UNLIMITED).await;
    let times = f.script.submit_times.lock().unwrap().clone();
    assert_eq!(times.len(), 2);
    // Polled every 30 s: the retry waits out the 90 s asked for, not the next poll.
    assert_eq!(times[1] - times[0], Duration::from_secs(90));
    assert_eq!(tally.submitted, 1);
    assert_eq!(f.by_id().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn batch_the_provider_does_not_know_ends_the_run_with_its_state_kept() {
    let f = Fixture::new(Script::new(10));
    State {
        model: "m".into(),
        batches: vec![Slot {
            label: "tollgate-gone-1".into(),
            ids: vec!["r1".into()],
            tokens: 10,
            handle: Some(tollgate::provider::batch::BatchHandle {
                id: "bgone".into(),
                input_file: None,
            }),
            phase: None,
            counts: BatchCounts::default(),
            cancel_sent: false,
        }],
    }
    .save(&state::path_for(&f.out))
    .unwrap();
    let (_tx, rx) = watch::channel(0u8);
    let writer = f.writer();
    let err = run_batches(
        &f.run(UNLIMITED, false),
        items(2),
        &writer,
        rx,
        &ProgressBar::hidden(),
    )
    .await
    .unwrap_err();
    assert!(err.contains("bgone") && err.contains("404"), "{err}");
    assert!(
        State::load(&state::path_for(&f.out), "m")
            .unwrap()
            .batches
            .iter()
            .any(|s| s.label == "tollgate-gone-1"),
        "the state is kept"
    );
}

#[tokio::test(start_paused = true)]
async fn batch_max_cost_holds_each_batch_worst_case_and_sends_none_past_the_cap() {
    let mut f = Fixture::new(Script::new(1));
    // A request's worst case: 1M output tokens at $2/M, plus its few input tokens (just
    // over $2). Each answer costs $3 (1M in, 1M out). With a $5 cap and one batch at a
    // time: the first is held and costs $3; then $2 is left, short of the next worst case.
    f.cap = Some(tollgate::SpendCap::new("--max-cost", 5.0));
    let caps = QueueCaps {
        tokens: None,
        batches: Some(1),
    };
    f.go(items(3), caps).await;
    assert_eq!(f.script.submitted().len(), 1);
    let cap = f.cap.clone().unwrap();
    assert_eq!(cap.spent_usd(), 3.0, "settled at what its answers cost");
    assert_eq!(cap.held_usd(), 0.0, "every hold settled or released");
    let lines = f.by_id();
    assert_eq!(lines.len(), 3);
    for id in ["r2", "r3"] {
        assert_eq!(lines[id]["error"]["code"], "spend_cap_exceeded", "{id}");
        assert_eq!(lines[id]["error"]["retryable"], true, "{id}");
    }
}

#[tokio::test(start_paused = true)]
async fn batch_refused_answer_is_the_refusal_failure_a_live_run_writes_and_is_billed() {
    let script = Arc::new(Script {
        refuse_ids: vec!["r2".into()],
        max_requests: 10,
        ..Script::default()
    });
    let f = Fixture::new(script);
    let tally = f.go(items(2), UNLIMITED).await;
    let lines = f.by_id();
    assert!(lines["r1"]["error"].is_null());
    let r2 = &lines["r2"];
    assert_eq!(r2["error"]["code"], "refusal");
    assert_eq!(
        r2["error"]["retryable"], false,
        "the same request meets it again"
    );
    // The provider bills a refused answer: its usage at the batch price.
    assert_eq!(r2["tollgate"]["cost_usd"], 3.0);
    assert_eq!(tally.cost_usd, 6.0);
}
