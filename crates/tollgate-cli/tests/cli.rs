//! The `tollgate` binary end to end, on the embedded demo catalog (no keys, no network):
//! every subcommand, bad input lines, a missing credential, the output format parsed
//! back. Resuming a batch is in `resume.rs`, limits shared over Redis in
//! `shared_limits.rs`.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{chat_line, id_counts, output_lines, text, tollgate, write_batch};
use serde_json::Value;

fn run_with_stdin(mut cmd: Command, stdin: &str) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("tollgate starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("tollgate ends")
}

#[test]
fn run_writes_one_line_per_request_in_the_batch_api_output_shape() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (1..=12)
        .map(|i| chat_line(&format!("r{i}"), "Hello"))
        .collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let result = tollgate()
        .args(["run", input.to_str().unwrap(), "--model", "demo", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert!(stdout.contains("succeeded  12"), "{stdout}");
    assert!(stdout.contains("429s       0"), "{stdout}");
    let parsed = output_lines(&out);
    assert_eq!(parsed.len(), 12);
    assert!(id_counts(&parsed).values().all(|n| *n == 1));
    for line in &parsed {
        assert!(line["id"].as_str().unwrap().starts_with("batch_"));
        assert_eq!(line["error"], Value::Null);
        let response = &line["response"];
        assert_eq!(response["status_code"], 200);
        let body = &response["body"];
        assert_eq!(body["object"], "chat.completion");
        assert!(
            !body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .is_empty()
        );
        assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        assert!(body["usage"]["completion_tokens"].as_u64().unwrap() > 0);
        let meta = &line["tollgate"];
        assert_eq!(meta["model"], "demo");
        assert_eq!(meta["attempts"], 1);
        assert!(meta["cost_usd"].as_f64().unwrap() > 0.0);
        assert!(meta["line"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn run_reports_bad_lines_with_their_number_and_runs_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        chat_line("ok1", "Hi"),
        "{this is not json".to_owned(),
        r#"{"custom_id":"img","method":"POST","url":"/v1/images","body":{}}"#.to_owned(),
        chat_line("ok2", "Hi"),
        chat_line("ok1", "a repeated id"),
        "A plain prompt line".to_owned(),
    ];
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let result = tollgate()
        .args(["run", input.to_str().unwrap(), "-m", "demo", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        result.status.code(),
        Some(1),
        "bad lines make the exit status non-zero"
    );
    let stderr = text(&result.stderr);
    assert!(stderr.contains("line 2: not valid JSON"), "{stderr}");
    assert!(
        stderr.contains("line 3:") && stderr.contains("/v1/images"),
        "{stderr}"
    );
    assert!(
        stderr.contains("line 5:") && stderr.contains("repeats line 1"),
        "{stderr}"
    );
    let counts = id_counts(&output_lines(&out));
    let mut ids: Vec<_> = counts.keys().cloned().collect();
    ids.sort();
    assert_eq!(ids, ["line-6", "ok1", "ok2"]);
}

#[test]
fn run_with_max_cost_fails_requests_over_the_cap_as_spend_cap_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (1..=6).map(|i| chat_line(&format!("c{i}"), "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    // One request costs at most ~0.00006 USD on `demo`: a cap of 0.0001 lets one or two through.
    let result = tollgate()
        .args([
            "run",
            input.to_str().unwrap(),
            "-m",
            "demo",
            "--max-cost",
            "0.0001",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    let parsed = output_lines(&out);
    assert_eq!(parsed.len(), 6);
    let capped = parsed
        .iter()
        .filter(|l| l["error"]["code"] == "spend_cap_exceeded")
        .count();
    assert!(capped >= 4, "{parsed:#?}");
    assert!(
        text(&result.stdout).contains("spend_cap_exceeded"),
        "summary by error type"
    );
}

#[test]
fn run_embeddings_lines_write_vectors_in_the_embeddings_shape() {
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![
        r#"{"custom_id":"e1","method":"POST","url":"/v1/embeddings","body":{"input":["alpha","beta"]}}"#.to_owned(),
        r#"{"custom_id":"e2","method":"POST","url":"/v1/embeddings","body":{"input":"gamma"}}"#.to_owned(),
    ];
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let result = tollgate()
        .args(["run", input.to_str().unwrap(), "-m", "demo-embed", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let parsed = output_lines(&out);
    let e1 = parsed.iter().find(|l| l["custom_id"] == "e1").unwrap();
    let data = e1["response"]["body"]["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["embedding"].as_array().unwrap().len(), 8);
}

#[test]
fn run_with_a_missing_credential_fails_before_sending_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("models.toml");
    std::fs::write(
        &catalog,
        r#"
        [models.gpt]
        provider = "openai"
        name = "gpt-4o-mini"
        credential = "openai-main"
        rpm = 500
        max_output_tokens = 1000
        [models.gpt.options]
        base_url = "http://127.0.0.1:9"
        "#,
    )
    .unwrap();
    let secrets = dir.path().join("secrets.toml");
    std::fs::write(&secrets, "other-key = \"sk-not-this-one\"\n").unwrap();
    let input = write_batch(dir.path(), &[chat_line("x", "Hi")]);
    let result = tollgate()
        .arg("--catalog")
        .arg(&catalog)
        .arg("--credentials")
        .arg(&secrets)
        .args(["run", input.to_str().unwrap(), "-m", "gpt", "-o"])
        .arg(dir.path().join("out.jsonl"))
        .output()
        .unwrap();
    assert!(!result.status.success());
    let stderr = text(&result.stderr);
    assert!(stderr.contains("`openai-main`"), "{stderr}");
    assert!(stderr.contains("model `gpt`"), "{stderr}");
    assert!(!stderr.contains("sk-not-this-one"), "no secret in errors");
    let chat = tollgate()
        .arg("--catalog")
        .arg(&catalog)
        .args(["chat", "-m", "gpt", "Hi"])
        .output()
        .unwrap();
    assert!(!chat.status.success());
    assert!(
        text(&chat.stderr).contains("`openai-main`"),
        "{}",
        text(&chat.stderr)
    );
}

#[test]
fn chat_streams_the_answer_to_piped_text_followed_by_the_argument_and_prints_usage() {
    let result = run_with_stdin(
        {
            let mut c = tollgate();
            c.args(["chat", "-m", "demo", "--usage", "Summarize the above"]);
            c
        },
        "Some notes\n",
    );
    assert!(result.status.success(), "{}", text(&result.stderr));
    assert!(!text(&result.stdout).trim().is_empty());
    let stderr = text(&result.stderr);
    assert!(
        stderr.contains("input tokens") && stderr.contains("cost $"),
        "{stderr}"
    );
}

#[test]
fn chat_by_a_client_s_default_name_is_served_by_the_demo_model_at_its_prices() {
    for name in ["claude-opus-5-5", "claude-haiku-4-5", "gpt-5.6-luna"] {
        let result = tollgate()
            .args([
                "chat",
                "-m",
                name,
                "--usage",
                "--max-tokens",
                "128000",
                "Hi",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(result.status.success(), "{name}: {}", text(&result.stderr));
        assert!(!text(&result.stdout).trim().is_empty());
        let stderr = text(&result.stderr);
        assert!(
            stderr.contains("cost $"),
            "{name}: priced as demo: {stderr}"
        );
    }
}

#[test]
fn chat_json_answers_match_the_schema_file() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"colour":{"type":"string"},"n":{"type":"integer","minimum":3}},"required":["colour","n"]}"#,
    )
    .unwrap();
    let result = tollgate()
        .args(["chat", "-m", "demo", "--json"])
        .arg(&schema)
        .arg("Name a colour")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let answer: Value = serde_json::from_str(text(&result.stdout).trim()).unwrap();
    assert!(answer["colour"].is_string());
    assert!(answer["n"].as_i64().unwrap() >= 3);
}

#[test]
fn chat_interactive_answers_each_line_in_one_conversation() {
    let result = run_with_stdin(
        {
            let mut c = tollgate();
            c.args(["chat", "-m", "demo", "-i", "--system", "Be terse."]);
            c
        },
        "first question\nsecond question\n",
    );
    assert!(result.status.success(), "{}", text(&result.stderr));
    let answers = text(&result.stdout);
    assert_eq!(
        answers.lines().filter(|l| !l.is_empty()).count(),
        2,
        "{answers}"
    );
}

#[test]
fn chat_without_a_prompt_says_how_to_give_one() {
    let result = tollgate()
        .args(["chat", "-m", "demo"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!result.status.success());
    assert!(text(&result.stderr).contains("no prompt"));
}

#[test]
fn embed_prints_one_normalized_vector_per_line_of_stdin() {
    let result = run_with_stdin(
        {
            let mut c = tollgate();
            c.args(["embed", "-m", "demo-embed", "--purpose", "query"]);
            c
        },
        "first\n\nsecond\nthird\n",
    );
    assert!(result.status.success(), "{}", text(&result.stderr));
    let lines: Vec<Value> = text(&result.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["text"], "second");
    let v: Vec<f64> = lines[0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(v.len(), 8);
    let norm: f64 = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3);
}

#[test]
fn models_lists_the_demo_catalog_with_providers_limits_and_prices() {
    let result = tollgate().arg("models").output().unwrap();
    assert!(result.status.success());
    let stdout = text(&result.stdout);
    assert!(stdout.contains("embedded demo catalog"));
    for needle in [
        "demo ",
        "demo-slow",
        "demo-embed",
        "yes (tollgate-sim)",
        "yes (tollgate-fake)",
        "600",
        "0.50",
        "128000",
        "claude-opus-5-5 -> demo",
        "gpt-* -> demo",
    ] {
        assert!(stdout.contains(needle), "missing {needle}: {stdout}");
    }
}

#[test]
fn catalog_check_names_every_mistake_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[models.a]\nprovider = \"fake\"\nrpm = \"lots\"\n[models.b]\nprovider = \"nope\"\n[models.c]\nprovider = \"fake\"\nmax_output_tokens = 100\nfallbacks = [\"c\"]\n",
    )
    .unwrap();
    let result = tollgate()
        .args(["catalog", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    let stdout = text(&result.stdout);
    assert!(stdout.contains("model `a`: field `rpm`"), "{stdout}");
    assert!(stdout.contains("model `b`: field `provider`"), "{stdout}");
    assert!(stdout.contains("model `c`: field `fallbacks`"), "{stdout}");
    // Model `a` also lacks `max_output_tokens`: every mistake in a model is named.
    assert!(
        stdout.contains("model `a`: field `max_output_tokens`"),
        "{stdout}"
    );
    assert!(stdout.contains("4 mistakes"), "{stdout}");

    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "[models.a]\nprovider = \"fake\"\nrpm = 10\nmax_output_tokens = 100\n",
    )
    .unwrap();
    let result = tollgate()
        .args(["catalog", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(result.status.success());
    assert!(text(&result.stdout).contains("ok, 1 models"));
}

#[test]
fn catalog_check_names_every_mistake_inside_one_model_too() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[models.a]\nprovider = \"fake\"\nrpm = \"lots\"\nwindow = \"sliding\"\nmax_output_tokens = 100\ndefault_output_tokens = 500\n[models.a.price]\ninput = \"cheap\"\noutput = 1.0\n",
    )
    .unwrap();
    let result = tollgate()
        .args(["catalog", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    let stdout = text(&result.stdout);
    for field in [
        "`rpm`",
        "`window`",
        "`price.input`",
        "default_output_tokens",
    ] {
        assert!(stdout.contains(field), "missing {field}: {stdout}");
    }
    assert!(stdout.contains("4 mistakes"), "{stdout}");
}

#[test]
fn help_on_every_subcommand_shows_examples() {
    for sub in [
        &["run"][..],
        &["chat"],
        &["embed"],
        &["models"],
        &["catalog", "check"],
        &["usage"],
    ] {
        let result = tollgate().args(sub).arg("--help").output().unwrap();
        assert!(result.status.success(), "{sub:?}");
        assert!(
            text(&result.stdout).contains("Examples:"),
            "{sub:?} --help has examples"
        );
    }
}

#[test]
fn usage_summarizes_recorded_calls_per_model_and_day_with_a_tokens_per_minute_chart() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (1..=5).map(|i| chat_line(&format!("u{i}"), "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let records = dir.path().join("calls.jsonl");
    let result = tollgate()
        .args(["run", input.to_str().unwrap(), "-m", "demo", "--record"])
        .arg(&records)
        .arg("-o")
        .arg(dir.path().join("out.jsonl"))
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let result = tollgate().arg("usage").arg(&records).output().unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert!(stdout.contains(": 5 calls"), "{stdout}");
    let row = stdout
        .lines()
        .find(|l| l.starts_with("demo "))
        .expect("a row for demo");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "5", "calls: {row}");
    assert_eq!(cells[2], "0", "failed: {row}");
    assert_eq!(cells[8], "0", "429s: {row}");
    assert!(
        stdout.contains("tokens per minute, demo (| = limit"),
        "{stdout}"
    );
}

/// A directory holding a link to the `tollgate` binary (its own path is that link, so
/// it looks for `tollgate-simulate` there) and, when `simulate` is given, an executable
/// `tollgate-simulate` of that text.
#[cfg(unix)]
fn tollgate_beside(simulate: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    // In cargo's target directory, so that the link is on the binary's file system.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = dir.path().join("tollgate");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_tollgate"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_tollgate"), &exe).unwrap();
    }
    if let Some(script) = simulate {
        let path = dir.path().join("tollgate-simulate");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, exe)
}

#[cfg(unix)]
#[test]
fn simulate_without_tollgate_simulate_beside_it_says_where_it_looked_and_how_to_install_it() {
    let (dir, exe) = tollgate_beside(None);
    let result = Command::new(&exe)
        .args(["simulate", "-m", "demo"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(1));
    let stderr = text(&result.stderr);
    let expected = dir.path().join("tollgate-simulate");
    assert!(stderr.contains(&expected.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("cargo install --path crates/tollgate-simulate"),
        "{stderr}"
    );
}

#[cfg(unix)]
#[test]
fn simulate_runs_tollgate_simulate_beside_it_with_the_catalog_and_every_argument() {
    // Prints each argument on a line and ends with its own status.
    let (dir, exe) = tollgate_beside(Some("#!/bin/sh\nprintf '%s\\n' \"$@\"\nexit 7\n"));
    let result = Command::new(&exe)
        .args([
            "--catalog",
            "models.toml",
            "simulate",
            "-m",
            "demo",
            "--help",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(result.status.code(), Some(7), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    let args: Vec<&str> = stdout.lines().collect();
    assert_eq!(args, ["--catalog", "models.toml", "-m", "demo", "--help"]);
}

#[test]
fn run_with_fallback_sends_what_the_model_cannot_serve_now_to_its_fallback() {
    let dir = tempfile::tempdir().unwrap();
    // 30 requests at once against `demo` (a bucket of 10): the rest go to `demo-backup`.
    let lines: Vec<String> = (1..=30)
        .map(|i| chat_line(&format!("f{i}"), "Hi"))
        .collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("out.jsonl");
    let result = tollgate()
        .args([
            "run",
            input.to_str().unwrap(),
            "-m",
            "demo",
            "--fallback",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let parsed = output_lines(&out);
    assert_eq!(parsed.len(), 30);
    let by = |model: &str| {
        parsed
            .iter()
            .filter(|l| l["tollgate"]["model"] == model)
            .count()
    };
    assert!(by("demo") >= 10, "demo served its bucket");
    assert!(by("demo-backup") >= 1, "the fallback served some");
    assert_eq!(by("demo") + by("demo-backup"), 30);
}

#[test]
fn run_on_a_model_with_two_deployments_uses_both_without_429s() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("models.toml");
    // Each key is limited to one request a second by the simulated provider; one key
    // alone could not take this batch's pace without 429s, two can.
    std::fs::write(
        &catalog,
        r#"
        [models.multi]
        provider = "sim"
        credentials = ["key-a", "key-b"]
        rpm = 60
        burst_seconds = 1
        max_output_tokens = 100
        [models.multi.options]
        latency_ms = 50
        "#,
    )
    .unwrap();
    let lines: Vec<String> = (1..=6).map(|i| chat_line(&format!("d{i}"), "Hi")).collect();
    let input = write_batch(dir.path(), &lines);
    let records = dir.path().join("calls.jsonl");
    let out = dir.path().join("out.jsonl");
    let result = tollgate()
        .arg("--catalog")
        .arg(&catalog)
        .args(["run", input.to_str().unwrap(), "-m", "multi", "--record"])
        .arg(&records)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", text(&result.stderr));
    let stdout = text(&result.stdout);
    assert!(stdout.contains("succeeded  6"), "{stdout}");
    assert!(stdout.contains("429s       0"), "{stdout}");
    let deployments: std::collections::HashSet<String> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "attempt")
        .filter_map(|v| v["deployment"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(deployments.len(), 2, "{deployments:?}");
}
