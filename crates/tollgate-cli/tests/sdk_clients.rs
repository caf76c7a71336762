//! The official OpenAI and Anthropic Python SDKs (pinned, installed by
//! `scripts/peers.sh` into `target/peers`) as clients of `tollgate serve`: chat whole and
//! streamed, tools, embeddings, a wrong key, a body over the cap and a wait past its bound,
//! in both dialects, each SDK reading the gateway's answers as it reads its provider's
//! (`tests/sdk/clients.py` holds the checks). Skipped without `TOLLGATE_PEERS_PYTHON`,
//! failed without it under `cargo xtask test-all`.

mod common;

use std::process::Command;

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
    let catalog = dir.path().join("catalog.toml");
    std::fs::write(&catalog, CATALOG).unwrap();
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "[[keys]]\nid = \"sdk\"\nsecret_sha256 = \"{}\"\n",
            tollgate_gateway::hash_secret(SECRET)
        ),
    )
    .unwrap();
    let serving = spawn_serve(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--keys",
        keys.to_str().unwrap(),
        "--max-body-bytes",
        "8192",
    ]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/clients.py");
    let out = Command::new(python)
        .arg(script)
        .env("TOLLGATE_URL", &serving.url)
        .env("TOLLGATE_KEY", SECRET)
        .env("NO_PROXY", "127.0.0.1")
        .output()
        .expect("the venv's python runs");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "the SDK checks failed:\n{stdout}\n{stderr}"
    );
    for check in [
        "openai_chat",
        "openai_stream_with_usage",
        "openai_tools_are_accepted",
        "openai_embeddings",
        "anthropic_messages",
        "anthropic_stream",
        "anthropic_tools_are_accepted",
        "a_wrong_key_is_each_sdks_authentication_error",
        "a_body_over_the_cap_is_a_413",
        "a_wait_past_the_bound_is_each_sdks_rate_limit_error_with_retry_after",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("ok {check}")),
            "{check} did not pass:\n{stdout}\n{stderr}"
        );
    }
}
