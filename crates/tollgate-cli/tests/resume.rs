//! `tollgate run` finishes what it started: a re-run of the same command keeps every
//! success (byte for byte) and every final failure, sends again what failed for a reason
//! that may pass (the spend cap, a cancellation, a line cut short by a crash), and
//! leaves exactly one line per `custom_id`.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{
    Served, assert_one_line_per_id, chat_line, id_counts, output_lines, output_lines_lenient,
    raw_lines, run_batch, text, write_batch,
};
use tollgate_sim::{SimConfig, SimLatency, SimLimits};

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

/// The output's success lines, as written.
fn success_lines(path: &std::path::Path) -> Vec<String> {
    raw_lines(path)
        .into_iter()
        .filter(|l| l.contains("\"error\":null"))
        .collect()
}

fn interrupt(child: &Child) {
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

#[test]
fn run_resumed_skips_ids_already_in_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (1..=4).map(|i| chat_line(&format!("r{i}"), "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    for _ in 0..2 {
        let result = run_batch(None, &input, "demo", &out).output().unwrap();
        assert!(result.status.success(), "{}", text(&result.stderr));
    }
    let parsed = output_lines(&out);
    assert_eq!(parsed.len(), 4);
    assert!(id_counts(&parsed).values().all(|n| *n == 1));
}

#[test]
fn run_interrupted_by_ctrl_c_then_resumed_has_every_custom_id_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // `demo-slow` serves one request a second: the run is interrupted mid-way.
    let total = 8;
    let lines: Vec<String> = (1..=total)
        .map(|i| chat_line(&format!("s{i}"), "Slowly"))
        .collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let mut child = run_batch(None, &input, "demo-slow", &out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (on progress, not on time) until two results are written, then send SIGINT.
    while output_lines_lenient(&out) < 2 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before it could be interrupted");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(130), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains("interrupted"),
        "{}",
        text(&first.stdout)
    );
    let after_interrupt = output_lines(&out);
    assert!(
        after_interrupt.len() >= 2 && after_interrupt.len() < total,
        "{}",
        after_interrupt.len()
    );
    assert!(
        after_interrupt.iter().all(|l| l["error"].is_null()),
        "nothing cancelled after it was sent"
    );

    let second = run_batch(None, &input, "demo-slow", &out).output().unwrap();
    assert!(second.status.success(), "{}", text(&second.stderr));
    let parsed = output_lines(&out);
    let counts = id_counts(&parsed);
    assert_eq!(counts.len(), total, "every request done");
    assert!(
        counts.values().all(|n| *n == 1),
        "nothing duplicated: {counts:?}"
    );
}

