//! `tollgate serve` end to end: the binary on the embedded demo catalog (no keys, no
//! network), on a free 127.0.0.1 port it prints, answering a chat completion and
//! stopping gracefully on SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use common::{text, tollgate};
use serde_json::{Value, json};

/// A running `tollgate serve`, killed (and reaped) if a test fails before stopping it.
struct Serving {
    child: Child,
    url: String,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// Sends SIGTERM and waits for the process to exit successfully.
    fn terminate(&mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

/// Starts `tollgate serve --listen 127.0.0.1:0 ARGS` and reads the bound address from
/// its output.
fn spawn_serve(args: &[&str]) -> Serving {
    let mut child = tollgate()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tollgate starts");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut serving = Serving {
        child,
        url: String::new(),
        stdout,
    };
    let mut line = String::new();
    while serving.url.is_empty() {
        line.clear();
        assert!(
            serving.stdout.read_line(&mut line).unwrap() > 0,
            "serve exited early"
        );
        if let Some(rest) = line.split("listening on ").nth(1) {
            serving.url = rest.split_whitespace().next().unwrap().to_owned();
        }
    }
    serving
}

#[tokio::test]
async fn serve_on_the_demo_catalog_answers_a_chat_completion_and_stops_on_sigterm() {
    let mut serving = spawn_serve(&[]);
    let url = serving.url.clone();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({"model": "demo", "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap();
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
