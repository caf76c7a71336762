//! The official OpenAI and Anthropic Python SDKs (pinned, installed by
//! `scripts/peers.sh` into `target/peers`) as clients of `tollgate serve`: chat whole and
//! streamed, a tool call whole and streamed, Anthropic's `count_tokens`, the Responses API
//! (whole, the SDK's stream helper, a tool loop, a refused `previous_response_id`) (the
//! simulated model calls a declared tool, then answers the tool's result), embeddings, a
//! wrong key, a body over the cap and a wait past its bound,
//! in both dialects, each SDK reading the gateway's answers as it reads its provider's
//! (`tests/sdk/clients.py` holds the checks); and the same SDKs calling models of the
//! other dialect with llmock behind (`tests/sdk/cross.py`). Skipped without
//! `TOLLGATE_PEERS_PYTHON` (and `TOLLGATE_LLMOCK_URL`), failed without them under
//! `cargo xtask test-all`. The official Node SDKs run the same kinds of checks
//! (`tests/sdk/clients.cjs`, with `TOLLGATE_PEERS_NODE_MODULES`).

mod common;

use std::process::Command;

use common::llmock::{LlmockRun, records};
use common::serving::spawn_serve;
use common::text;

/// Three models on the offline providers: `chat` answers at once, `slow` allows one
/// request a minute, `embed` makes vectors of width 8.
const CATALOG: &str = r#"
[embeddings]
width = 8

[models.chat]
provider = "sim"
name = "sim-chat"
rpm = 6000
burst_seconds = 1
arrival_allowance_ms = 0
max_output_tokens = 256
default_output_tokens = 32
[models.chat.options]
latency_ms = 5
output_tokens = 12

[models.slow]
provider = "sim"
name = "sim-slow"
rpm = 1
arrival_allowance_ms = 0
max_output_tokens = 64
[models.slow.options]
latency_ms = 5
output_tokens = 4

[models.embed]
provider = "fake"
kind = "embeddings"
name = "fake-embed"
rpm = 6000
native_width = 8
"#;

const SECRET: &str = "sk-tollgate-sdk-test";

#[test]
fn the_official_python_sdks_speak_to_tollgate_serve_in_both_dialects() {
    let Some(python) = tollgate_testkit::peers::url("TOLLGATE_PEERS_PYTHON") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serving = serve_catalog(dir.path());
    run_checks(
        &python,
        "clients.py",
        &serving.url,
        &[
            "openai_chat",
            "openai_stream_with_usage",
            "openai_tool_call_whole_and_streamed",
            "openai_embeddings",
            "openai_responses_whole_streamed_and_a_tool_loop",
            "anthropic_messages_whole_and_streamed",
            "anthropic_tool_use_whole_and_streamed",
            "anthropic_count_tokens",
            "a_wrong_key_is_each_sdks_authentication_error",
            "a_body_over_the_cap_is_a_413",
            "a_wait_past_the_bound_is_each_sdks_rate_limit_error_with_retry_after",
        ],
    );
}

/// Runs `tests/sdk/<script>` with the venv's `python` against the gateway at `url` and
/// asserts that each of `checks` printed that it passed.
fn run_checks(python: &str, script: &str, url: &str, checks: &[&str]) {
    run_script(Command::new(python), script, url, checks);
}

/// Runs `tests/sdk/<script>` with `interpreter` against the gateway at `url`, and asserts
/// that each of `checks` printed that it passed.
fn run_script(mut interpreter: Command, script: &str, url: &str, checks: &[&str]) {
    let script = format!("{}/tests/sdk/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = interpreter
        .arg(&script)
        .env("TOLLGATE_URL", url)
        .env("TOLLGATE_KEY", SECRET)
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .expect("the SDKs' interpreter runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "the SDK checks of {script} failed:\n{stdout}\n{stderr}"
    );
    for check in checks {
        assert!(
            stdout.lines().any(|l| l == format!("ok {check}")),
            "{check} did not pass:\n{stdout}\n{stderr}"
        );
    }
}

/// `tollgate serve` on [`CATALOG`] with the one key `sdk` and an 8 KiB body cap, its
/// files in `dir`.
fn serve_catalog(dir: &std::path::Path) -> common::serving::Serving {
    let catalog = dir.join("catalog.toml");
    std::fs::write(&catalog, CATALOG).unwrap();
    let keys = keys_file(dir);
    spawn_serve(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--keys",
        keys.to_str().unwrap(),
        "--max-body-bytes",
        "8192",
    ])
}

