//! Real clients, as their users run them, against `tollgate serve` (pinned, installed by
//! `scripts/peers.sh` into `target/peers`): the OpenAI Agents SDK on its default model
//! setup (the Responses API), the Vercel AI SDK's `openai(id)` and `anthropic(id)`
//! (generate, stream, a tool loop), Claude Code (`claude -p` on its default model name,
//! with a turn of its Read tool) and Codex CLI (`codex exec` with the gateway as a custom
//! model provider, running a command). Each asserts that its tool was called and executed,
//! not only that text came back; the scripts are in `tests/clients/`. The models are the
//! offline `sim` provider's, which calls the first declared tool with the minimal instance
//! of its schema and answers text after the tool's result.
//!
//! Every client is configured to talk to 127.0.0.1 only: telemetry, update checks, tracing
//! export and plugin syncs are turned off by their documented settings, and any other
//! HTTP traffic a client would send through the proxy variables goes to a closed port on
//! 127.0.0.1. Skipped without `TOLLGATE_PEERS_AGENTS_PYTHON` / `TOLLGATE_PEERS_CLIENTS`,
//! failed without them under `cargo xtask test-all`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::serving::{Serving, spawn_serve};
use common::text;
use serde_json::Value;

/// `chat` for the SDKs, and `claude-opus-5-5`, the model name Claude Code 2.1.332 sends
/// by default (its only one under `-p`, read from the gateway's 404 for it). The output
/// ceiling takes Claude Code's default `max_tokens` of 128000.
const CATALOG: &str = r#"
[models.chat]
provider = "sim"
name = "sim-chat"
rpm = 6000
arrival_allowance_ms = 0
max_output_tokens = 200000
default_output_tokens = 32
[models.chat.options]
latency_ms = 5
output_tokens = 12

[models.claude-opus-5-5]
provider = "sim"
name = "sim-opus"
rpm = 6000
arrival_allowance_ms = 0
max_output_tokens = 200000
default_output_tokens = 32
[models.claude-opus-5-5.options]
latency_ms = 5
output_tokens = 12
"#;

const SECRET: &str = "sk-tollgate-real-clients";

/// Where a client's stray HTTP traffic goes: port 9 (discard) on 127.0.0.1, where nothing
/// listens, so it fails at once instead of leaving the machine.
const TRAP_PROXY: &str = "http://127.0.0.1:9";

/// `tollgate serve` on [`CATALOG`] with the one key `clients`, its files in `dir`.
fn serve(dir: &Path) -> Serving {
    let catalog = dir.join("catalog.toml");
    std::fs::write(&catalog, CATALOG).unwrap();
    let keys = dir.join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "[[keys]]\nid = \"clients\"\nsecret_sha256 = \"{}\"\n",
            tollgate_gateway::hash_secret(SECRET)
        ),
    )
    .unwrap();
    spawn_serve(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--keys",
        keys.to_str().unwrap(),
    ])
}

/// A command with a clean environment: `PATH`, a private `HOME`, the proxy trap, and
/// nothing of the developer's own settings or keys.
fn isolated(program: impl AsRef<std::ffi::OsStr>, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env("HTTP_PROXY", TRAP_PROXY)
        .env("HTTPS_PROXY", TRAP_PROXY)
        .env("http_proxy", TRAP_PROXY)
        .env("https_proxy", TRAP_PROXY);
    command
}

/// Runs `command` and asserts it succeeded; its stdout.
fn succeeded(mut command: Command, what: &str) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what} runs: {e}"));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// Asserts that each of `checks` printed `ok CHECK`.
fn assert_passed(stdout: &str, checks: &[&str]) {
    for check in checks {
        assert!(
            stdout.lines().any(|l| l == format!("ok {check}")),
            "{check} did not pass:\n{stdout}"
        );
    }
}

/// `tests/clients/<script>`.
fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

