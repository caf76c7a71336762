//! The kit's secret checks can fail: a toy provider (`leaky`) whose transport reads bodies
//! with its own client and keeps what the server sent in its errors, without redacting the
//! key, on one path at a time (error answers, a 200 that does not decode, a stream's error
//! event, embeddings). Each leaking path fails the check that covers it; the same
//! provider redacting everywhere passes both.

use std::sync::Arc;

use futures::stream;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate::catalog::EmbeddingCapabilities;
use tollgate::pipeline::{ChatTransport, EmbeddingsReply, EmbeddingsTransport, Signals};
use tollgate::provider::{CredentialRef, Provider, ProviderContext, ProviderTransports};
use tollgate::wire::{WireError, malformed, redact};
use tollgate::{
    Block, ConnectionCause, EmbeddingPurpose, Error, LlmRequest, LlmResponse, ModelEntry,
    ModelsBuilder, ProviderError, ResponseBody, ResponseStream, Result, StopReason, StreamEvent,
    Usage,
};
use tollgate_testkit::provider::{
    Checked, EmbeddingsWire, Recorded, Reply, StreamScript, WireScript, WireUsage, checks,
};

/// Where the toy transport forgets to redact the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leak {
    Nowhere,
    ErrorAnswers,
    Malformed,
    StreamErrors,
    Embeddings,
    /// Everywhere, it cuts out only the raw key (not `\/`, `\u002F` or `%2F`).
    RawOnly,
}

impl Leak {
    fn name(self) -> &'static str {
        match self {
            Leak::Nowhere => "nowhere",
            Leak::ErrorAnswers => "errors",
            Leak::Malformed => "malformed",
            Leak::StreamErrors => "stream",
            Leak::Embeddings => "embeddings",
            Leak::RawOnly => "raw-only",
        }
    }

    fn of(model: &ModelEntry) -> Leak {
        let name = model.options.get("leak").and_then(|v| v.as_str());
        [
            Leak::ErrorAnswers,
            Leak::Malformed,
            Leak::StreamErrors,
            Leak::Embeddings,
            Leak::RawOnly,
        ]
        .into_iter()
        .find(|l| Some(l.name()) == name)
        .unwrap_or(Leak::Nowhere)
    }
}

#[derive(Debug, Default)]
struct LeakyProvider;

tollgate::register_provider!(|| Arc::new(LeakyProvider));

#[tollgate::async_trait]
impl Provider for LeakyProvider {
    fn key(&self) -> &'static str {
        "leaky"
    }
    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Transports(context.clone())))
    }
}

#[derive(Debug)]
struct Transports(ProviderContext);

impl Transports {
    fn client(&self, model: &ModelEntry) -> Leaky {
        let base = model.options.get("base_url").and_then(|v| v.as_str());
        Leaky {
            address: base
                .unwrap_or_default()
                .trim_start_matches("http://")
                .to_owned(),
            credential: self.0.credential_ref(model).expect("a credential"),
            leak: Leak::of(model),
        }
    }
}

impl ProviderTransports for Transports {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        Ok(Arc::new(self.client(model)))
    }
    fn embeddings(&self, model: &ModelEntry) -> Result<Arc<dyn EmbeddingsTransport>> {
        Ok(Arc::new(self.client(model)))
    }
}

/// The toy transport: HTTP/1.1 by hand, one connection per request.
#[derive(Debug)]
struct Leaky {
    address: String,
    credential: CredentialRef,
    leak: Leak,
}

