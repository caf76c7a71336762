//! `tollgate serve` end to end: the binary on the embedded demo catalog (no keys, no
//! network), on a free 127.0.0.1 port it prints, answering a chat completion and
//! stopping gracefully on SIGTERM.

mod common;

use common::serving::spawn_serve;
use common::text;
use serde_json::{Value, json};

/// A chat completion on `demo` at `url`.
async fn chat_demo(http: &reqwest::Client, url: &str) -> reqwest::Response {
    http.post(format!("{url}/v1/chat/completions"))
        .json(&json!({"model": "demo", "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn serve_on_the_demo_catalog_answers_a_chat_completion_and_stops_on_sigterm() {
    let mut serving = spawn_serve(&[]);
    let url = serving.url.clone();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let response = chat_demo(&http, &url).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    let v: Value = response.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(
        !v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    let ready = http.get(format!("{url}/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    serving.terminate();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut serving.stdout, &mut rest).unwrap();
    assert!(rest.contains("stopped"), "{rest}");
    let mut err = Vec::new();
    std::io::Read::read_to_end(serving.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        text(&err).contains("open"),
        "warns that it runs without keys: {}",
        text(&err)
    );
}

#[tokio::test]
async fn serve_with_keys_refuses_a_request_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "[[keys]]\nid = \"ci\"\nsecret_sha256 = \"{}\"\n",
            tollgate_gateway::hash_secret("ci-secret")
        ),
    )
    .unwrap();
    let mut serving = spawn_serve(&["--keys", keys.to_str().unwrap()]);
    let url = serving.url.clone();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let body =
        json!({"model": "demo", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]});
    let refused = http
        .post(format!("{url}/v1/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let answered = http
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "ci-secret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let v: Value = answered.json().await.unwrap();
    assert_eq!(v["type"], "message");
    serving.terminate();
}

/// A keys file `ci` (secret `ci-secret`) with `extra` lines, in `dir`.
fn keys_file(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let keys = dir.join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "[[keys]]\nid = \"ci\"\nsecret_sha256 = \"{}\"\n{extra}\n",
            tollgate_gateway::hash_secret("ci-secret")
        ),
    )
    .unwrap();
    keys
}

/// Asserts that serve printed at start where it keeps the daily spend.
fn says_where_spend_is_kept(banner: &str, state: &std::path::Path) {
    let line = format!("kept in {}", state.display());
    assert!(banner.contains(&line), "{banner}");
}

/// One chat as key `ci` on `demo`, at most 20 output tokens: its status and body.
async fn chat_as_ci(url: &str) -> (u16, Value) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = http
        .post(format!("{url}/v1/chat/completions"))
        .header("authorization", "Bearer ci-secret")
        .json(&json!({"model": "demo", "max_tokens": 20,
            "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn serve_keeps_a_keys_daily_spend_across_a_restart_and_refuses_what_it_used_up() {
    // `demo` costs $0.50 / $1.50 per million tokens: a call's worst case (20 output
    // tokens) is some $0.00003, so $0.00005 a day fits one call and not a second.
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(
        dir.path(),
        "models = [\"demo\"]\nbudget_usd_per_day = 0.00005",
    );
    let state = dir.path().join("keys.spend.json");
    let mut first = spawn_serve(&["--keys", keys.to_str().unwrap()]);
    let (status, v) = chat_as_ci(&first.url).await;
    assert_eq!(status, 200, "{v}");
    first.terminate();

    let mut second = spawn_serve(&["--keys", keys.to_str().unwrap()]);
    let (status, v) = chat_as_ci(&second.url).await;
    assert_eq!(status, 402, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("key:ci daily budget"), "{message}");
    second.terminate();
    assert!(
        state.exists(),
        "the default state file is beside the keys file"
    );
    says_where_spend_is_kept(&first.banner, &state);
}

#[tokio::test]
async fn serve_keeps_the_daily_spend_where_budget_state_says_and_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), "budget_usd_per_day = 1.0");
    let state = dir.path().join("elsewhere.json");
    let mut serving = spawn_serve(&[
        "--keys",
        keys.to_str().unwrap(),
        "--budget-state",
        state.to_str().unwrap(),
    ]);
    says_where_spend_is_kept(&serving.banner, &state);
    let (status, v) = chat_as_ci(&serving.url).await;
    assert_eq!(status, 200, "{v}");
    serving.terminate();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let accounts = saved["accounts"].as_object().unwrap();
    assert!(
        accounts
            .keys()
            .any(|k| k.starts_with("key:ci daily budget ")),
        "{saved}"
    );
    assert!(!dir.path().join("keys.spend.json").exists());
}

/// Runs `tollgate serve --keys FILE` expecting it to refuse to start: its stderr.
fn refused_start(keys: &std::path::Path) -> String {
    refused_start_with(&[], keys, &[])
}

/// Runs `tollgate GLOBAL serve --keys FILE ARGS` expecting it to refuse to start: its
/// stderr.
fn refused_start_with(global: &[&str], keys: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec!["--keys", keys.to_str().unwrap()];
    all.extend_from_slice(args);
    refused(global, &all)
}

/// Runs `tollgate GLOBAL serve --listen 127.0.0.1:0 ARGS` expecting it to refuse to
/// start: its stderr.
fn refused(global: &[&str], args: &[&str]) -> String {
    use std::io::BufRead;
    let mut child = common::tollgate()
        .args(global)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read to the end: a gateway that started prints where it listens (and would run on).
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        if line.unwrap().contains("listening on") {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve started with {args:?}");
        }
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    text(&output.stderr)
}

#[test]
fn serve_refuses_to_start_with_a_key_naming_a_model_outside_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    // Not `gpt-…` nor `claude-…`: the demo's patterns resolve those to `demo`.
    let keys = keys_file(
        dir.path(),
        "models = [\"demo\", \"mistral-typo\"]\nbudget_usd_per_day = 1.0",
    );
    let err = refused_start(&keys);
    assert!(
        err.contains("`ci`") && err.contains("mistral-typo") && err.contains("catalog"),
        "{err}"
    );
    assert!(!dir.path().join("keys.spend.json").exists());
}

