//! `tollgate serve` reloads its keys and catalog on SIGHUP: a key added is served and a
//! key revoked refused from the next request, and a keys file that does not parse is
//! refused with the reason on stderr while the keys in use go on. The binary on the
//! embedded demo catalog, on a free 127.0.0.1 port.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::Command;

use common::serving::{Serving, spawn_serve};
use serde_json::json;

fn write_key(path: &Path, id: &str) {
    std::fs::write(
        path,
        format!(
            "[[keys]]\nid = \"{id}\"\nsecret_sha256 = \"{}\"\n",
            tollgate_gateway::hash_secret(&format!("{id}-secret"))
        ),
    )
    .unwrap();
}

/// The status of one chat completion on `demo` with key `id`'s secret.
async fn status_with(url: &str, id: &str) -> u16 {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(format!("{id}-secret"))
        .json(&json!({"model": "demo", "max_tokens": 20,
            "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    response.bytes().await.unwrap();
    status
}

fn hang_up(serving: &Serving) {
    let status = Command::new("kill")
        .args(["-HUP", &serving.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The next line `serving` prints on stdout.
fn next_line(serving: &mut Serving) -> String {
    let mut line = String::new();
    assert!(
        serving.stdout.read_line(&mut line).unwrap() > 0,
        "serve exited"
    );
    line
}

#[tokio::test]
async fn serve_reloads_its_keys_on_sighup_and_keeps_them_when_the_new_file_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.toml");
    write_key(&keys, "old");
    let mut serving = spawn_serve(&["--keys", keys.to_str().unwrap()]);
    let url = serving.url.clone();
    assert_eq!(status_with(&url, "old").await, 200);
    assert_eq!(status_with(&url, "new").await, 401);

    // The key is revoked and another added: from the reload on, only the new one works.
    write_key(&keys, "new");
    hang_up(&serving);
    let said = next_line(&mut serving);
    assert!(
        said.contains("reloaded on SIGHUP") && said.contains("1 virtual keys"),
        "{said}"
    );
    assert_eq!(status_with(&url, "new").await, 200);
    assert_eq!(status_with(&url, "old").await, 401);

    // A file that does not parse: refused with the reason, the keys in use kept.
    std::fs::write(&keys, "[[keys]]\nid = \"broken\"\nsecret_sha256 = 42\n").unwrap();
    hang_up(&serving);
    let mut stderr = std::io::BufReader::new(serving.child.stderr.take().unwrap());
    let mut refusal = String::new();
    while !refusal.contains("reload on SIGHUP refused") {
        refusal.clear();
        assert!(stderr.read_line(&mut refusal).unwrap() > 0, "serve exited");
    }
    assert!(
        refusal.contains("key `broken`") && refusal.contains("expected a string"),
        "{refusal}"
    );
    assert_eq!(status_with(&url, "new").await, 200);
    assert_eq!(status_with(&url, "broken").await, 401);
    serving.terminate();
}