impl Leaky {
    /// Sends `body`; the status, the body (de-chunked) and the key sent.
    async fn post(&self, body: &Value) -> Result<(u16, Vec<u8>, String)> {
        let key = self.credential.secret().await?.expose_secret().to_owned();
        let failed = |e: std::io::Error| ProviderError::Connection {
            cause: ConnectionCause::Other,
            detail: e.to_string(),
        };
        let mut socket = TcpStream::connect(&self.address).await.map_err(failed)?;
        let body = body.to_string();
        let head = format!(
            "POST / HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.address,
            body.len()
        );
        socket
            .write_all(format!("{head}{body}").as_bytes())
            .await
            .map_err(failed)?;
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).await.map_err(failed)?;
        let split = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| ProviderError::closed_early("no head"))?;
        let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut body = answer[split + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            body = dechunk(&body);
        }
        Ok((status, body, key))
    }

    /// `text` with the key cut out, unless this is where the transport leaks.
    fn clean(&self, here: Leak, text: &str, key: &str) -> String {
        if self.leak == here {
            text.to_owned()
        } else if self.leak == Leak::RawOnly {
            text.replace(key, "[redacted]")
        } else {
            redact(text, [key])
        }
    }

    /// The error for an error answer, from its body kept whole as the message.
    fn error(&self, here: Leak, status: u16, body: &[u8], key: &str) -> Error {
        let message = self.clean(here, &String::from_utf8_lossy(body), key);
        WireError {
            status,
            message,
            ..WireError::default()
        }
        .verdict()
    }

    /// A success body as JSON, or `Malformed` keeping it.
    fn json(&self, here: Leak, body: &[u8], key: &str) -> Result<Value> {
        serde_json::from_slice(body).map_err(|e| {
            let kept = self.clean(here, &String::from_utf8_lossy(body), key);
            malformed(e, kept.as_bytes())
        })
    }
}

fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = chunked.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&chunked[..end]).into_owned();
        let size = usize::from_str_radix(size_text.trim(), 16).unwrap_or(0);
        if size == 0 || chunked.len() < end + 2 + size {
            break;
        }
        body.extend_from_slice(&chunked[end + 2..end + 2 + size]);
        chunked = &chunked[(end + 4 + size).min(chunked.len())..];
    }
    body
}

fn usage(answer: &Value) -> Usage {
    let count = |field: &str| answer[field].as_u64().unwrap_or(0);
    Usage {
        input_tokens: count("input"),
        output_tokens: count("output"),
        ..Usage::default()
    }
}

fn completed(text: String, usage: Usage) -> Result<LlmResponse> {
    LlmResponse::new(ResponseBody {
        model: "leaky-1".into(),
        content: vec![Block::text(text)],
        stop_reason: StopReason::EndTurn,
        usage,
        refusal: None,
    })
}

#[tollgate::async_trait]
impl ChatTransport for Leaky {
    async fn send(&self, _: &LlmRequest, _: &Signals) -> Result<LlmResponse> {
        let (status, body, key) = self.post(&json!({})).await?;
        if status != 200 {
            return Err(self.error(Leak::ErrorAnswers, status, &body, &key));
        }
        let answer = self.json(Leak::Malformed, &body, &key)?;
        let text = answer["text"].as_str().unwrap_or_default().to_owned();
        completed(text, usage(&answer))
    }

    /// Reads the whole body, then hands its events out: enough for the secret check.
    async fn send_stream(&self, _: &LlmRequest, _: &Signals) -> Result<ResponseStream> {
        let (status, body, key) = self.post(&json!({"stream": true})).await?;
        if status != 200 {
            return Err(self.error(Leak::ErrorAnswers, status, &body, &key));
        }
        let mut events = Vec::new();
        let mut text = String::new();
        let body = String::from_utf8_lossy(&body).into_owned();
        for data in body.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
            let event = match self.json(Leak::Malformed, data.as_bytes(), &key) {
                Ok(event) => event,
                Err(e) => {
                    events.push(Err(e));
                    break;
                }
            };
            if event["error"].is_string() {
                // Read as a rejection, whose message the caller sees (a 5xx keeps none).
                events.push(Err(self.error(
                    Leak::StreamErrors,
                    400,
                    data.as_bytes(),
                    &key,
                )));
                break;
            }
            if let Some(piece) = event["delta"].as_str() {
                text.push_str(piece);
                events.push(Ok(StreamEvent::TextDelta {
                    index: 0,
                    text: piece.to_owned(),
                }));
            }
            if event["done"] == true {
                let usage = usage(&event);
                events.push(Ok(StreamEvent::Usage(usage)));
                events
                    .push(completed(std::mem::take(&mut text), usage).map(StreamEvent::Completed));
                return Ok(ResponseStream::new(stream::iter(events)));
            }
        }
        if events.last().is_none_or(Result::is_ok) {
            events.push(Err(ProviderError::closed_early("no `done` event").into()));
        }
        Ok(ResponseStream::new(stream::iter(events)))
    }
}