#[test]
fn the_official_node_sdks_speak_to_tollgate_serve_in_both_dialects() {
    let Some(modules) = tollgate_testkit::peers::url("TOLLGATE_PEERS_NODE_MODULES") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let serving = serve_catalog(dir.path());
    let mut node = Command::new("node");
    node.env("NODE_PATH", &modules);
    run_script(
        node,
        "clients.cjs",
        &serving.url,
        &[
            "node_openai_chat_and_stream_with_usage",
            "node_anthropic_messages_whole_and_streamed",
            "node_openai_tool_call_whole_and_streamed",
            "node_openai_responses_whole_streamed_and_a_tool_loop",
            "node_anthropic_tool_use_whole_and_streamed",
            "node_anthropic_count_tokens",
            "node_a_wrong_key_is_the_sdks_authentication_error",
            "node_a_wait_past_the_bound_is_the_sdks_rate_limit_error_with_retry_after",
        ],
    );
}

/// Writes the keys file of the one key `sdk` ([`SECRET`]) into `dir`.
fn keys_file(dir: &std::path::Path) -> std::path::PathBuf {
    let keys = dir.join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "[[keys]]\nid = \"sdk\"\nsecret_sha256 = \"{}\"\n",
            tollgate_gateway::hash_secret(SECRET)
        ),
    )
    .unwrap();
    keys
}

#[test]
fn the_official_sdks_call_llmock_models_of_the_other_dialect_through_tollgate_serve() {
    let Some(python) = tollgate_testkit::peers::url("TOLLGATE_PEERS_PYTHON") else {
        return;
    };
    let Some(peers) = LlmockRun::new("sdk-cross") else {
        return;
    };
    let llmock = peers.start("sdk-cross", 600);
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.toml");
    // The models' provider names are unique to the run, so llmock's journal tells apart
    // what this run sent.
    let tag = std::process::id();
    let (claude, gpt) = (format!("claude-{tag}"), format!("gpt-{tag}"));
    std::fs::write(
        &catalog,
        format!(
            "[models.claude]\nprovider = \"anthropic-direct\"\nname = \"{claude}\"\n\
             credential = \"llmock\"\nrpm = 600\nmax_output_tokens = 256\n\
             [models.claude.options]\nbase_url = \"{llmock}/anthropic\"\n\n\
             [models.gpt]\nprovider = \"openai-compatible\"\nname = \"{gpt}\"\n\
             credential = \"llmock\"\nrpm = 600\nmax_output_tokens = 256\n\
             [models.gpt.options]\nbase_url = \"{llmock}\"\n"
        ),
    )
    .unwrap();
    let credentials = dir.path().join("secrets.toml");
    std::fs::write(&credentials, "llmock = \"sdk-cross-key\"\n").unwrap();
    let keys = keys_file(dir.path());
    let serving = spawn_serve(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--credentials",
        credentials.to_str().unwrap(),
        "--keys",
        keys.to_str().unwrap(),
    ]);
    run_checks(
        &python,
        "cross.py",
        &serving.url,
        &[
            "openai_sdk_chats_with_an_anthropic_model",
            "openai_sdk_gets_length_for_an_answer_cut_off_at_its_max_tokens",
            "anthropic_sdk_messages_an_openai_model",
        ],
    );
    // What reached llmock: one send per SDK call (a cut-off answer is not sent again),
    // each in the upstream's own dialect, all answered.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (to_claude, to_gpt) = runtime.block_on(async {
        (
            records(&llmock, &claude).await,
            records(&llmock, &gpt).await,
        )
    });
    assert_eq!(to_claude.len(), 3, "{to_claude:?}");
    assert_eq!(to_gpt.len(), 2, "{to_gpt:?}");
    for record in to_claude.iter().chain(&to_gpt) {
        assert_eq!(record["status"], 200, "{record}");
    }
}
