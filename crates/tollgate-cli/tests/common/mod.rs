//! What the `tollgate` binary's tests share: running it, writing a batch, reading its
//! output, and the simulated provider served over HTTP on 127.0.0.1.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tollgate_sim::http::{SimServer, serve};
use tollgate_sim::{SimConfig, SimProvider};

pub mod llmock;
pub mod serving;

/// The binary, run in a directory without tollgate.toml (so the embedded demo catalog
/// is used unless --catalog says otherwise).
pub fn tollgate() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    cmd.current_dir(std::env::temp_dir());
    cmd
}

/// `tollgate [--catalog CATALOG] run INPUT -m MODEL -o OUT`.
pub fn run_batch(catalog: Option<&Path>, input: &Path, model: &str, out: &Path) -> Command {
    let mut cmd = tollgate();
    if let Some(catalog) = catalog {
        cmd.arg("--catalog").arg(catalog);
    }
    cmd.arg("run").arg(input).args(["-m", model, "-o"]).arg(out);
    cmd
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A Batch API chat line asking for at most 32 tokens.
pub fn chat_line(id: &str, prompt: &str) -> String {
    serde_json::json!({
        "custom_id": id, "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": "demo", "messages": [{"role": "user", "content": prompt}], "max_tokens": 32},
    })
    .to_string()
}

pub fn write_batch(dir: &Path, lines: &[String]) -> PathBuf {
    let path = dir.join("batch.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").expect("batch written");
    path
}

/// Every line of the output, parsed (a line that is not JSON fails the test).
pub fn output_lines(path: &Path) -> Vec<Value> {
    raw_lines(path)
        .iter()
        .map(|l| serde_json::from_str(l).expect("every output line is JSON"))
        .collect()
}

/// Every line of the output as written.
pub fn raw_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Complete lines written so far (while a run is still writing).
pub fn output_lines_lenient(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter(|l| l.ends_with('}')).count())
        .unwrap_or(0)
}

pub fn id_counts(lines: &[Value]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for l in lines {
        *counts
            .entry(l["custom_id"].as_str().expect("custom_id").to_owned())
            .or_default() += 1;
    }
    counts
}

/// Asserts that the output has exactly one line per id in `ids`, and that every line's
/// `id` is unique.
pub fn assert_one_line_per_id(lines: &[Value], ids: &[String]) {
    let counts = id_counts(lines);
    let mut seen: Vec<_> = counts.keys().cloned().collect();
    seen.sort();
    let mut want = ids.to_vec();
    want.sort();
    assert_eq!(seen, want, "every request has a line");
    assert!(
        counts.values().all(|n| *n == 1),
        "one line per custom_id: {counts:?}"
    );
    let line_ids: std::collections::HashSet<&str> =
        lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(line_ids.len(), lines.len(), "line ids are unique");
}

/// A simulated provider served over HTTP on its own runtime, stopped when dropped.
pub struct Served {
    pub server: SimServer,
    _runtime: tokio::runtime::Runtime,
}

impl Served {
    /// Serves `config`; every accepted call produces `output_tokens` (at most its
    /// `max_tokens`).
    pub fn new(config: SimConfig, output_tokens: u64) -> Served {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let server = runtime
            .block_on(serve(SimProvider::new(config), output_tokens))
            .expect("sim server");
        Served {
            server,
            _runtime: runtime,
        }
    }

    /// A catalog with model `id` on `openai-compatible` pointed at this server.
    pub fn catalog(&self, id: &str, limits: &str) -> String {
        format!(
            "[models.{id}]\nprovider = \"openai-compatible\"\nname = \"sim\"\n{limits}\n\
             max_output_tokens = 512\n[models.{id}.options]\nbase_url = \"{}\"\n",
            self.server.base_url()
        )
    }
}