#[tollgate::async_trait]
impl EmbeddingsTransport for Leaky {
    async fn embed(
        &self,
        texts: &[String],
        _: EmbeddingPurpose,
        _: Option<u64>,
        _: &Signals,
    ) -> Result<EmbeddingsReply> {
        let (status, body, key) = self.post(&json!({"input": texts})).await?;
        if status != 200 {
            return Err(self.error(Leak::Embeddings, status, &body, &key));
        }
        let answer = self.json(Leak::Embeddings, &body, &key)?;
        let vectors = serde_json::from_value(answer["vectors"].clone())
            .map_err(|e| malformed(e, b"vectors"))?;
        Ok(EmbeddingsReply {
            vectors,
            usage: usage(&answer),
        })
    }

    fn max_batch(&self) -> usize {
        2
    }
}

/// The toy provider's wire, leaking where `0` says.
struct LeakyWire(Leak);

fn sse(value: &Value) -> Vec<u8> {
    format!("data: {value}\n\n").into_bytes()
}

impl WireScript for LeakyWire {
    fn provider(&self) -> &'static str {
        "leaky"
    }
    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(LeakyProvider)
    }
    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, "leaky", "leaky-1")
            .with_credential(credential)
            .with_option("base_url", base_url)
            .with_option("leak", self.0.name())
    }
    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.bearer()
    }
    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        Reply::json(
            200,
            &json!({"text": text, "input": usage.input, "output": usage.output}),
        )
    }
    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        let mut frames: Vec<Vec<u8>> = pieces.iter().map(|p| sse(&json!({"delta": p}))).collect();
        frames.push(sse(
            &json!({"done": true, "input": usage.input, "output": usage.output}),
        ));
        StreamScript {
            content_type: "text/event-stream".into(),
            frames,
            first_event: 0,
        }
    }
    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        Some(sse(&json!({ "error": message })))
    }
    fn error(&self, status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({ "error": message }))
    }
    fn quota_exhausted(&self, message: &str) -> Reply {
        self.error(402, message)
    }
    fn context_overflow(&self) -> Option<Reply> {
        None
    }
    fn context_window_stop(&self) -> Option<Reply> {
        None
    }
    fn refusal(&self, _: WireUsage) -> Option<Reply> {
        None
    }
    fn rate_limit_headers(&self, _: u64, _: u64) -> Vec<(String, String)> {
        Vec::new()
    }
    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        Some(self)
    }
}

impl EmbeddingsWire for LeakyWire {
    fn model(&self, model_id: &str, base_url: &str, _: &str) -> ModelEntry {
        let width = tollgate_testkit::provider::EMBEDDING_WIDTH;
        ModelEntry::new(model_id, "leaky", "leaky-embed")
            .with_embedding(EmbeddingCapabilities {
                native_width: Some(width),
                ..EmbeddingCapabilities::default()
            })
            .with_option("base_url", base_url)
            .with_option("leak", self.0.name())
    }
    fn max_batch(&self) -> Option<usize> {
        Some(2)
    }
    fn texts(&self, request: &Recorded) -> Vec<String> {
        request.strings("/input")
    }
    fn purpose(&self, _: &Recorded) -> Option<EmbeddingPurpose> {
        None
    }
    fn dimensions(&self, _: &Recorded) -> Option<u64> {
        None
    }
    fn answer(&self, vectors: &[Vec<f32>], input_tokens: u64) -> Reply {
        Reply::json(200, &json!({"vectors": vectors, "input": input_tokens}))
    }
}

