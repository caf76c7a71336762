//! The OpenAI wire format scripted for `tollgate-testkit`'s contract kit (feature
//! `testkit`), so that every OpenAI-like provider crate runs the kit on its preset in a
//! few lines:
//!
//! ```ignore
//! tollgate_testkit::provider_contract_tests!(
//!     tollgate_openai::testkit::OpenAiWire::new(my_crate::PROVIDER);
//!     skip { a_context_window_stop_is_typed_and_names_the_model: "no full-window stop" }
//! );
//! ```

pub mod batch;

use serde_json::{Value, json};
use tollgate::provider::{EmbeddingPurpose, ModelEntry};
use tollgate_testkit::provider::{
    EmbeddingsWire, ModelsBuilder, Recorded, Reply, StreamScript, WireScript, WireToolCall,
    WireUsage, embeddings_entry,
};

use crate::OpenAiProvider;

/// The OpenAI Chat Completions wire format of one OpenAI-like provider, scripted for
/// the contract kit: answers, streams, tool calls, errors and embeddings as the
/// provider's server writes them (OpenAI's shapes, the preset's rate-limit headers).
#[derive(Debug, Clone, Copy)]
pub struct OpenAiWire {
    /// The provider under test (registered by the script).
    pub provider: OpenAiProvider,
    /// The model name written in answers and catalog entries.
    pub model: &'static str,
    /// How an error body is written: `(type, code, message)` to the body (OpenAI's
    /// `{"error": {...}}` by default, [`openai_error_body`]).
    pub error_body: fn(&str, Value, &str) -> Value,
}

impl OpenAiWire {
    /// The script of `provider`'s models, OpenAI's error bodies.
    pub fn new(provider: OpenAiProvider) -> Self {
        OpenAiWire {
            provider,
            model: "gpt-test",
            error_body: openai_error_body,
        }
    }

    fn key(&self) -> &'static str {
        self.provider.preset().key
    }
}

fn usage(usage: WireUsage) -> Value {
    json!({"prompt_tokens": usage.input, "completion_tokens": usage.output,
           "total_tokens": usage.input + usage.output,
           "prompt_tokens_details": {"cached_tokens": 0}})
}

fn completion(message: Value, finish: &str, wire: WireUsage) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
           "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
           "usage": usage(wire)})
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
           "usage": null})
}

fn sse(data: &Value) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

/// OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`.
pub fn openai_error_body(kind: &str, code: Value, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

impl WireScript for OpenAiWire {
    fn provider(&self) -> &'static str {
        self.key()
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(self.provider)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, self.key(), self.model)
            .with_credential(credential)
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.bearer()
    }

    fn answer(&self, text: &str, wire: WireUsage) -> Reply {
        Reply::json(
            200,
            &completion(
                json!({"role": "assistant", "content": text, "refusal": null}),
                "stop",
                wire,
            ),
        )
    }

    fn stream(&self, pieces: &[&str], wire: WireUsage) -> StreamScript {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        let first_event = events.len();
        for piece in pieces {
            events.push(chunk(json!({"content": piece}), None));
        }
        events.push(chunk(json!({}), Some("stop")));
        events.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                           "model": "gpt-test", "choices": [], "usage": usage(wire)}),
        );
        let mut frames: Vec<Vec<u8>> = events.iter().map(sse).collect();
        frames.push(b"data: [DONE]\n\n".to_vec());
        StreamScript {
            content_type: "text/event-stream".into(),
            frames,
            first_event,
        }
    }

    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        Some(sse(&(self.error_body)(
            "server_error",
            Value::Null,
            message,
        )))
    }

    fn tool_call(&self, text: &str, call: &WireToolCall, wire: WireUsage) -> Option<Reply> {
        let tool_call = json!({"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": call.input.to_string()}});
        let message = json!({"role": "assistant", "content": text, "refusal": null,
                             "tool_calls": [tool_call]});
        Some(Reply::json(200, &completion(message, "tool_calls", wire)))
    }

    /// The arguments' JSON text in two pieces, as OpenAI streams them.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        wire: WireUsage,
    ) -> Option<StreamScript> {
        let arguments = call.input.to_string();
        let (head, tail) = arguments.split_at(arguments.len() / 2);
        let opening = json!({"index": 0, "id": call.id, "type": "function",
                             "function": {"name": call.name, "arguments": ""}});
        let piece = |p: &str| json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]});
        let events = [
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": text}), None),
            chunk(json!({"tool_calls": [opening]}), None),
            chunk(piece(head), None),
            chunk(piece(tail), None),
            chunk(json!({}), Some("tool_calls")),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "gpt-test", "choices": [], "usage": usage(wire)}),
        ];
        let mut frames: Vec<Vec<u8>> = events.iter().map(sse).collect();
        frames.push(b"data: [DONE]\n\n".to_vec());
        Some(StreamScript {
            content_type: "text/event-stream".into(),
            frames,
            first_event: 1,
        })
    }

    /// Where the preset has an embeddings API.
    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        self.provider
            .preset()
            .paths
            .embeddings
            .map(|_| self as &dyn EmbeddingsWire)
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        let kind = match status {
            400 | 404 | 413 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_exceeded",
            _ => "server_error",
        };
        Reply::json(status, &(self.error_body)(kind, Value::Null, message))
    }

    fn quota_exhausted(&self, message: &str) -> Reply {
        Reply::json(
            429,
            &(self.error_body)("insufficient_quota", json!("insufficient_quota"), message),
        )
    }

    fn context_overflow(&self) -> Option<Reply> {
        Some(Reply::json(
            400,
            &(self.error_body)(
                "invalid_request_error",
                json!("context_length_exceeded"),
                "This model's maximum context length is 8192 tokens.",
            ),
        ))
    }

    /// OpenAI has no stop reason for a full window (`length` is the output limit).
    fn context_window_stop(&self) -> Option<Reply> {
        None
    }

    fn refusal(&self, wire: WireUsage) -> Option<Reply> {
        Some(Reply::json(
            200,
            &completion(
                json!({"role": "assistant", "content": null,
                       "refusal": "I can't help with that."}),
                "stop",
                wire,
            ),
        ))
    }

    /// The preset's first rate-limit headers (OpenAI's: requests).
    fn rate_limit_headers(&self, limit: u64, remaining: u64) -> Vec<(String, String)> {
        let Some(first) = self.provider.preset().rate_limits.first() else {
            return Vec::new();
        };
        vec![
            (first.limit.into(), limit.to_string()),
            (first.remaining.into(), remaining.to_string()),
        ]
    }

    fn honours_should_retry(&self) -> bool {
        true
    }
}

/// `/v1/embeddings`, at most two inputs a request (`options.embedding_batch`), the width
/// asked with `dimensions`; OpenAI's embeddings take no purpose.
impl EmbeddingsWire for OpenAiWire {
    fn model(&self, model_id: &str, base_url: &str, _: &str) -> ModelEntry {
        embeddings_entry(model_id, self.key(), "text-embedding-test", base_url)
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

    fn dimensions(&self, request: &Recorded) -> Option<u64> {
        request.json()["dimensions"].as_u64()
    }

    fn answer(&self, vectors: &[Vec<f32>], input_tokens: u64) -> Reply {
        let data: Vec<Value> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
            .collect();
        Reply::json(
            200,
            &json!({"object": "list", "data": data, "model": "text-embedding-test",
                    "usage": {"prompt_tokens": input_tokens, "total_tokens": input_tokens}}),
        )
    }
}