#[test]
fn serve_refuses_to_start_with_two_keys_of_one_secret_or_an_unknown_field() {
    let dir = tempfile::tempdir().unwrap();
    let twice = format!(
        "[[keys]]\nid = \"other\"\nsecret_sha256 = \"{}\"",
        tollgate_gateway::hash_secret("ci-secret").to_uppercase()
    );
    let err = refused_start(&keys_file(dir.path(), &twice));
    assert!(err.contains("`other`") && err.contains("`ci`"), "{err}");
    let err = refused_start(&keys_file(dir.path(), "budget_usd_per_dya = 5.0"));
    assert!(
        err.contains("`ci`") && err.contains("budget_usd_per_dya"),
        "{err}"
    );
}

#[test]
fn serve_refuses_budget_state_beside_redis_where_the_budgets_are_kept_in_redis() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), "budget_usd_per_day = 1.0");
    let state = dir.path().join("state.json");
    // Nothing listens on port 1; the refusal comes before any connection.
    let err = refused_start_with(
        &["--redis", "redis://127.0.0.1:1/"],
        &keys,
        &["--budget-state", state.to_str().unwrap()],
    );
    assert!(
        err.contains("--budget-state") && err.contains("--redis"),
        "{err}"
    );
    assert!(!state.exists());
}

/// A self-signed certificate for 127.0.0.1 and its key, written to `dir`: the two paths.
fn tls_files(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key, made.cert.pem())
}

#[tokio::test]
async fn serve_with_tls_cert_and_key_answers_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = tls_files(dir.path());
    let mut serving = spawn_serve(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let url = serving.url.clone();
    assert!(url.starts_with("https://"), "{}", serving.banner);
    let root = reqwest::Certificate::from_pem(pem.as_bytes()).unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([root])
        .build()
        .unwrap();
    let response = chat_demo(&http, &url).await;
    assert_eq!(response.status(), 200);
    // Offered h2 by ALPN, the client speaks HTTP/2.
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    let v: Value = response.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    serving.terminate();
}

#[test]
fn serve_refuses_to_start_with_a_bad_tls_key_or_only_one_of_the_tls_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _, _) = tls_files(dir.path());
    let bad = dir.path().join("bad-key.pem");
    std::fs::write(&bad, "not a key\n").unwrap();
    let cert = cert.to_str().unwrap();
    let err = refused(
        &[],
        &["--tls-cert", cert, "--tls-key", bad.to_str().unwrap()],
    );
    assert!(
        err.contains("bad-key.pem") && err.contains("no PEM private key"),
        "{err}"
    );
    let err = refused(&[], &["--tls-cert", cert]);
    assert!(err.contains("--tls-key"), "{err}");
}
