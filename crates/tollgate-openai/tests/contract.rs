//! The provider contract kit (`tollgate-testkit`) against the OpenAI Chat Completions
//! wire format, for both keys: `openai` and `openai-compatible`.

use serde_json::{Value, json};
use tollgate::{ModelEntry, ModelsBuilder};
use tollgate_openai::OpenAiProvider;
use tollgate_testkit::provider::{Recorded, Reply, StreamScript, WireScript, WireUsage};

/// The wire format under one provider key.
struct OpenAiWire {
    key: &'static str,
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

fn error_body(kind: &str, code: Value, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

impl WireScript for OpenAiWire {
    fn provider(&self) -> &'static str {
        self.key
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models
            .provider(OpenAiProvider::OPENAI)
            .provider(OpenAiProvider::COMPATIBLE)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, self.key, "gpt-test")
            .with_credential(credential)
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned)
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

    fn stream_error(&self) -> Option<Vec<u8>> {
        Some(sse(&error_body(
            "server_error",
            Value::Null,
            "The server had an error",
        )))
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        let kind = match status {
            400 | 404 | 413 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_exceeded",
            _ => "server_error",
        };
        Reply::json(status, &error_body(kind, Value::Null, message))
    }

    fn quota_exhausted(&self, message: &str) -> Reply {
        Reply::json(
            429,
            &error_body("insufficient_quota", json!("insufficient_quota"), message),
        )
    }

    fn context_overflow(&self) -> Option<Reply> {
        Some(Reply::json(
            400,
            &error_body(
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

    fn rate_limit_headers(&self, limit: u64, remaining: u64) -> Vec<(String, String)> {
        vec![
            ("x-ratelimit-limit-requests".into(), limit.to_string()),
            (
                "x-ratelimit-remaining-requests".into(),
                remaining.to_string(),
            ),
        ]
    }

    fn honours_should_retry(&self) -> bool {
        true
    }
}

mod openai {
    tollgate_testkit::provider_contract_tests!(super::OpenAiWire { key: "openai" });
}

mod openai_compatible {
    tollgate_testkit::provider_contract_tests!(super::OpenAiWire {
        key: "openai-compatible"
    });
}
