//! The key never leaves the endpoint in a body it read: one test per path that reads a
//! body (an error answer, a whole answer read raw or decoded, a stream event), each
//! against a local server that echoes the key back.

use std::sync::Arc;

use futures::StreamExt;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{Endpoint, HttpClient, MAX_ERROR_BODY_BYTES};
use crate::ProviderError;
use crate::catalog::{Catalog, KnownProviders};
use crate::credentials::MemoryCredentialStore;
use crate::error::{Error, ProviderRequestError, Result};
use crate::provider::ProviderContext;
use crate::provider::Signals;
use crate::provider::http::Framing;
use crate::provider::wire::{EventDecoder, REDACTED, WireError, malformed};
use crate::stream::StreamEvent;

const KEY: &str = "sk-endpoint-SENTINEL-31f7";

/// The codec's error reader: keeps the whole body as the message, as a careless one would.
fn read_error(status: u16, body: &[u8]) -> WireError {
    let message = String::from_utf8_lossy(body).into_owned();
    WireError {
        status,
        message,
        ..WireError::default()
    }
}

/// The endpoint of one model at `server`, sending `key` as a bearer token.
fn endpoint(server: &MockServer, key: &str) -> Endpoint {
    let toml =
        "[models.m]\nprovider = \"toy\"\ncredential = \"toy-key\"\nmax_output_tokens = 100\n";
    let known = KnownProviders::empty().with("toy", "toy-provider", false);
    let catalog = Catalog::from_toml_str_with(toml, &known).expect("a catalog");
    let model = catalog.get("m").expect("the model").clone();
    let store = Arc::new(MemoryCredentialStore::new().with("toy-key", key));
    let context = ProviderContext::new("toy", Arc::new(catalog), store);
    let client = HttpClient::new(&context).expect("a client");
    client.endpoint(&model, server.uri(), read_error)
}

async fn answering(status: u16, body: impl Into<Vec<u8>>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(status).set_body_bytes(body.into()))
        .mount(&server)
        .await;
    server
}

/// One whole answer read raw from `server`, sending `key`.
async fn post(server: &MockServer, key: &str) -> Result<Vec<u8>> {
    let endpoint = endpoint(server, key);
    endpoint
        .post_json("/", &serde_json::json!({}), &Signals::default())
        .await
}

/// `text` holds no part of the key that could identify it, and the marker shows.
fn assert_redacted(text: &str) {
    assert!(!text.contains(KEY), "the key leaked: {text}");
    assert!(
        text.contains(REDACTED),
        "the marker shows where it was: {text}"
    );
}

#[tokio::test]
async fn an_error_answer_echoing_the_key_is_redacted_before_the_codec_reads_it() {
    let server = answering(401, format!("{{\"error\": \"bad key {KEY}\"}}")).await;
    let err = post(&server, KEY).await.expect_err("401");
    let Error::ProviderRequest(e) = &err else {
        panic!("a rejection: {err:?}");
    };
    assert_redacted(&e.message);
    assert_redacted(&format!("{err} {err:?}"));
}

#[tokio::test]
async fn a_key_cut_by_the_error_body_cap_is_redacted_whole_before_the_cap() {
    // The key starts five bytes before the cap: cutting first would keep its start.
    let mut body = "x".repeat(MAX_ERROR_BODY_BYTES - 5);
    body.push_str(KEY);
    body.push_str(" and more");
    let server = answering(500, body).await;
    let err = post(&server, KEY).await.expect_err("500");
    let text = format!("{err:?}");
    assert!(!text.contains(&KEY[..5]), "the key's start leaked");
    assert!(matches!(
        err,
        Error::Provider(ProviderError::Server { status: 500, .. })
    ));
}

