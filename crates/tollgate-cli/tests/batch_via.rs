//! `tollgate run --via batch` as a new user runs it, against a third-party server's batch
//! endpoints (llmock 0.2.2, a private instance per test, started by `scripts/peers.sh`):
//! the batches submitted, the run killed mid-poll (SIGKILL: no chance to save anything
//! more), the same command run again, and its output compared line by line with a live
//! run of the same file. The conformance tier: skipped without the peers, unless
//! `TOLLGATE_PEERS_REQUIRED` is set.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::llmock::LlmockRun;
use common::{output_lines, text, tollgate, write_batch};
use serde_json::{Value, json};

/// Requests in the file, and per batch (so the file makes several batches).
const LINES: usize = 24;
const PER_BATCH: usize = 8;

/// A provider as the catalog names it, and where llmock serves it.
struct Provider {
    key: &'static str,
    name: &'static str,
    /// llmock's prefix for it, appended to its URL as the model's `base_url`.
    prefix: &'static str,
    /// The `tool` request's tool definitions as llmock received them in a batch (llmock's
    /// batches answer every request with text, so the answer cannot show them).
    received_tools: fn(&str) -> Vec<String>,
    /// More `[models.m.options]` lines.
    options: &'static str,
    /// The catalog field of its tokens-per-minute limit (`tpm`, or `input_tpm` for a
    /// provider that counts input alone).
    tpm: &'static str,
}

fn catalog(dir: &Path, p: &Provider, url: &str) -> std::path::PathBuf {
    let path = dir.join("models.toml");
    std::fs::write(
        &path,
        format!(
            "[models.m]\nprovider = \"{key}\"\nname = \"{name}\"\ncredential = \"k\"\n\
             rpm = 6000\n{tpm} = 10000000\nmax_output_tokens = 4096\ndefault_output_tokens = 64\n\
             [models.m.options]\nbase_url = \"{url}{prefix}\"\n{options}\
             [models.m.price]\ninput = 1.0\noutput = 4.0\n\
             [models.m.batch]\nmax_requests = {PER_BATCH}\n",
            key = p.key,
            name = p.name,
            prefix = p.prefix,
            options = p.options,
            tpm = p.tpm,
        ),
    )
    .unwrap();
    path
}

fn keys(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("keys.toml");
    std::fs::write(&path, "k = \"sk-llmock-test\"\n").unwrap();
    path
}