#[tokio::test(start_paused = true)]
async fn a_provider_that_redacts_everywhere_passes_both_secret_checks() {
    let script = LeakyWire(Leak::Nowhere);
    let chat = checks::the_secret_never_shows_in_errors_logs_debug_or_records(&script).await;
    assert_eq!(chat, Checked::Passed);
    let embeddings = checks::the_secret_never_shows_in_embeddings_errors(&script).await;
    assert_eq!(embeddings, Checked::Passed);
}

/// Whether `check` on a provider leaking at `leak` panics saying the secret leaked.
async fn fails_on<F: std::future::Future<Output = Checked>>(
    leak: Leak,
    check: impl FnOnce(&'static LeakyWire) -> F,
) -> bool {
    let script: &'static LeakyWire = Box::leak(Box::new(LeakyWire(leak)));
    let run = std::panic::AssertUnwindSafe(check(script));
    match futures::FutureExt::catch_unwind(run).await {
        Ok(_) => false,
        Err(panic) => {
            let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            message.contains("the secret leaked")
        }
    }
}

/// Each path the chat check echoes the key on fails a provider leaking it there, and
/// only there; the embeddings check fails one leaking it from embeddings.
#[tokio::test(start_paused = true)]
async fn the_secret_checks_fail_a_provider_leaking_the_key_on_any_one_path() {
    for leak in [Leak::ErrorAnswers, Leak::Malformed, Leak::StreamErrors] {
        let chat = |s: &'static LeakyWire| {
            checks::the_secret_never_shows_in_errors_logs_debug_or_records(s)
        };
        assert!(fails_on(leak, chat).await, "{leak:?} is caught");
    }
    let embeddings = |s: &'static LeakyWire| checks::the_secret_never_shows_in_embeddings_errors(s);
    assert!(fails_on(Leak::Embeddings, embeddings).await);
    let chat =
        |s: &'static LeakyWire| checks::the_secret_never_shows_in_errors_logs_debug_or_records(s);
    assert!(
        !fails_on(Leak::Embeddings, chat).await,
        "the chat check passes a chat that redacts"
    );
}

/// A provider that cuts out only the raw key fails both checks: the server quotes it
/// JSON-escaped, `\u`-escaped and URL-encoded too.
#[tokio::test(start_paused = true)]
async fn the_secret_checks_fail_a_provider_that_redacts_only_the_raw_key() {
    let chat =
        |s: &'static LeakyWire| checks::the_secret_never_shows_in_errors_logs_debug_or_records(s);
    assert!(
        fails_on(Leak::RawOnly, chat).await,
        "the chat check catches it"
    );
    let embeddings = |s: &'static LeakyWire| checks::the_secret_never_shows_in_embeddings_errors(s);
    assert!(
        fails_on(Leak::RawOnly, embeddings).await,
        "the embeddings check catches it"
    );
}

#[tokio::test(start_paused = true)]
async fn the_embeddings_checks_pass_on_a_provider_that_batches_by_two() {
    let script = LeakyWire(Leak::Nowhere);
    for checked in [
        checks::embeddings_are_sent_in_batches_of_max_batch_one_reservation_each(&script).await,
        checks::a_failed_embeddings_request_is_resent_alone(&script).await,
    ] {
        assert_eq!(checked, Checked::Passed);
    }
    let purpose = checks::an_embeddings_request_carries_the_purpose_and_the_width(&script).await;
    assert!(matches!(purpose, Checked::Partly(why) if why.contains("purpose")));
}

#[tokio::test(start_paused = true)]
async fn a_check_that_does_not_apply_is_skipped_with_its_reason() {
    let script = LeakyWire(Leak::Nowhere);
    let refusal = checks::a_refusal_is_a_provider_refusal_costed_at_its_usage(&script).await;
    assert!(matches!(&refusal, Checked::Skipped(why) if why.contains("`refusal` is `None`")));
    let tools = checks::a_tool_call_is_decoded_whole_with_its_id_name_and_input(&script).await;
    assert!(matches!(&tools, Checked::Skipped(why) if why.contains("`tool_call`")));
}