#[test]
fn the_openai_agents_sdk_runs_an_agent_with_a_function_tool_through_tollgate_serve() {
    let Some(python) = tollgate_testkit::peers::url("TOLLGATE_PEERS_AGENTS_PYTHON") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serving = serve(dir.path());
    let mut command = isolated(&python, dir.path());
    command
        .arg(script("agents_sdk.py"))
        .env("TOLLGATE_URL", &serving.url)
        .env("TOLLGATE_KEY", SECRET)
        .env("TOLLGATE_MODEL", "chat")
        // Tracing would export to OpenAI's servers (the script turns it off too).
        .env("OPENAI_AGENTS_DISABLE_TRACING", "1");
    let stdout = succeeded(command, "the Agents SDK checks");
    assert_passed(
        &stdout,
        &[
            "agents_sdk_runs_an_agent_with_a_function_tool_to_its_final_output",
            "agents_sdk_streams_an_agent_run_with_a_function_tool",
        ],
    );
    // Two model calls a run (the tool call, the answer), on the Responses API.
    assert_all_answered(&serving.url, "responses", 4.0);
}

#[test]
fn the_vercel_ai_sdk_generates_streams_and_loops_on_a_tool_in_both_dialects() {
    let Some(modules) = tollgate_testkit::peers::url("TOLLGATE_PEERS_CLIENTS") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serving = serve(dir.path());
    let mut command = isolated("node", dir.path());
    command
        .arg(script("ai_sdk.mjs"))
        .env("NODE_PATH", &modules)
        .env("TOLLGATE_URL", &serving.url)
        .env("TOLLGATE_KEY", SECRET)
        .env("TOLLGATE_MODEL", "chat");
    let stdout = succeeded(command, "the AI SDK checks");
    assert_passed(
        &stdout,
        &[
            "ai_sdk_openai_generate_text",
            "ai_sdk_openai_stream_text",
            "ai_sdk_openai_tool_loop",
            "ai_sdk_anthropic_generate_text",
            "ai_sdk_anthropic_stream_text",
            "ai_sdk_anthropic_tool_loop",
        ],
    );
    // openai(id) on the Responses API: generate, stream, two loops of two steps.
    assert_all_answered(&serving.url, "responses", 6.0);
    assert_all_answered(&serving.url, "messages", 6.0);
}

#[test]
fn claude_code_reads_a_file_with_its_read_tool_through_tollgate_serve() {
    let Some(modules) = tollgate_testkit::peers::url("TOLLGATE_PEERS_CLIENTS") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serving = serve(dir.path());
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    // The simulated model's call is Read with the minimal instance of its schema, the
    // path "sim": a file of that name in the working directory, holding a secret word.
    std::fs::write(work.join("sim"), "The secret word is tangerine.\n").unwrap();
    let mut command = isolated(Path::new(&modules).join(".bin/claude"), &home);
    command
        .current_dir(&work)
        .args(["-p", "Read the file sim and tell me the secret word."])
        // Only the Read tool, so it is the first declared one: Claude Code's first
        // default tool is Agent, which the simulated model would call to start a
        // subagent that calls Agent again, without end. Tool search off for the same
        // reason (it declares a DeferredToolPlaceholder first).
        .args(["--tools", "Read", "--output-format", "json"])
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("ANTHROPIC_BASE_URL", &serving.url)
        .env("ANTHROPIC_API_KEY", SECRET)
        // Nothing but the model's calls: no telemetry, error reports, update checks or
        // other non-essential traffic.
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let stdout = succeeded(command, "claude -p");
    let result: Value =
        serde_json::from_str(stdout.trim()).expect("claude -p prints its result as JSON");
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["subtype"], "success", "{result}");
    assert!(
        result["num_turns"].as_u64() >= Some(2),
        "a tool turn and an answer: {result}"
    );
    assert!(
        result["result"].as_str().is_some_and(|r| !r.is_empty()),
        "{result}"
    );
    // Its transcript (in the private HOME) holds the Read call and the file it read.
    let session = result["session_id"].as_str().expect("a session id");
    let transcript = find_file(&home.join(".claude/projects"), &format!("{session}.jsonl"))
        .expect("the session's transcript");
    let entries = json_lines(&std::fs::read_to_string(transcript).unwrap());
    let blocks: Vec<&Value> = entries
        .iter()
        .filter_map(|e| e["message"]["content"].as_array())
        .flatten()
        .collect();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "tool_use" && b["name"] == "Read"),
        "no Read call in {blocks:?}"
    );
    assert!(
        blocks.iter().any(|b| b["type"] == "tool_result"
            && b["content"]
                .to_string()
                .contains("The secret word is tangerine.")),
        "the file was not read: {blocks:?}"
    );
    assert_all_answered(&serving.url, "messages", 2.0);
}

/// The first file named `name` under `dir`, searched depth first.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}

