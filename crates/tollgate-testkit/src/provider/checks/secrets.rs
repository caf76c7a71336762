//! The secret never shows: not in an error (even when the provider echoes it, raw,
//! JSON-escaped, `\u`-escaped or URL-encoded), a `Debug` dump, a log line at TRACE, or a
//! recorded call; and an empty key redacts nothing.

use tollgate::{EmbeddingPurpose, Error};

use super::super::forms::{Form, find_secret};
use super::super::harness::{CREDENTIAL, EMBEDDINGS, Kit, Logs, MODEL, SECRET, USAGE, request};
use super::super::outcome::Checked;
use super::super::script::WireScript;
use super::super::server::{Body, End, Recorded, Reply};

/// What a script is asked to quote; the kit writes the echo in its place, in the raw
/// bytes, so that an escaped form reaches the provider's decoder as the server sent it.
const PLACEHOLDER: &str = "KITECHOPLACEHOLDER";

/// Every header value of the request, as a server echoing it back would put it, in
/// `form`; those holding the secret first, so that a kept start of the answer (a
/// malformed answer's first bytes) holds it too.
fn echo(request: &Recorded, form: Form) -> String {
    let mut values: Vec<&str> = request.headers.iter().map(|(_, v)| v.as_str()).collect();
    values.sort_by_key(|v| !v.contains(SECRET));
    form.write(&format!("rejected credentials: {}", values.join(" | ")))
}

/// `reply` (made quoting [`PLACEHOLDER`]) with `echoed` written in its bytes where the
/// placeholder was; `None` when its bytes do not hold the placeholder as sent (an
/// encoding of its own, e.g. base64, or a binary framing with lengths and checksums).
fn quoting(reply: Reply, echoed: &str, text_framing: bool) -> Option<Reply> {
    let swap = |bytes: &[u8]| -> Option<Vec<u8>> {
        let text = std::str::from_utf8(bytes).ok()?;
        text.contains(PLACEHOLDER)
            .then(|| text.replace(PLACEHOLDER, echoed).into_bytes())
    };
    match reply {
        Reply::Respond {
            status,
            headers,
            body: Body::Full(bytes),
        } => Some(Reply::Respond {
            status,
            headers,
            body: Body::Full(swap(&bytes)?),
        }),
        Reply::Respond {
            status,
            headers,
            body: Body::Frames(frames, end),
        } if text_framing => {
            let frames: Vec<Vec<u8>> = frames
                .iter()
                .map(|f| swap(f).unwrap_or(f.clone()))
                .collect();
            Some(Reply::Respond {
                status,
                headers,
                body: Body::Frames(frames, end),
            })
        }
        _ => None,
    }
}

/// The script's error answer for `status` quoting `echoed` in its raw bytes, or, when
/// its bytes cannot be rewritten, carrying `echoed` as its message.
fn error_quoting(script: &dyn WireScript, status: u16, echoed: &str) -> Reply {
    quoting(script.error(status, PLACEHOLDER), echoed, false)
        .unwrap_or_else(|| script.error(status, echoed))
}

/// The echoed secret in a malformed 200: a body that does not decode, quoting `echoed`.
fn malformed_echo(echoed: &str) -> Reply {
    Reply::raw(200, "application/json", format!("{{not json; {echoed}"))
}

/// Whether a stream's frames are text a server writes verbatim (SSE, NDJSON), so an
/// echo can be written into them.
fn is_text_framing(content_type: &str) -> bool {
    content_type.starts_with("text/") || content_type.contains("json")
}

/// A server that echoes every request header (the key among them) back, in each
/// [`Form`]: in a 4xx and a 5xx error answer (whole and streamed, the 5xx retried), in a
/// 200 whose body does not decode, and in the provider's error event after a stream's
/// first event. The secret appears, in no form, in no error, `Debug`, log line or
/// record.
pub async fn the_secret_never_shows_in_errors_logs_debug_or_records(
    script: &dyn WireScript,
) -> Checked {
    let logs = Logs::skipping(script.foreign_log_targets());
    let _guard = tracing::subscriber::set_default(logs.clone());
    for form in Form::ALL {
        if let Checked::Partly(why) = echoed_in(script, &logs, form).await {
            return Checked::Partly(why);
        }
    }
    Checked::Passed
}