#[test]
fn run_rerun_after_the_spend_cap_sends_the_capped_requests_again_and_keeps_the_successes() {
    let dir = tempfile::tempdir().unwrap();
    let ids = ids("c", 6);
    let lines: Vec<String> = ids.iter().map(|id| chat_line(id, "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let run = |max_cost: &str| {
        run_batch(None, &input, "demo", &out)
            .args(["--max-cost", max_cost])
            .output()
            .unwrap()
    };
    // One request costs at most ~0.00006 USD on `demo`: a cap of 0.0001 lets one through.
    let first = run("0.0001");
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let parsed = output_lines(&out);
    let capped: Vec<_> = parsed
        .iter()
        .filter(|l| l["error"]["code"] == "spend_cap_exceeded")
        .collect();
    assert!(capped.len() >= 4, "{parsed:#?}");
    assert!(
        capped.iter().all(|l| l["error"]["retryable"] == true),
        "the run's cap does not bind a re-run: {capped:#?}"
    );
    let succeeded = success_lines(&out);
    assert!(!succeeded.is_empty());

    let second = run("1");
    assert!(second.status.success(), "{}", text(&second.stdout));
    let stdout = text(&second.stdout);
    assert!(
        stdout.contains(&format!("{} failed earlier and sent again", capped.len())),
        "{stdout}"
    );
    let parsed = output_lines(&out);
    assert_one_line_per_id(&parsed, &ids);
    assert!(parsed.iter().all(|l| l["error"].is_null()), "{parsed:#?}");
    let now = raw_lines(&out);
    for line in &succeeded {
        assert!(
            now.contains(line),
            "a first-run success is kept as written: {line}"
        );
    }
}

#[test]
fn run_rerun_after_a_double_ctrl_c_sends_the_cancelled_requests_again() {
    let dir = tempfile::tempdir().unwrap();
    // The provider serves 3 requests at once and then one every 20 s, though the catalog
    // says 6000 a minute: of 6 sent at once, 3 are answered in 50 ms and 3 refused with a
    // 429 (saying to come back in 20 s) that takes 2 s to arrive, so none of it holds the
    // others back. Those 3 are in flight (waiting for their answer, then for the retry)
    // when the run is interrupted twice.
    let answer_in = |base, refusal| SimLatency {
        base,
        per_output_token: Duration::ZERO,
        refusal,
    };
    let stingy = Served::new(
        SimConfig::new(SimLimits {
            rpm: 3,
            input_tpm: 0,
            output_tpm: 0,
        })
        .with_latency(answer_in(Duration::from_millis(50), Duration::from_secs(2))),
        4,
    );
    let limits = "rpm = 6000";
    let catalog = dir.path().join("models.toml");
    std::fs::write(&catalog, stingy.catalog("m", limits)).unwrap();
    let ids = ids("i", 6);
    let lines: Vec<String> = ids.iter().map(|id| chat_line(id, "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let command = || run_batch(Some(&catalog), &input, "m", &out);
    let mut child = command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, stderr) = mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Wait (on progress, not on time) until the three answers are written and the
    // three refusals made.
    while output_lines_lenient(&out) < 3 || stingy.server.stats().rate_limited < 3 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the run ended ({status}) before it could be interrupted: {} lines, {:?}",
                output_lines_lenient(&out),
                stingy.server.stats()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    interrupt(&child);
    // The second Ctrl-C once the first is seen: two at once would arrive as one.
    loop {
        let line = stderr.recv().expect("the run says it is stopping");
        if line.contains("stopping") {
            break;
        }
    }
    interrupt(&child);
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(130), "{}", text(&first.stdout));
    let parsed = output_lines(&out);
    assert_one_line_per_id(&parsed, &ids);
    let cancelled: Vec<_> = parsed.iter().filter(|l| !l["error"].is_null()).collect();
    assert_eq!(cancelled.len(), 3, "{parsed:#?}");
    for l in &cancelled {
        assert_eq!(l["error"]["code"], "cancelled", "{l}");
        assert_eq!(l["error"]["retryable"], true, "{l}");
    }
    let answered = success_lines(&out);
    assert_eq!(answered.len(), 3);

    // The provider has room now; the same command finishes the batch.
    let roomy = Served::new(
        SimConfig::new(SimLimits {
            rpm: 6000,
            input_tpm: 0,
            output_tpm: 0,
        })
        .with_latency(answer_in(Duration::from_millis(10), Duration::ZERO)),
        4,
    );
    std::fs::write(&catalog, roomy.catalog("m", limits)).unwrap();
    let second = command().output().unwrap();
    assert!(second.status.success(), "{}", text(&second.stdout));
    assert_eq!(
        roomy.server.stats().calls,
        3,
        "only the cancelled are sent again"
    );
    let parsed = output_lines(&out);
    assert_one_line_per_id(&parsed, &ids);
    assert!(parsed.iter().all(|l| l["error"].is_null()), "{parsed:#?}");
    let now = raw_lines(&out);
    for line in &answered {
        assert!(now.contains(line), "kept as written: {line}");
    }
}

#[test]
fn run_rerun_after_a_crash_mid_line_drops_the_cut_line_and_sends_its_request_again() {
    let dir = tempfile::tempdir().unwrap();
    let ids = ids("k", 4);
    let lines: Vec<String> = ids.iter().map(|id| chat_line(id, "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let run = || run_batch(None, &input, "demo", &out).output().unwrap();
    assert!(run().status.success());
    // A crash while the last line was being written: half of it, no newline.
    let whole = raw_lines(&out);
    let (kept, last) = whole.split_at(whole.len() - 1);
    let cut_id = serde_json::from_str::<serde_json::Value>(&last[0]).unwrap()["custom_id"].clone();
    std::fs::write(
        &out,
        format!("{}\n{}", kept.join("\n"), &last[0][..last[0].len() / 2]),
    )
    .unwrap();

    let second = run();
    assert!(second.status.success(), "{}", text(&second.stdout));
    let stdout = text(&second.stdout);
    assert!(stdout.contains("3 already done"), "{stdout}");
    assert!(
        stdout.contains("1 cut short or repeated, dropped"),
        "{stdout}"
    );
    let parsed = output_lines(&out);
    assert_one_line_per_id(&parsed, &ids);
    let now = raw_lines(&out);
    assert_eq!(&now[..3], kept, "the whole lines are kept as written");
    assert_eq!(
        parsed[3]["custom_id"], cut_id,
        "the cut request was sent again"
    );
}

#[test]
fn run_rerun_keeps_final_failures_unless_retry_failed() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("models.toml");
    // A window of 200 tokens: the long prompt can never fit, the short one does.
    std::fs::write(
        &catalog,
        "[models.small]\nprovider = \"sim\"\nrpm = 600\nburst_seconds = 1\n\
         arrival_allowance_ms = 0\nmax_output_tokens = 32\ncontext_window = 200\n\
         [models.small.options]\nlatency_ms = 10\n",
    )
    .unwrap();
    let long = "word ".repeat(2000);
    let input = write_batch(
        dir.path(),
        &[chat_line("short", "Hi"), chat_line("long", &long)],
    );
    let out = dir.path().join("out.jsonl");
    let run = |extra: &[&str]| {
        run_batch(Some(&catalog), &input, "small", &out)
            .args(extra)
            .output()
            .unwrap()
    };
    let first = run(&[]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let parsed = output_lines(&out);
    let failed = parsed.iter().find(|l| l["custom_id"] == "long").unwrap();
    assert_eq!(failed["error"]["code"], "context_window_exceeded");
    assert_eq!(failed["error"]["retryable"], false);
    let written = std::fs::read_to_string(&out).unwrap();

    let again = run(&[]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "a kept failure still fails the batch"
    );
    let stdout = text(&again.stdout);
    assert!(stdout.contains("2 already done"), "{stdout}");
    assert!(stdout.contains("1 of them failures"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        written,
        "nothing sent, nothing changed"
    );

    let forced = run(&["--retry-failed"]);
    assert_eq!(forced.status.code(), Some(1));
    let stdout = text(&forced.stdout);
    assert!(stdout.contains("1 already done"), "{stdout}");
    assert!(
        stdout.contains("1 failed earlier and sent again"),
        "{stdout}"
    );
    let parsed = output_lines(&out);
    assert_one_line_per_id(&parsed, &["short".to_owned(), "long".to_owned()]);
    let retried = parsed.iter().find(|l| l["custom_id"] == "long").unwrap();
    assert_eq!(retried["error"]["code"], "context_window_exceeded");
    assert_ne!(
        retried["id"], failed["id"],
        "a new line replaced the old one"
    );
}
