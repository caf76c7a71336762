//! The provider kit (feature `http`): every piece of HTTP plumbing a provider crate would
//! otherwise copy. A provider writes its codec (encode a request, decode an answer and a
//! stream event, read an error body into a [`WireError`](crate::wire::WireError)) and
//! its accounting rule; this module does the rest:
//!
//! - [`HttpClient`]: the reqwest client (connect timeout, no proxy from the environment,
//!   no retries of its own), made once per provider;
//! - [`Endpoint`]: sends a JSON body once with the model's key (fetched per request,
//!   [`Auth`] says how it is sent) and fixed headers; reads rate-limit headers
//!   ([`RateLimitHeaders`]), `retry-after` and `x-should-retry` into the pipeline's
//!   [`Signals`](crate::pipeline::Signals); caps the body size; turns an error answer
//!   into the one verdict ([`WireError::verdict`](crate::wire::WireError::verdict)) with
//!   the key redacted from it;
//! - [`Endpoint::stream`]: pumps an SSE or NDJSON body ([`Framing`]) through the codec's
//!   [`EventDecoder`](crate::wire::EventDecoder).
//!
//! The pipeline writes the provider key into every error, so a codec never names it.
//!
//! A chat transport over the kit, for a JSON API that streams NDJSON:
//!
//! ```no_run
//! use tollgate::http::{Endpoint, Framing, HttpClient};
//! use tollgate::pipeline::{ChatTransport, Signals};
//! use tollgate::wire::{EventDecoder, WireError};
//! use tollgate::{LlmRequest, LlmResponse, ModelEntry, ResponseStream, Result, StreamEvent};
//!
//! // The codec: the provider's own wire format (here, stubs).
//! fn encode(request: &LlmRequest, stream: bool) -> Result<serde_json::Value> { todo!() }
//! fn decode(body: &[u8]) -> Result<LlmResponse> { todo!() }
//! fn read_error(status: u16, body: &[u8]) -> WireError {
//!     WireError { status, message: String::from_utf8_lossy(body).into(), ..WireError::default() }
//! }
//! struct Chunks; // decodes one NDJSON line at a time
//! impl EventDecoder for Chunks {
//!     fn event(&mut self, line: String) -> Result<Vec<StreamEvent>> { todo!() }
//!     fn is_finished(&self) -> bool { todo!() }
//! }
//!
//! #[derive(Debug)]
//! struct Chat { endpoint: Endpoint }
//!
//! impl Chat {
//!     // In `ProviderTransports::chat`, with the `HttpClient` made in `Provider::build`.
//!     fn new(http: &HttpClient, model: &ModelEntry) -> Self {
//!         Chat { endpoint: http.endpoint(model, "http://127.0.0.1:11434", read_error) }
//!     }
//! }
//!
//! #[tollgate::async_trait]
//! impl ChatTransport for Chat {
//!     async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
//!         let body = self.endpoint.post_json("/api/chat", &encode(request, false)?, signals).await?;
//!         decode(&body)
//!     }
//!     async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
//!         let body = encode(request, true)?;
//!         self.endpoint.stream("/api/chat", &body, signals, Framing::Ndjson, Chunks).await
//!     }
//! }
//! ```

mod endpoint;
mod headers;
mod stream;

pub use endpoint::{
    Auth, Endpoint, HttpClient, MAX_BODY_BYTES, MAX_ERROR_BODY_BYTES, ReadError, SecretSource,
};
pub use headers::{
    OPENAI_RATE_LIMITS, RateLimitHeaders, Reset, header, parse_go_duration, read_signals,
    retry_after,
};
pub use stream::Framing;
