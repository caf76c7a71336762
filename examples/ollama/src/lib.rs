//! `ollama`: Ollama's native chat API (`POST /api/chat`, streamed as newline-delimited
//! JSON) as a tollgate provider written as a third party would: a codec on the provider
//! kit (`tollgate::provider`), registered through `inventory`. Text only.
#![deny(missing_docs)]

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate::provider::http::{Endpoint, Framing::Ndjson, HttpClient};
use tollgate::provider::{BlockAssembler, ChatTransport, ChunkDecoder, LlmRequest, LlmResponse};
use tollgate::provider::{ModelEntry, ModelOptions, Provider, ProviderContext, ProviderTransports};
use tollgate::provider::{ResponseBody, ResponseStream, Result, Signals, StopReason};
use tollgate::provider::{StreamDecoder, StreamEvent, Usage, WireError};
use tollgate::provider::{malformed, parse_json, refuse_unwritten, text_only};

/// The `ollama` provider: no credential needed; one named is sent as a bearer token.
#[derive(Debug, Default, Clone, Copy)]
pub struct OllamaProvider;

tollgate::register_provider!(|| Arc::new(OllamaProvider));

#[tollgate::provider::async_trait]
impl Provider for OllamaProvider {
    fn key(&self) -> &'static str {
        "ollama"
    }
    fn requires_credential(&self) -> bool {
        false
    }
    async fn build(&self, context: &ProviderContext) -> Result<Arc<dyn ProviderTransports>> {
        Ok(Arc::new(Clients(HttpClient::new(context)?)))
    }
}

#[derive(Debug)]
struct Clients(HttpClient);

impl ProviderTransports for Clients {
    fn chat(&self, model: &ModelEntry) -> Result<Arc<dyn ChatTransport>> {
        // `options.base_url`, by default where Ollama listens.
        let url = ModelOptions::new(model, &["base_url"])?.url("base_url")?;
        let url = url.unwrap_or_else(|| "http://127.0.0.1:11434".into());
        let endpoint = self.0.endpoint(model, url, read_error);
        let model = model.name.clone();
        Ok(Arc::new(OllamaChat { endpoint, model }))
    }
}

const PATH: &str = "/api/chat";

/// The chat transport of one `ollama` model.
#[derive(Debug)]
pub struct OllamaChat {
    endpoint: Endpoint,
    model: String,
}

#[tollgate::provider::async_trait]
impl ChatTransport for OllamaChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = encode(&self.model, request, false)?;
        // A whole answer reads like a stream's last chunk, holding all the text.
        let read = |answer: &[u8]| {
            let mut chunks = StreamDecoder::<Chunks>::new();
            match chunks.event(&String::from_utf8_lossy(answer))?.pop() {
                Some(StreamEvent::Completed(response)) => Ok(response),
                _ => Err(malformed("an Ollama answer without `done: true`", answer)),
            }
        };
        self.endpoint.post_decoded(PATH, &body, signals, read).await
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = encode(&self.model, request, true)?;
        let (endpoint, chunks) = (&self.endpoint, StreamDecoder::<Chunks>::new());
        endpoint.stream(PATH, &body, signals, Ndjson, chunks).await
    }
}

/// The request body: messages as text (roles as Ollama names them), sampling in `options`.
fn encode(model: &str, request: &LlmRequest, stream: bool) -> Result<Value> {
    refuse_unwritten(request, "ollama", model, &[])?; // text only: tools, settings refused
    let mut messages = Vec::new();
    for (i, message) in request.messages().iter().enumerate() {
        let field = format!("messages[{i}].content");
        let text = text_only(&message.content, &field, "an `ollama` message")?;
        messages.push(json!({"role": message.role, "content": text}));
    }
    // Sampling goes in `options`; what the request leaves unset is left out.
    let p = request.sampling_params();
    let mut options = json!({"temperature": p.temperature(), "top_p": p.top_p(),
        "num_predict": p.max_output_tokens(), "stop": p.stop()});
    let set = options.as_object_mut().into_iter();
    set.for_each(|o| o.retain(|_, v| !v.is_null()));
    Ok(json!({"model": model, "messages": messages, "stream": stream, "options": options}))
}

/// An error answer: the status and Ollama's `{"error": "…"}`.
fn read_error(status: u16, body: &[u8]) -> WireError {
    let body: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = body["error"].as_str().unwrap_or("(no message)").into();
    WireError {
        status,
        message,
        ..WireError::default()
    }
}

/// Decodes one chunk at a time: text deltas, then, at `done: true`, the whole answer.
#[derive(Debug, Default)]
struct Chunks {
    blocks: BlockAssembler,
    done: bool,
}

impl ChunkDecoder for Chunks {
    fn chunk(&mut self, line: &str) -> Result<Vec<StreamEvent>> {
        let chunk: Value = parse_json(line.as_bytes())?;
        if chunk["error"].is_string() {
            return Err(read_error(500, line.as_bytes()).verdict()); // failed mid-stream
        }
        let mut events = Vec::new();
        if let Some(piece) = chunk["message"]["content"].as_str() {
            events.extend(self.blocks.text(0, piece)?);
        }
        if chunk["done"].as_bool() == Some(true) {
            self.done = true;
            let count = |field: &str| chunk[field].as_u64().unwrap_or(0);
            let (input, output) = (count("prompt_eval_count"), count("eval_count"));
            let usage = Usage::from_cache_exclusive(input, 0, 0, 0, output);
            let stop_reason = match chunk["done_reason"].as_str() {
                Some("length") => StopReason::MaxTokens,
                _ => StopReason::EndTurn,
            };
            let model = chunk["model"].as_str().unwrap_or_default();
            let body = ResponseBody::new(model, self.blocks.finish()?, stop_reason, usage);
            events.extend([StreamEvent::Usage(usage), StreamEvent::Stop(stop_reason)]);
            events.push(StreamEvent::Completed(LlmResponse::new(body)?));
        }
        Ok(events)
    }

    fn is_finished(&self) -> bool {
        self.done
    }
}