#[tokio::test]
async fn a_unicode_escaped_key_cut_by_the_error_body_cap_is_redacted_whole_before_the_cap() {
    // Escaped, the key is six times its length: it starts before the cap and ends far
    // past the raw key's length beyond it.
    let escaped: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let mut body = "x".repeat(MAX_ERROR_BODY_BYTES - 12);
    body.push_str(&escaped);
    body.push_str(" and more");
    // A 400 keeps the body as its message.
    let server = answering(400, body).await;
    let err = post(&server, KEY).await.expect_err("400");
    let Error::ProviderRequest(e) = &err else {
        panic!("a rejection: {err:?}");
    };
    assert!(
        !e.message.contains(&escaped[..12]),
        "the escaped key's start leaked"
    );
    assert!(
        !err.to_string().contains(&escaped[..12]),
        "the escaped key's start leaked"
    );
}

#[tokio::test]
async fn a_whole_answer_read_raw_has_the_key_cut_out_so_a_malformed_error_cannot_keep_it() {
    let server = answering(200, format!("{{not json, echoing {KEY} twice: {KEY}")).await;
    let bytes = post(&server, KEY).await.expect("a 200");
    let text = String::from_utf8(bytes.clone()).expect("utf-8");
    assert_redacted(&text);
    assert_eq!(text.matches(REDACTED).count(), 2, "{text}");
    // What a codec does with a body that does not decode.
    let err = malformed("expected value", &bytes);
    assert_redacted(&format!("{err:?}"));
}

#[tokio::test]
async fn a_whole_answer_that_is_not_utf8_has_the_key_cut_out_too() {
    let mut body = vec![0xff, 0xfe, b' '];
    body.extend_from_slice(KEY.as_bytes());
    body.push(0xc3);
    let server = answering(200, body).await;
    let bytes = post(&server, KEY).await.expect("a 200");
    let mut expected = vec![0xff, 0xfe, b' '];
    expected.extend_from_slice(REDACTED.as_bytes());
    expected.push(0xc3);
    assert_eq!(bytes, expected);
}

/// A body, and the key, for which a whole answer must come back byte for byte: one
/// without the key (only its start), and one read with an empty stored key.
#[tokio::test]
async fn a_whole_answer_without_the_key_or_with_an_empty_key_is_returned_as_sent() {
    for (key, body) in [(KEY, "{\"a\": \"sk-endpoint\"}"), ("", "{\"a\": 1}")] {
        let server = answering(200, body).await;
        let bytes = post(&server, key).await.expect("a 200");
        assert_eq!(bytes, body.as_bytes());
    }
}

#[tokio::test]
async fn a_decoded_answer_that_does_not_decode_keeps_no_key() {
    let server = answering(200, format!("<html>{KEY}</html>")).await;
    let endpoint = endpoint(&server, KEY);
    let err = endpoint
        .post_decoded("/", &serde_json::json!({}), &Signals::default(), |b| {
            serde_json::from_slice::<serde_json::Value>(b).map_err(|e| malformed(e, b))
        })
        .await
        .expect_err("malformed");
    assert!(
        matches!(&err, Error::Provider(ProviderError::Malformed { .. })),
        "{err:?}"
    );
    assert_redacted(&format!("{err} {err:?}"));
}

#[tokio::test]
async fn a_decoded_answer_read_into_a_rejection_keeps_no_key() {
    // A codec that finds an error in a success body and quotes the body, in a variant the
    // error-side redaction does not reach: the codec never saw the key.
    let server = answering(200, format!("{{\"error\": \"echo {KEY}\"}}")).await;
    let err = endpoint(&server, KEY)
        .post_decoded("/", &serde_json::json!({}), &Signals::default(), |b| {
            Err::<(), _>(ProviderRequestError::new(200, String::from_utf8_lossy(b)).into())
        })
        .await
        .expect_err("rejected");
    assert_redacted(&format!("{err:?}"));
}

/// Decodes each line as text; a line starting `error` fails the stream quoting it.
struct Lines {
    done: bool,
}

