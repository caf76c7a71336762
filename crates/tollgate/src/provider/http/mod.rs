//! The provider kit (feature `http`): every piece of HTTP plumbing a provider crate would
//! otherwise copy. A provider writes its codec (encode a request, decode an answer and a
//! stream event, read an error body into a [`WireError`](crate::provider::WireError)) and
//! its accounting rule; this module does the rest:
//!
//! - [`HttpClient`]: the reqwest client (connect timeout, no proxy from the environment,
//!   no retries of its own), made once per provider;
//! - [`Endpoint`]: sends a JSON body once with the model's key (fetched per request,
//!   [`Auth`] says how it is sent) and fixed headers; reads rate-limit headers
//!   ([`RateLimitHeaders`]), `retry-after` and `x-should-retry` into the pipeline's
//!   [`Signals`](crate::provider::Signals); caps the body size; turns an error answer
//!   into the one verdict ([`WireError::verdict`](crate::provider::WireError::verdict)) with
//!   the key redacted from it;
//! - [`Endpoint::stream`]: pumps an SSE or NDJSON body ([`Framing`]) through the codec's
//!   [`EventDecoder`](crate::provider::EventDecoder).
//!
//! The pipeline writes the provider key into every error, so a codec never names it.
//!
//! A chat transport over the kit, for a JSON API that streams NDJSON (`examples/ollama`
//! is the whole provider around it), imported as a provider crate imports it: from
//! `tollgate::provider` alone. The example makes the transport as
//! `ProviderTransports::chat` does and runs its codec on canned bodies; it sends nothing.
//!
//! ```
//! use serde_json::{Value, json};
//! use tollgate::provider::http::{Endpoint, Framing, HttpClient};
//! use tollgate::provider::{BlockAssembler, ChatTransport, ChunkDecoder, Error, LlmRequest};
//! use tollgate::provider::{LlmResponse, ModelEntry, ProviderContext, ProviderError};
//! use tollgate::provider::{ResponseBody, ResponseStream, Result, Signals, StopReason};
//! use tollgate::provider::{StreamDecoder, StreamEvent, Usage, WireError};
//! use tollgate::provider::{malformed, parse_json, refuse_unwritten, text_only};
//!
//! // The codec. The request body (text only: any other setting is refused by type).
//! fn encode(model: &str, request: &LlmRequest, stream: bool) -> Result<Value> {
//!     refuse_unwritten(request, "my-provider", model, &[])?;
//!     let mut messages = Vec::new();
//!     for (i, message) in request.messages().iter().enumerate() {
//!         let text = text_only(&message.content, &format!("messages[{i}].content"), "a message")?;
//!         messages.push(json!({"role": message.role, "content": text}));
//!     }
//!     Ok(json!({"model": model, "messages": messages, "stream": stream}))
//! }
//!
//! // An error body, read into the neutral `WireError` (the core's verdict types it).
//! fn read_error(status: u16, body: &[u8]) -> WireError {
//!     let body: Value = serde_json::from_slice(body).unwrap_or_default();
//!     let message = body["error"].as_str().unwrap_or("(no message)").into();
//!     WireError { status, message, ..WireError::default() }
//! }
//!
//! // One NDJSON line: a text delta; the last (`done`) also the usage and the answer.
//! #[derive(Debug, Default)]
//! struct Chunks { blocks: BlockAssembler, done: bool }
//!
//! impl ChunkDecoder for Chunks {
//!     fn chunk(&mut self, line: &str) -> Result<Vec<StreamEvent>> {
//!         let chunk: Value = parse_json(line.as_bytes())?;
//!         let mut events: Vec<_> = self.blocks.text(0, chunk["text"].as_str().unwrap_or(""))?.into_iter().collect();
//!         if chunk["done"] == true {
//!             self.done = true;
//!             let count = |field: &str| chunk[field].as_u64().unwrap_or(0);
//!             let usage = Usage::from_cache_exclusive(count("input"), 0, 0, 0, count("output"));
//!             let body = ResponseBody::new("my-model", self.blocks.finish()?, StopReason::EndTurn, usage);
//!             events.extend([StreamEvent::Usage(usage), StreamEvent::Stop(StopReason::EndTurn)]);
//!             events.push(StreamEvent::Completed(LlmResponse::new(body)?));
//!         }
//!         Ok(events)
//!     }
//!     fn is_finished(&self) -> bool { self.done }
//! }
//!
//! // A whole answer reads as a stream's last line.
//! fn decode(answer: &[u8]) -> Result<LlmResponse> {
//!     match StreamDecoder::<Chunks>::new().event(&String::from_utf8_lossy(answer))?.pop() {
//!         Some(StreamEvent::Completed(response)) => Ok(response),
//!         _ => Err(malformed("an answer without `done: true`", answer)),
//!     }
//! }
//!
//! // The transport: the endpoint sends once; the pipeline retries, waits and records.
//! #[derive(Debug)]
//! struct Chat { endpoint: Endpoint, model: String }
//!
//! #[tollgate::provider::async_trait]
//! impl ChatTransport for Chat {
//!     async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
//!         let body = encode(&self.model, request, false)?;
//!         self.endpoint.post_decoded("/api/chat", &body, signals, decode).await
//!     }
//!     async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
//!         let body = encode(&self.model, request, true)?;
//!         let chunks = StreamDecoder::<Chunks>::new();
//!         self.endpoint.stream("/api/chat", &body, signals, Framing::Ndjson, chunks).await
//!     }
//! }
//!
//! # fn main() -> Result<()> {
//! # // What the pipeline hands `Provider::build`: the catalog and the credential store.
//! # let context = ProviderContext::new(
//! #     "my-provider",
//! #     std::sync::Arc::new(tollgate::Catalog::builder().build()?),
//! #     std::sync::Arc::new(tollgate::credentials::MemoryCredentialStore::new()),
//! # );
//! // `Provider::build` makes the one client; `ProviderTransports::chat`, a model's transport.
//! let http = HttpClient::new(&context)?;
//! let model = ModelEntry::new("m", "my-provider", "my-model");
//! let endpoint = http.endpoint(&model, "http://127.0.0.1:11434", read_error);
//! let chat = Chat { endpoint, model: model.name.clone() };
//! assert_eq!(chat.model, "my-model");
//!
//! // The codec on a whole answer, as the endpoint hands it over (the key cut out) ...
//! let answer = decode(br#"{"text": "Hi", "done": true, "input": 5, "output": 1}"#)?;
//! assert_eq!((answer.text().as_str(), answer.usage().output_tokens), ("Hi", 1));
//! // ... and on an error body: the verdict makes a 429 a rate limit the pipeline waits out.
//! let error = read_error(429, br#"{"error": "slow down"}"#).verdict();
//! assert!(matches!(error, Error::Provider(ProviderError::RateLimited { .. })), "{error:?}");
//! # Ok(())
//! # }
//! ```

mod endpoint;
mod headers;
mod stream;

pub use endpoint::{
    Auth, Endpoint, HttpClient, MAX_BODY_BYTES, MAX_ERROR_BODY_BYTES, Payload, ReadError,
    SecretSource,
};
pub use headers::{
    OPENAI_RATE_LIMITS, RateLimitHeaders, Reset, header, parse_go_duration, read_signals,
    retry_after,
};
pub use reqwest::Method;
pub use stream::Framing;