#[test]
fn codex_exec_runs_a_command_and_prints_the_answer_through_tollgate_serve() {
    let Some(modules) = tollgate_testkit::peers::url("TOLLGATE_PEERS_CLIENTS") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serving = serve(dir.path());
    let (home, codex_home, work, bin) = (
        dir.path().join("home"),
        dir.path().join("codex"),
        dir.path().join("work"),
        dir.path().join("bin"),
    );
    for d in [&home, &codex_home, &work, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    // The simulated model's call is exec_command with the minimal instance of its schema,
    // the command `sim`: a script of that name on the login shell's PATH (Codex runs
    // commands with `bash -lc`, which reads the private HOME's .bash_profile).
    let sim = bin.join("sim");
    std::fs::write(&sim, "#!/bin/sh\necho \"sim ran: marker-4242\"\n").unwrap();
    std::fs::set_permissions(&sim, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        home.join(".bash_profile"),
        format!("export PATH={}:$PATH\n", bin.display()),
    )
    .unwrap();
    std::fs::write(codex_home.join("config.toml"), codex_config(&serving.url)).unwrap();
    let mut command = isolated(Path::new(&modules).join(".bin/codex"), &home);
    command
        .current_dir(&work)
        .env("CODEX_HOME", &codex_home)
        .env("TOLLGATE_KEY", SECRET)
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "Run the sim command.",
        ]);
    let stdout = succeeded(command, "codex exec");
    let events = json_lines(&stdout);
    let item = |kind: &str| {
        events
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == kind)
            .map(|e| &e["item"])
            .collect::<Vec<_>>()
    };
    let commands = item("command_execution");
    assert!(
        commands.iter().any(|c| c["exit_code"] == 0
            && c["aggregated_output"]
                .as_str()
                .is_some_and(|o| o.contains("marker-4242"))),
        "the command did not run: {stdout}"
    );
    let answers = item("agent_message");
    assert!(
        answers
            .iter()
            .any(|a| a["text"].as_str().is_some_and(|t| !t.is_empty())),
        "no answer: {stdout}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "turn.completed"),
        "the turn did not complete: {stdout}"
    );
    assert_all_answered(&serving.url, "responses", 2.0);
}

/// Codex's config.toml: the gateway as a custom model provider on the Responses API,
/// the model a catalog id, the sandbox read-only (commands run without network), and
/// off what would reach outside 127.0.0.1 (its web search and sub-agent tools stay on,
/// as by default: the gateway carries them; see
/// docs/gateway.md, "Tested with real clients").
fn codex_config(url: &str) -> String {
    format!(
        r#"model = "chat"
model_provider = "tollgate"
sandbox_mode = "read-only"
approval_policy = "never"
check_for_update_on_startup = false

[model_providers.tollgate]
name = "tollgate"
base_url = "{url}/v1"
env_key = "TOLLGATE_KEY"
wire_api = "responses"

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
"#
    )
}

/// The gateway's request counts (`tollgate_gateway_requests_total`) as (route, status,
/// count), read from its `/metrics`.
fn request_counts(url: &str) -> Vec<(String, String, f64)> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let metrics = runtime.block_on(async {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let response = http.get(format!("{url}/metrics")).send().await.unwrap();
        response.text().await.unwrap()
    });
    let label = |line: &str, name: &str| {
        line.split(&format!("{name}=\""))
            .nth(1)?
            .split('"')
            .next()
            .map(str::to_owned)
    };
    metrics
        .lines()
        .filter(|l| l.starts_with("tollgate_gateway_requests_total{"))
        .filter_map(|l| {
            let count = l.rsplit(' ').next()?.parse().ok()?;
            Some((label(l, "route")?, label(l, "status")?, count))
        })
        .collect()
}

/// Asserts that the client's every request was answered 200 (none refused and retried
/// around), and that `route` served at least `at_least` of them.
fn assert_all_answered(url: &str, route: &str, at_least: f64) {
    let counts = request_counts(url);
    let refused: Vec<_> = counts
        .iter()
        .filter(|(_, status, _)| status != "200")
        .collect();
    assert!(refused.is_empty(), "requests refused: {refused:?}");
    let served: f64 = counts
        .iter()
        .filter(|(r, _, _)| r == route)
        .map(|(_, _, n)| n)
        .sum();
    assert!(served >= at_least, "{route} served {served}: {counts:?}");
}

/// The JSON objects of a JSON-lines text (other lines skipped).
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
