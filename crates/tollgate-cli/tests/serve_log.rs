//! `tollgate serve`'s log on stderr: one access line per request (text by default, one
//! JSON object per line with `--log-format json`), silenced by a `warn` filter from
//! `RUST_LOG` or `--log-filter`. The binary on the embedded demo catalog, on a free
//! 127.0.0.1 port.

mod common;

use common::serving::{Serving, spawn_serve_with};
use common::text;
use serde_json::{Value, json};

/// The access log's target, as the lines name it.
const ACCESS: &str = "tollgate::access";

/// One chat completion on `demo` and one `GET /health`: the chat's request id.
async fn chat_and_health(url: &str) -> String {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({"model": "demo", "max_tokens": 20,
            "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    response.bytes().await.unwrap();
    let health = http.get(format!("{url}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    id
}

/// Stops `serving` and reads everything it wrote on stderr.
fn stderr_after_stop(mut serving: Serving) -> String {
    serving.terminate();
    let mut err = Vec::new();
    std::io::Read::read_to_end(serving.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    text(&err)
}

#[tokio::test]
async fn serve_writes_one_text_access_line_per_request_on_stderr() {
    let serving = spawn_serve_with(&[("RUST_LOG", "")], &[]);
    let id = chat_and_health(&serving.url.clone()).await;
    let err = stderr_after_stop(serving);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(ACCESS)).collect();
    assert_eq!(lines.len(), 2, "{err}");
    let chat = lines
        .iter()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("a line with the request id {id}: {err}"));
    for part in [
        "INFO",
        "route=\"/v1/chat/completions\"",
        "status=200",
        "model=\"demo\"",
        "upstream_status=200",
        "output_tokens=",
        "cost_usd=",
        "queue_wait_ms=",
    ] {
        assert!(chat.contains(part), "{part} in {chat}");
    }
    assert!(
        lines.iter().any(|l| l.contains("route=\"/health\"")),
        "{err}"
    );
}

#[tokio::test]
async fn serve_with_log_format_json_writes_each_access_line_as_one_json_object() {
    let serving = spawn_serve_with(&[("RUST_LOG", "")], &["--log-format", "json"]);
    let id = chat_and_health(&serving.url.clone()).await;
    let err = stderr_after_stop(serving);
    let access: Vec<Value> = err
        .lines()
        .filter(|l| l.contains(ACCESS))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(access.len(), 2, "{err}");
    let chat = access
        .iter()
        .find(|v| v["request_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(chat["target"], ACCESS);
    assert_eq!(chat["status"], 200);
    assert_eq!(chat["model"], "demo");
    assert_eq!(chat["route"], "/v1/chat/completions");
    assert!(chat["output_tokens"].as_u64().unwrap() > 0, "{chat}");
    assert!(chat["timestamp"].is_string(), "{chat}");
}

#[tokio::test]
async fn serve_with_a_warn_filter_from_rust_log_or_the_flag_writes_no_access_line() {
    for (env, args) in [
        (("RUST_LOG", "warn"), &[][..]),
        (("RUST_LOG", "info"), &["--log-filter", "warn"][..]),
    ] {
        let serving = spawn_serve_with(&[env], args);
        chat_and_health(&serving.url.clone()).await;
        let err = stderr_after_stop(serving);
        assert!(!err.contains(ACCESS), "{env:?} {args:?}: {err}");
    }
}

#[test]
fn serve_refuses_to_start_with_a_log_filter_that_does_not_parse() {
    let output = common::tollgate()
        .args(["serve", "--listen", "127.0.0.1:0", "--log-filter", "=[bad"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let err = text(&output.stderr);
    assert!(err.contains("--log-filter"), "{err}");
}

/// The log is buffered, written by its own thread whenever no line waits: a quiet
/// gateway's line is out while it runs, not only when it stops.
#[tokio::test]
async fn serve_writes_an_access_line_while_it_runs_not_only_when_it_stops() {
    let mut serving = spawn_serve_with(&[("RUST_LOG", "")], &[]);
    let id = chat_and_health(&serving.url.clone()).await;
    let stderr = serving.child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // A bound on a hang, not a measure of speed: the line comes at once or never.
    let deadline = std::time::Duration::from_secs(60);
    let line = loop {
        match rx.recv_timeout(deadline) {
            Ok(line) if line.contains(ACCESS) && line.contains(&id) => break line,
            Ok(_) => {}
            Err(e) => panic!("no access line for {id} while serving: {e}"),
        }
    };
    assert!(line.contains("status=200"), "{line}");
    // Still serving: the line did not wait for the stop.
    assert!(serving.child.try_wait().unwrap().is_none());
    serving.terminate();
}
