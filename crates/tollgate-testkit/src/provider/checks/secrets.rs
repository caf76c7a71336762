//! The secret never shows: not in an error (even when the provider echoes it), a
//! `Debug` dump, a log line at TRACE, or a recorded call; and an empty key redacts
//! nothing.

use tollgate::Error;

use super::super::harness::{CREDENTIAL, Kit, Logs, MODEL, SECRET, request};
use super::super::script::WireScript;
use super::super::server::Recorded;

/// Every header value of the request, as a server echoing it back would put it.
fn echo(request: &Recorded) -> String {
    let values: Vec<&str> = request.headers.iter().map(|(_, v)| v.as_str()).collect();
    format!("rejected credentials: {}", values.join(" | "))
}

/// A server that echoes every request header (the key among them) in its error
/// messages, on a whole answer, a stream and a retried 500: the secret appears in no error, `Debug`,
/// log line or record.
pub async fn the_secret_never_shows_in_errors_logs_debug_or_records(script: &dyn WireScript) {
    let logs = Logs::skipping(script.foreign_log_targets());
    let _guard = tracing::subscriber::set_default(logs.clone());
    let kit = Kit::new(script).await;
    let chat = kit.models.chat(MODEL).await.expect("client");
    let mut seen = Vec::new();
    // One call to see what the provider sends; its headers are echoed from then on.
    kit.server.only(script.error(401, "who are you"));
    chat.single_response(&request()).await.expect_err("401");
    let echoed = echo(&kit.server.requests()[0]);
    for status in [401u16, 500] {
        kit.server.only(script.error(status, &echoed));
        let err = chat.single_response(&request()).await.expect_err("error");
        seen.push(format!("{err} {err:?}"));
        let stream_err = chat.stream_response(&request()).await.expect_err("error");
        seen.push(format!("{stream_err} {stream_err:?}"));
    }
    let echoes_the_secret = script.identity(SECRET).contains(SECRET);
    if echoes_the_secret {
        assert!(
            seen[0].contains("[redacted]"),
            "the echoed key is redacted: {}",
            seen[0]
        );
    }
    seen.push(format!("{chat:?}"));
    seen.push(format!("{:?} {:?}", kit.models, kit.store));
    for call in kit.recorder.calls() {
        seen.push(format!("{call:?}"));
        seen.push(serde_json::to_string(&call).expect("a record serializes"));
    }
    for attempt in kit.recorder.attempts() {
        seen.push(format!("{attempt:?}"));
    }
    let logged = logs.text();
    assert!(!logged.is_empty(), "the subscriber saw the calls");
    seen.push(logged);
    for text in seen {
        if let Some(at) = text.find(SECRET) {
            let from = text[..at]
                .char_indices()
                .rev()
                .nth(1500)
                .map_or(0, |(i, _)| i);
            let to = (at + SECRET.len() + 200).min(text.len());
            let to = (to..=text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
            panic!("the secret leaked into: …{}…", &text[from..to]);
        }
    }
}

/// An empty stored key is not "redacted" into every message (replacing `""` would put
/// `[redacted]` between every character).
pub async fn an_empty_stored_key_redacts_nothing(script: &dyn WireScript) {
    let kit = Kit::new(script).await;
    kit.store.insert(CREDENTIAL, script.credential(""));
    kit.server.only(script.error(401, "invalid key"));
    let err = kit.ask(&kit.models).await.expect_err("401");
    let text = format!("{err} {err:?}");
    assert!(!text.contains("[redacted]"), "{text}");
    if let Error::ProviderRequest(e) = &err {
        assert!(e.message.contains("invalid key"), "{e:?}");
    }
}
