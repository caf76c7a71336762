//! llmocks of a test's own, each enforcing its own rate limit (`scripts/peers.sh llmock
//! NAME --rpm N`: continuous buckets per API key, full at the start, 429 with the real
//! wait beyond them), and what their journals (`GET /_llmock/requests`) say.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The llmocks of one `PEERS_RUN` of this test process (their PIDs and ports under
/// `target/peers/runs/<run>`), all stopped by `scripts/peers.sh stop` when dropped.
pub struct LlmockRun {
    run: String,
}

fn peers_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/peers.sh")
}

impl LlmockRun {
    /// A run named `tag` and this process's id; `None` (the test is skipped) when the
    /// peers are not installed (no `TOLLGATE_LLMOCK_URL`), unless
    /// `TOLLGATE_PEERS_REQUIRED` is set (then that fails the test).
    pub fn new(tag: &str) -> Option<LlmockRun> {
        tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL")?;
        Some(LlmockRun {
            run: format!("{tag}-{}", std::process::id()),
        })
    }

    /// `scripts/peers.sh ARGS` in this run.
    fn peers(&self, args: &[&str]) -> Command {
        let mut command = Command::new("bash");
        command.arg(peers_script()).args(args);
        command.env("PEERS_RUN", &self.run).stderr(Stdio::inherit());
        command
    }

    /// Starts llmock `name` allowing `rpm` requests a minute per API key; its URL.
    pub fn start(&self, name: &str, rpm: u64) -> String {
        let out = self
            .peers(&["llmock", name, "--rpm", &rpm.to_string()])
            .output()
            .expect("scripts/peers.sh runs");
        let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success() && url.starts_with("http://"),
            "scripts/peers.sh llmock {name} --rpm {rpm}: {url}"
        );
        url
    }
}

impl Drop for LlmockRun {
    fn drop(&mut self) {
        let _ = self.peers(&["stop"]).status();
    }
}

/// What llmock at `url` journaled of the requests naming `model`, in arrival order
/// (each with its `status`, `fault` and `body`, among others).
pub async fn records(url: &str, model: &str) -> Vec<Value> {
    let journal: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{url}/_llmock/requests"))
        .send()
        .await
        .expect("llmock's journal")
        .json()
        .await
        .expect("the journal is JSON");
    let mut records: Vec<Value> = journal["requests"]
        .as_array()
        .expect("a `requests` array")
        .iter()
        .filter(|r| r["model"] == model)
        .cloned()
        .collect();
    records.sort_by_key(|r| r["seq"].as_u64());
    records
}

/// The HTTP statuses llmock at `url` answered to the requests naming `model`, in
/// arrival order.
pub async fn statuses(url: &str, model: &str) -> Vec<u16> {
    records(url, model)
        .await
        .iter()
        .map(|r| r["status"].as_u64().expect("a status") as u16)
        .collect()
}