/// The input: plain questions, one asking for a tool, one asking to stream.
fn input(dir: &Path) -> std::path::PathBuf {
    let mut lines: Vec<String> = (1..=LINES)
        .map(|i| {
            json!({"custom_id": format!("q{i}"), "method": "POST", "url": "/v1/chat/completions",
                   "body": {"messages": [{"role": "user", "content": format!("Question number {i}")}],
                            "max_tokens": 64}})
            .to_string()
        })
        .collect();
    lines.push(
        json!({"custom_id": "tool", "method": "POST", "url": "/v1/chat/completions",
               "body": {"messages": [{"role": "user", "content": "Weather in Paris?"}],
                        "tools": [{"type": "function", "function": {"name": "weather",
                                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}})
        .to_string(),
    );
    lines.push(
        json!({"custom_id": "streamed", "method": "POST", "url": "/v1/chat/completions",
               "body": {"messages": [{"role": "user", "content": "Hi"}], "stream": true}})
        .to_string(),
    );
    write_batch(dir, &lines)
}

fn run(dir: &Path, p: &Provider, url: &str, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = tollgate();
    cmd.arg("--catalog")
        .arg(catalog(dir, p, url))
        .arg("--credentials")
        .arg(keys(dir))
        .arg("run")
        .arg(input(dir))
        .args(["-m", "m", "--quiet", "-o"])
        .arg(out)
        .args(extra);
    cmd
}

/// The output's lines by `custom_id`, each id on one line only.
fn by_id(lines: Vec<Value>) -> HashMap<String, Value> {
    let mut by_id = HashMap::new();
    for line in lines {
        let id = line["custom_id"].as_str().unwrap().to_owned();
        assert!(
            by_id.insert(id.clone(), line).is_none(),
            "`{id}` has two lines"
        );
    }
    by_id
}

/// The state file's batches, once it exists and every batch has its provider handle.
fn submitted_batches(state: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(state).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    let batches = value["batches"].as_array()?;
    let all = batches.iter().all(|b| !b["handle"].is_null());
    (all && batches.len() == (LINES + 1).div_ceil(PER_BATCH)).then_some(batches.len())
}

/// Live, then batch killed mid-poll and run again; the outputs compared line by line.
fn batch_run_killed_and_resumed_matches_a_live_run(p: &Provider) {
    let Some(peers) = LlmockRun::new(&format!("batch-{}", p.key)) else {
        return;
    };
    let url = peers.start(&format!("batch-{}", p.key), 100_000);
    let dir = tempfile::tempdir().unwrap();

    let live = dir.path().join("live.jsonl");
    let done = run(dir.path(), p, &url, &live, &[]).output().unwrap();
    assert!(done.status.success(), "live run: {}", text(&done.stderr));

    // Not `batch.jsonl`: that is the input's name (`write_batch`).
    let out = dir.path().join("out.jsonl");
    let args = ["--via", "batch", "--poll-every", "300ms"];
    let mut child = run(dir.path(), p, &url, &out, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let state = dir.path().join("out.jsonl.batches.json");
    // Wait (on progress, not on time) for every batch to be submitted, then kill -9.
    loop {
        if submitted_batches(&state).is_some() {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the batch run ended ({status}) before it could be killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let refused_only = output_lines(&out);
    assert!(
        refused_only
            .iter()
            .all(|l| l["custom_id"] == "streamed" || l["error"].is_null()),
        "{refused_only:?}"
    );

    // The same output live, by mistake: refused, since its requests are in batches.
    let live_by_mistake = run(dir.path(), p, &url, &out, &[]).output().unwrap();
    assert!(!live_by_mistake.status.success());
    let said = text(&live_by_mistake.stderr);
    assert!(
        said.contains("--via batch") && said.contains("twice"),
        "{said}"
    );
    assert_eq!(
        output_lines(&out).len(),
        refused_only.len(),
        "nothing sent live"
    );

    let again = run(dir.path(), p, &url, &out, &args).output().unwrap();
    let stdout = text(&again.stdout);
    assert!(
        again.status.code() == Some(1),
        "the re-run ends with the refused line as a failure: {stdout} {}",
        text(&again.stderr)
    );
    assert!(
        stdout.contains("0 submitted"),
        "nothing submitted twice: {stdout}"
    );
    assert!(
        !state.exists(),
        "the state goes once every batch is collected"
    );

    assert_eq!(
        (p.received_tools)(&url),
        vec!["weather".to_owned()],
        "the tool request's tools reached the batch API"
    );
    let live = by_id(output_lines(&live));
    let batch = by_id(output_lines(&out));
    assert_eq!(batch.len(), LINES + 2, "one line per id");
    assert_eq!(live.len(), batch.len());
    for (id, b) in &batch {
        let l = &live[id];
        if id == "streamed" {
            assert_eq!(b["error"]["code"], "invalid_request");
            assert!(b["error"]["message"].as_str().unwrap().contains("stream"));
            assert!(l["error"].is_null(), "live answers a stream line whole");
            continue;
        }
        assert!(b["error"].is_null(), "{id}: {b}");
        assert!(b["tollgate"]["via"].as_str().unwrap().starts_with("batch:"));
        let (lb, bb) = (&l["response"]["body"], &b["response"]["body"]);
        assert_eq!(bb["object"], lb["object"], "{id}");
        assert_eq!(
            bb["usage"]["prompt_tokens"], lb["usage"]["prompt_tokens"],
            "{id}: the same request"
        );
        if id != "tool" {
            assert_eq!(
                bb["choices"][0]["finish_reason"], lb["choices"][0]["finish_reason"],
                "{id}"
            );
        }
        assert!(bb["choices"][0]["message"].is_object(), "{id}: {bb}");
        // The same usage costs half through the batch API.
        let usage_cost = |line: &Value| {
            let u = &line["tollgate"]["usage"];
            (u["input_tokens"].as_f64().unwrap() * 1.0 + u["output_tokens"].as_f64().unwrap() * 4.0)
                / 1e6
        };
        let cost = b["tollgate"]["cost_usd"].as_f64().unwrap();
        assert!(
            (cost - usage_cost(b) / 2.0).abs() < 1e-12,
            "{id}: {cost} is half of {}",
            usage_cost(b)
        );
    }
}

/// GET `url`, as JSON or as text.
fn get(url: &str) -> String {
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
}

/// The tool names of the `tool` line in the JSONL files `files` (file ids) at `base`.
fn tools_in_files(base: &str, files: &[String], body_of: fn(&Value) -> &Value) -> Vec<String> {
    let mut names = Vec::new();
    for file in files {
        for line in get(&format!("{base}/files/{file}/content")).lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            if line["custom_id"] == "tool" {
                for tool in body_of(&line)["tools"].as_array().unwrap() {
                    names.push(tool["function"]["name"].as_str().unwrap().to_owned());
                }
            }
        }
    }
    names
}

/// OpenAI, at llmock's `/v1`: the `tool` request's tools read from the uploaded files.
const OPENAI: Provider = Provider {
    key: "openai",
    name: "gpt-4o-mini",
    prefix: "",
    options: "",
    tpm: "tpm",
    received_tools: openai_tools,
};

fn openai_tools(url: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(&get(&format!("{url}/v1/batches?limit=100"))).unwrap();
    let files: Vec<String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["input_file_id"].as_str().unwrap().to_owned())
        .collect();
    tools_in_files(&format!("{url}/v1"), &files, |line| &line["body"])
}

#[test]
fn openai_batch_run_killed_and_resumed_matches_a_live_run() {
    batch_run_killed_and_resumed_matches_a_live_run(&OPENAI);
}

/// The tool names of the `tool` request in the batch-create bodies llmock journaled at
/// `path` (`GET /_llmock/requests`), read from each entry with `tools_of`.
fn tools_in_journal(url: &str, path: &str, tools_of: fn(&Value) -> Vec<String>) -> Vec<String> {
    let journal: Value = serde_json::from_str(&get(&format!("{url}/_llmock/requests"))).unwrap();
    journal["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["path"] == path && r["method"] == "POST")
        .flat_map(|r| tools_of(&r["body"]))
        .collect()
}

#[test]
fn anthropic_batch_run_killed_and_resumed_matches_a_live_run() {
    batch_run_killed_and_resumed_matches_a_live_run(&Provider {
        key: "anthropic-direct",
        name: "claude-sonnet-4-5",
        prefix: "/anthropic",
        options: "",
        tpm: "tpm",
        received_tools: |url| {
            tools_in_journal(url, "/anthropic/v1/messages/batches", |body| {
                body["requests"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["custom_id"] == "tool")
                    .flat_map(|r| r["params"]["tools"].as_array().cloned().unwrap_or_default())
                    .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
        },
    });
}

#[test]
fn mistral_batch_run_killed_and_resumed_matches_a_live_run() {
    batch_run_killed_and_resumed_matches_a_live_run(&Provider {
        key: "mistral",
        name: "mistral-large-latest",
        prefix: "/mistral",
        options: "",
        tpm: "tpm",
        received_tools: |url| {
            let list: Value =
                serde_json::from_str(&get(&format!("{url}/mistral/v1/batch/jobs?limit=100")))
                    .unwrap();
            let files: Vec<String> = list["data"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|j| j["input_files"].as_array().cloned().unwrap_or_default())
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            tools_in_files(&format!("{url}/mistral/v1"), &files, |line| &line["body"])
        },
    });
}

/// The function names declared in every `functionDeclarations` under `value`.
fn declared_functions(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| match (k.as_str(), v) {
                ("functionDeclarations", Value::Array(fs)) => fs
                    .iter()
                    .filter_map(|f| f["name"].as_str().map(str::to_owned))
                    .collect(),
                _ => declared_functions(v),
            })
            .collect(),
        Value::Array(items) => items.iter().flat_map(declared_functions).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn gemini_batch_run_killed_and_resumed_matches_a_live_run() {
    batch_run_killed_and_resumed_matches_a_live_run(&Provider {
        key: "gemini",
        name: "gemini-2.0-flash",
        prefix: "/gemini",
        // llmock 0.2.2 takes its own create body, not the Gemini API's (docs/providers/gemini.md).
        options: "batch_body = \"llmock\"\n",
        tpm: "input_tpm",
        received_tools: |url| {
            tools_in_journal(
                url,
                "/gemini/v1beta/models/gemini-2.0-flash:batchGenerateContent",
                declared_functions,
            )
        },
    });
}

/// `--via auto --deadline 1m` on a model allowing 6 requests a minute: the first 6 go
/// live, the rest as batches; the summary says which went where and what it saved.
#[test]
fn auto_sends_live_what_the_limit_takes_within_the_deadline_and_batches_the_rest() {
    let Some(peers) = LlmockRun::new("batch-auto") else {
        return;
    };
    let url = peers.start("batch-auto", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let models = catalog(dir.path(), &OPENAI, &url);
    let text_of = std::fs::read_to_string(&models).unwrap();
    std::fs::write(
        &models,
        text_of.replace("rpm = 6000", "rpm = 6\nburst_seconds = 60"),
    )
    .unwrap();
    let lines: Vec<String> = (1..=10)
        .map(|i| {
            json!({"custom_id": format!("a{i}"), "prompt": format!("Question {i}")}).to_string()
        })
        .collect();
    let input = write_batch(dir.path(), &lines);
    let out = dir.path().join("auto.jsonl");
    let done = tollgate()
        .arg("--catalog")
        .arg(&models)
        .arg("--credentials")
        .arg(keys(dir.path()))
        .arg("run")
        .arg(&input)
        .args(["-m", "m", "--quiet", "-o"])
        .arg(&out)
        .args(["--via", "auto", "--deadline", "1m", "--poll-every", "300ms"])
        .output()
        .unwrap();
    let stdout = text(&done.stdout);
    assert!(done.status.success(), "{stdout} {}", text(&done.stderr));
    let lines = by_id(output_lines(&out));
    assert_eq!(lines.len(), 10);
    let batched: Vec<&String> = lines
        .iter()
        .filter(|(_, l)| l["tollgate"]["via"].is_string())
        .map(|(id, _)| id)
        .collect();
    assert_eq!(batched.len(), 4, "{batched:?}");
    for i in 1..=6 {
        assert!(
            lines[&format!("a{i}")]["tollgate"]["via"].is_null(),
            "a{i} went live"
        );
    }
    assert!(stdout.contains("6 live"), "{stdout}");
    assert!(stdout.contains("4 batch"), "{stdout}");
    assert!(stdout.contains("all live $"), "{stdout}");
}

/// Two runs on one key, sharing the queue limits on Redis (`--redis`): with
/// `batch.max_batches = 1`, the second run's batch is submitted only once the first's
/// has ended (llmock ends a batch 3 s after it is created), never beside it.
#[test]
fn two_runs_on_one_redis_never_pass_the_pending_batches_limit() {
    let Some(peers) = LlmockRun::new("batch-redis") else {
        return;
    };
    let Some(redis) = tollgate_testkit::peers::url("TOLLGATE_REDIS_URL") else {
        return;
    };
    let url = peers.start("batch-redis", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let models = catalog(dir.path(), &OPENAI, &url);
    let text_of = std::fs::read_to_string(&models).unwrap();
    std::fs::write(&models, text_of + "max_batches = 1\n").unwrap();
    let prefix = format!("batch-redis-{}", std::process::id());
    let runs: Vec<_> = ["one", "two"]
        .iter()
        .map(|name| {
            let lines: Vec<String> = (1..=3)
                .map(|i| json!({"custom_id": format!("{name}{i}"), "prompt": "Hi"}).to_string())
                .collect();
            let sub = dir.path().join(name);
            std::fs::create_dir_all(&sub).unwrap();
            let input = write_batch(&sub, &lines);
            tollgate()
                .args(["--redis", &redis, "--redis-prefix", &prefix, "--catalog"])
                .arg(&models)
                .arg("--credentials")
                .arg(keys(dir.path()))
                .arg("run")
                .arg(&input)
                .args(["-m", "m", "--quiet", "-o"])
                .arg(sub.join("out.jsonl"))
                .args(["--via", "batch", "--poll-every", "200ms"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let done = run.wait_with_output().unwrap();
        assert!(done.status.success(), "{}", text(&done.stderr));
    }
    let list: Value = serde_json::from_str(&get(&format!("{url}/v1/batches?limit=100"))).unwrap();
    let mut created: Vec<i64> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["created_at"].as_i64().unwrap())
        .collect();
    created.sort_unstable();
    assert_eq!(created.len(), 2, "{list}");
    assert!(
        created[1] - created[0] >= 3,
        "the second batch waited for the first to end: created at {created:?}"
    );
}