/// One form of [`the_secret_never_shows_in_errors_logs_debug_or_records`].
async fn echoed_in(script: &dyn WireScript, logs: &Logs, form: Form) -> Checked {
    // A kit per part: the failures of one would open the next one's circuit breaker.
    let (kit, echoed) = echoing(script, form).await;
    let chat = kit.models.chat(MODEL).await.expect("client");
    let mut seen = Vec::new();
    for status in [401u16, 500] {
        kit.server.only(error_quoting(script, status, &echoed));
        let err = chat.single_response(&request()).await.expect_err("error");
        seen.push(format!("{err} {err:?}"));
        let stream_err = chat.stream_response(&request()).await.expect_err("error");
        seen.push(format!("{stream_err} {stream_err:?}"));
    }
    if script.identity(SECRET).contains(SECRET) {
        assert!(
            seen[0].contains("[redacted]") || find_secret(&seen[0], SECRET).is_some(),
            "the echoed key ({form:?}) shows as `[redacted]`: {}",
            seen[0]
        );
    }
    seen.push(format!("{chat:?}"));
    assert_never_shown(&kit, logs, seen);

    let (kit, echoed) = echoing(script, form).await;
    kit.server.only(malformed_echo(&echoed));
    let err = kit.ask(&kit.models).await.expect_err("malformed");
    assert_never_shown(&kit, logs, vec![format!("{err} {err:?}")]);

    let (kit, echoed) = echoing(script, form).await;
    let good = script.stream(&["Hel", "lo"], USAGE);
    let text_framing = is_text_framing(&good.content_type);
    let placed = script.stream_error_saying(PLACEHOLDER).and_then(|frame| {
        let reply = Reply::frames(&good.content_type, vec![frame], End::Clean);
        match quoting(reply, &echoed, text_framing)? {
            Reply::Respond {
                body: Body::Frames(mut frames, _),
                ..
            } => frames.pop(),
            _ => None,
        }
    });
    let Some(event) = placed.or_else(|| script.stream_error_saying(&echoed)) else {
        return Checked::Partly(
            "an error event echoing the key: the script's `stream_error_saying` is `None`".into(),
        );
    };
    let mut frames = good.frames[..=good.first_event].to_vec();
    frames.push(event);
    kit.server
        .only(Reply::frames(&good.content_type, frames, End::Clean));
    let (_, err) = kit.stream(&kit.models).await;
    let err = err.expect("the error event ends the stream");
    assert_never_shown(&kit, logs, vec![format!("{err} {err:?}")]);
    Checked::Passed
}

/// A kit whose server has seen one request (answered 401), and that request's headers
/// as a server echoing them back would write them.
async fn echoing(script: &dyn WireScript, form: Form) -> (Kit<'_>, String) {
    let kit = Kit::new(script).await;
    kit.server.only(script.error(401, "who are you"));
    kit.ask(&kit.models).await.expect_err("401");
    let echoed = echo(&kit.server.requests()[0], form);
    (kit, echoed)
}

/// The same server, echoing the key in each [`Form`] in an embeddings model's 4xx, its
/// retried 5xx and its 200 that does not decode: the secret appears, in no form, in no
/// error, `Debug`, log line or record.
pub async fn the_secret_never_shows_in_embeddings_errors(script: &dyn WireScript) -> Checked {
    let logs = Logs::skipping(script.foreign_log_targets());
    let _guard = tracing::subscriber::set_default(logs.clone());
    let texts = vec!["Hello?".to_owned()];
    let embed = |kit: &Kit<'_>| {
        let models = kit.models.clone();
        let texts = texts.clone();
        async move {
            let client = models.embeddings(EMBEDDINGS).await?;
            client.embed_batch(&texts, EmbeddingPurpose::Document).await
        }
    };
    let replies: [fn(&dyn WireScript, &str) -> Reply; 3] = [
        |script, echoed| error_quoting(script, 401, echoed),
        |script, echoed| error_quoting(script, 500, echoed),
        |_, echoed| malformed_echo(echoed),
    ];
    for (reply, form) in replies
        .into_iter()
        .flat_map(|reply| Form::ALL.map(|form| (reply, form)))
    {
        // A kit per part: the failures of one would open the next one's circuit breaker.
        let Some((kit, _)) = Kit::with_embeddings(script).await else {
            return Checked::skipped(super::embeddings::NO_EMBEDDINGS);
        };
        kit.server.only(script.error(401, "who are you"));
        embed(&kit).await.expect_err("401");
        let echoed = echo(&kit.server.requests()[0], form);
        kit.server.only(reply(script, &echoed));
        let err = embed(&kit).await.expect_err("an error");
        assert_never_shown(&kit, &logs, vec![format!("{err} {err:?}")]);
    }
    Checked::Passed
}

/// Panics, showing where, if the secret is, in any [`Form`], in any of `seen`, in the
/// kit's `Models`, store, records or in what was logged.
fn assert_never_shown(kit: &Kit<'_>, logs: &Logs, mut seen: Vec<String>) {
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
        if let Some((at, len)) = find_secret(&text, SECRET) {
            let from = text[..at]
                .char_indices()
                .rev()
                .nth(1500)
                .map_or(0, |(i, _)| i);
            let to = (at + len + 200).min(text.len());
            let to = (to..=text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
            panic!("the secret leaked into: …{}…", &text[from..to]);
        }
    }
}

/// An empty stored key is not "redacted" into every message (replacing `""` would put
/// `[redacted]` between every character).
pub async fn an_empty_stored_key_redacts_nothing(script: &dyn WireScript) -> Checked {
    let kit = Kit::new(script).await;
    kit.store.insert(CREDENTIAL, script.credential(""));
    kit.server.only(script.error(401, "invalid key"));
    let err = kit.ask(&kit.models).await.expect_err("401");
    let text = format!("{err} {err:?}");
    assert!(!text.contains("[redacted]"), "{text}");
    if let Error::ProviderRequest(e) = &err {
        assert!(e.message.contains("invalid key"), "{e:?}");
    }
    Checked::Passed
}