impl EventDecoder for Lines {
    fn event(&mut self, line: String) -> Result<Vec<StreamEvent>> {
        if line.starts_with("error") {
            return Err(ProviderRequestError::new(200, line).into());
        }
        self.done = line == "end";
        Ok(vec![StreamEvent::TextDelta {
            index: 0,
            text: line,
        }])
    }
    fn is_finished(&self) -> bool {
        self.done
    }
}

async fn stream_of(body: String) -> Vec<Result<StreamEvent>> {
    let server = answering(200, body).await;
    let stream = endpoint(&server, KEY)
        .stream(
            "/",
            &serde_json::json!({}),
            &Signals::default(),
            Framing::Ndjson,
            Lines { done: false },
        )
        .await
        .expect("a stream");
    stream.collect().await
}

#[tokio::test]
async fn a_stream_event_echoing_the_key_reaches_the_decoder_without_it() {
    let events = stream_of(format!("hello {KEY}\nend\n")).await;
    let Some(Ok(StreamEvent::TextDelta { text, .. })) = events.first() else {
        panic!("{events:?}");
    };
    assert_redacted(text);
}

#[tokio::test]
async fn a_stream_error_event_echoing_the_key_keeps_no_key() {
    let events = stream_of(format!("hello\nerror: bad key {KEY}\n")).await;
    let Some(Err(err)) = events.last() else {
        panic!("{events:?}");
    };
    assert_redacted(&format!("{err} {err:?}"));
}

/// A key with the characters JSON and URLs escape: `/`, `+` and `=` (an AWS secret, a
/// base64 token).
const SLASHED: &str = "sk/endpoint+SENTINEL=31f7/x";

/// The forms a server may quote `key` in: raw, JSON-escaped (`\/`), every other
/// character `\u`-escaped in lower and upper case, and percent-encoded both ways.
fn forms(key: &str) -> Vec<String> {
    let each = |f: &dyn Fn(char) -> String| key.chars().map(f).collect::<String>();
    let special = |c: char| !c.is_ascii_alphanumeric() && c != '-';
    vec![
        key.to_owned(),
        key.replace('/', "\\/"),
        each(&|c| format!("\\u{:04x}", c as u32)),
        each(&|c| format!("\\u{:04X}", c as u32)),
        each(&|c| {
            if special(c) {
                format!("\\u{:04X}", c as u32)
            } else {
                c.to_string()
            }
        }),
        each(&|c| {
            if special(c) {
                format!("%{:02X}", c as u32)
            } else {
                c.to_string()
            }
        }),
        each(&|c| {
            if special(c) {
                format!("%{:02x}", c as u32)
            } else {
                c.to_string()
            }
        }),
    ]
}

/// `text` holds the key in none of its [`forms`], and the marker shows.
fn assert_no_form_of(text: &str, key: &str) {
    for form in forms(key) {
        assert!(!text.contains(&form), "the key leaked as {form}: {text}");
    }
    assert!(text.contains(REDACTED), "the marker shows: {text}");
}

/// The codec's error reader as a real one is: the body's JSON decoded, its `error`
/// string the message (so the key comes back un-escaped if the bytes kept it escaped).
fn read_json_error(status: u16, body: &[u8]) -> WireError {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    WireError {
        status,
        message: value["error"].as_str().unwrap_or_default().to_owned(),
        ..WireError::default()
    }
}

/// The error a decoding codec makes of an error answer quoting the key as `quoted`.
async fn decoded_error_quoting(quoted: &str) -> Error {
    let body = format!("{{\"error\": \"bad key {quoted}\"}}");
    let server = answering(401, body).await;
    let endpoint = endpoint(&server, SLASHED);
    let endpoint = Endpoint {
        read_error: read_json_error,
        ..endpoint
    };
    endpoint
        .post_json("/", &serde_json::json!({}), &Signals::default())
        .await
        .expect_err("401")
}

