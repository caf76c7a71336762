//! `ollama`: Ollama's native chat API (`POST /api/chat`, streamed as newline-delimited JSON)
//! as a tollgate provider written as a third party would: a codec on the provider kit
//! (`tollgate::http`), registered through `inventory`. Text only; other blocks are refused.
#![deny(missing_docs)]

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate::http::{Endpoint, Framing, HttpClient};
use tollgate::pipeline::{ChatTransport, Signals};
use tollgate::provider::{Provider, ProviderContext, ProviderTransports};
use tollgate::wire::{EventDecoder, ModelOptions, WireError, malformed};
use tollgate::{Block, Error, LlmRequest, LlmResponse, ModelEntry};
use tollgate::{ResponseBody, ResponseStream, Result, StopReason, StreamEvent, Usage};

/// The `ollama` provider. Its models need no credential; one named is sent as a bearer
/// token (for a proxy in front of Ollama).
#[derive(Debug, Default, Clone, Copy)]
pub struct OllamaProvider;

tollgate::register_provider!(|| Arc::new(OllamaProvider));

#[tollgate::async_trait]
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
        Ok(Arc::new(OllamaChat { endpoint, model: model.name.clone() }))
    }
}

/// The chat transport of one `ollama` model.
#[derive(Debug)]
pub struct OllamaChat {
    endpoint: Endpoint,
    model: String,
}

#[tollgate::async_trait]
impl ChatTransport for OllamaChat {
    async fn send(&self, request: &LlmRequest, signals: &Signals) -> Result<LlmResponse> {
        let body = encode(&self.model, request, false)?;
        let answer = self.endpoint.post_json("/api/chat", &body, signals).await?;
        // A whole answer reads like a stream's last chunk, holding all the text.
        match Chunks::default().event(String::from_utf8_lossy(&answer).into_owned())?.pop() {
            Some(StreamEvent::Completed(response)) => Ok(response),
            _ => Err(malformed("an Ollama answer without `done: true`", &answer)),
        }
    }

    async fn send_stream(&self, request: &LlmRequest, signals: &Signals) -> Result<ResponseStream> {
        let body = encode(&self.model, request, true)?;
        self.endpoint.stream("/api/chat", &body, signals, Framing::Ndjson, Chunks::default()).await
    }
}

/// The request body: messages as text, sampling in `options`.
fn encode(model: &str, request: &LlmRequest, stream: bool) -> Result<Value> {
    let mut messages = Vec::new();
    for (i, message) in request.messages().iter().enumerate() {
        let mut text = String::new();
        for block in &message.content {
            let Block::Text { text: piece, .. } = block else {
                return Err(Error::InvalidRequest {
                    field: format!("messages[{i}].content"),
                    reason: "holds a block other than text; `ollama` sends text only".into(),
                });
            };
            text.push_str(piece);
        }
        // tollgate's roles serialize as Ollama names them: system, user, assistant.
        messages.push(json!({"role": message.role, "content": text}));
    }
    // Sampling goes in `options`; what the request leaves unset is left out.
    let p = request.sampling_params();
    let mut options = json!({"temperature": p.temperature(), "top_p": p.top_p(),
        "num_predict": p.max_output_tokens(), "stop": p.stop()});
    options.as_object_mut().into_iter().for_each(|o| o.retain(|_, v| !v.is_null()));
    Ok(json!({"model": model, "messages": messages, "stream": stream, "options": options}))
}

/// An error answer: the status and Ollama's `{"error": "…"}`.
fn read_error(status: u16, body: &[u8]) -> WireError {
    let body: Value = serde_json::from_slice(body).unwrap_or_default();
    let message = body["error"].as_str().unwrap_or("(no message)").into();
    WireError { status, message, ..WireError::default() }
}

/// Decodes one chunk at a time: text deltas, then, at `done: true`, the whole answer.
#[derive(Debug, Default)]
struct Chunks {
    text: String,
    done: bool,
}

impl EventDecoder for Chunks {
    fn event(&mut self, line: String) -> Result<Vec<StreamEvent>> {
        let chunk: Value =
            serde_json::from_str(&line).map_err(|e| malformed(e, line.as_bytes()))?;
        if chunk["error"].is_string() {
            // The server failed while it streamed: a server error.
            return Err(read_error(500, line.as_bytes()).verdict());
        }
        let mut events = Vec::new();
        if let Some(piece) = chunk["message"]["content"].as_str().filter(|p| !p.is_empty()) {
            self.text.push_str(piece);
            events.push(StreamEvent::TextDelta { index: 0, text: piece.to_owned() });
        }
        if chunk["done"].as_bool() == Some(true) {
            self.done = true;
            let count = |field: &str| chunk[field].as_u64().unwrap_or(0);
            let (input_tokens, output_tokens) = (count("prompt_eval_count"), count("eval_count"));
            let usage = Usage { input_tokens, output_tokens, ..Usage::default() };
            let length = chunk["done_reason"] == "length";
            let stop_reason = if length { StopReason::MaxTokens } else { StopReason::EndTurn };
            let model = chunk["model"].as_str().unwrap_or_default().to_owned();
            let content = vec![Block::Text { text: std::mem::take(&mut self.text), cache: None }];
            let body = ResponseBody { model, content, stop_reason, usage };
            events.extend([StreamEvent::Usage(usage), StreamEvent::Stop(stop_reason)]);
            events.push(StreamEvent::Completed(LlmResponse::new(body)?));
        }
        Ok(events)
    }

    fn is_finished(&self) -> bool {
        self.done
    }
}