#[tokio::test]
async fn an_error_answer_quoting_the_key_json_escaped_is_redacted_after_decoding() {
    let err = decoded_error_quoting(&SLASHED.replace('/', "\\/")).await;
    let Error::ProviderRequest(e) = &err else {
        panic!("a rejection: {err:?}");
    };
    assert_eq!(e.message, format!("bad key {REDACTED}"));
    assert_no_form_of(&format!("{err} {err:?}"), SLASHED);
}

#[tokio::test]
async fn an_error_answer_quoting_the_key_unicode_escaped_in_either_case_is_redacted() {
    for quoted in forms(SLASHED).into_iter().filter(|f| f.contains("\\u")) {
        let err = decoded_error_quoting(&quoted).await;
        assert_no_form_of(&format!("{err} {err:?}"), SLASHED);
    }
}

#[tokio::test]
async fn an_error_answer_quoting_the_key_url_encoded_is_redacted() {
    for quoted in forms(SLASHED).into_iter().filter(|f| f.contains('%')) {
        let err = decoded_error_quoting(&quoted).await;
        assert_no_form_of(&format!("{err} {err:?}"), SLASHED);
    }
}

#[tokio::test]
async fn an_undecodable_answer_quoting_the_key_escaped_keeps_no_form_of_it() {
    for quoted in forms(SLASHED) {
        let server = answering(200, format!("<html>{quoted}</html>")).await;
        let err = endpoint(&server, SLASHED)
            .post_decoded("/", &serde_json::json!({}), &Signals::default(), |b| {
                serde_json::from_slice::<serde_json::Value>(b).map_err(|e| malformed(e, b))
            })
            .await
            .expect_err("malformed");
        assert_no_form_of(&format!("{err} {err:?}"), SLASHED);
    }
}

#[tokio::test]
async fn a_whole_answer_decoded_into_a_rejection_keeps_no_escaped_key() {
    let body = format!("{{\"error\": \"echo {}\"}}", SLASHED.replace('/', "\\/"));
    let server = answering(200, body).await;
    let err = endpoint(&server, SLASHED)
        .post_decoded("/", &serde_json::json!({}), &Signals::default(), |b| {
            let value: serde_json::Value =
                serde_json::from_slice(b).map_err(|e| malformed(e, b))?;
            let message = value["error"].as_str().unwrap_or_default();
            Err::<(), _>(ProviderRequestError::new(200, message).into())
        })
        .await
        .expect_err("rejected");
    assert_no_form_of(&format!("{err} {err:?}"), SLASHED);
}

/// Decodes each line as JSON; `{"error": …}` fails the stream with its (decoded) text.
struct JsonLines;

impl EventDecoder for JsonLines {
    fn event(&mut self, line: String) -> Result<Vec<StreamEvent>> {
        let value: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| malformed(e, line.as_bytes()))?;
        match value["error"].as_str() {
            Some(message) => Err(ProviderRequestError::new(200, message).into()),
            None => Ok(vec![StreamEvent::TextDelta {
                index: 0,
                text: value["text"].as_str().unwrap_or_default().to_owned(),
            }]),
        }
    }
    fn is_finished(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn a_stream_error_event_quoting_the_key_json_escaped_keeps_no_key() {
    for quoted in forms(SLASHED) {
        let body = format!("{{\"text\": \"hi\"}}\n{{\"error\": \"bad key {quoted}\"}}\n");
        let server = answering(200, body).await;
        let stream = endpoint(&server, SLASHED)
            .stream(
                "/",
                &serde_json::json!({}),
                &Signals::default(),
                Framing::Ndjson,
                JsonLines,
            )
            .await
            .expect("a stream");
        let events: Vec<Result<StreamEvent>> = stream.collect().await;
        let Some(Err(err)) = events.last() else {
            panic!("{events:?}");
        };
        assert_no_form_of(&format!("{err} {err:?}"), SLASHED);
    }
}
