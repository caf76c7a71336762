//! The provider contract kit (`tollgate-testkit`) against the Anthropic Messages wire
//! format: every behaviour the providers share, on a scripted server on 127.0.0.1.

use serde_json::{Value, json};
use tollgate::{ModelEntry, ModelsBuilder};
use tollgate_anthropic::AnthropicProvider;
use tollgate_testkit::provider::{
    Recorded, Reply, StreamScript, WireScript, WireToolCall, WireUsage,
};

struct AnthropicWire;

fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        408 => "timeout_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

fn message(text: &str, stop: &str, usage: WireUsage) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
           "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": usage.input, "output_tokens": usage.output,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
}

fn sse(event: &Value) -> Vec<u8> {
    format!(
        "event: {}\ndata: {event}\n\n",
        event["type"].as_str().unwrap_or("error")
    )
    .into_bytes()
}

impl WireScript for AnthropicWire {
    fn provider(&self) -> &'static str {
        "anthropic-direct"
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(AnthropicProvider)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, "anthropic-direct", "claude-test")
            .with_credential(credential)
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.header("x-api-key").map(str::to_owned)
    }

    fn answer(&self, text: &str, usage: WireUsage) -> Reply {
        Reply::json(200, &message(text, "end_turn", usage))
    }

    fn stream(&self, pieces: &[&str], usage: WireUsage) -> StreamScript {
        let mut events = vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": usage.input, "output_tokens": 1}}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ];
        let first_event = events.len();
        for piece in pieces {
            events.push(json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 0}));
        events.push(json!({"type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": usage.output}}));
        events.push(json!({"type": "message_stop"}));
        StreamScript {
            content_type: "text/event-stream".into(),
            frames: events.iter().map(sse).collect(),
            first_event,
        }
    }

    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        Some(sse(
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        ))
    }

    fn tool_call(&self, text: &str, call: &WireToolCall, usage: WireUsage) -> Option<Reply> {
        let mut answer = message(text, "tool_use", usage);
        answer["content"].as_array_mut()?.push(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}),
        );
        Some(Reply::json(200, &answer))
    }

    /// Text in block 0, the call in block 1, its input as `input_json_delta` pieces.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        usage: WireUsage,
    ) -> Option<StreamScript> {
        let input = call.input.to_string();
        let (head, tail) = input.split_at(input.len() / 2);
        let piece = |p: &str| {
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": p}})
        };
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": usage.input, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": text}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block":
                   {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
            piece(head),
            piece(tail),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta",
                   "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"output_tokens": usage.output}}),
            json!({"type": "message_stop"}),
        ];
        Some(StreamScript {
            content_type: "text/event-stream".into(),
            frames: events.iter().map(sse).collect(),
            first_event: 2,
        })
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            &json!({"type": "error", "error": {"type": error_type(status), "message": message},
                    "request_id": "req_1"}),
        )
    }

    fn quota_exhausted(&self, message: &str) -> Reply {
        Reply::json(
            402,
            &json!({"type": "error", "error": {"type": "billing_error", "message": message}}),
        )
    }

    fn context_overflow(&self) -> Option<Reply> {
        Some(self.error(400, "prompt is too long: 215000 tokens > 200000 maximum"))
    }

    fn context_window_stop(&self) -> Option<Reply> {
        Some(Reply::json(
            200,
            &message(
                "cut",
                "model_context_window_exceeded",
                WireUsage {
                    input: 12,
                    output: 1,
                },
            ),
        ))
    }

    fn refusal(&self, usage: WireUsage) -> Option<Reply> {
        let mut body = message("", "refusal", usage);
        body["stop_details"] =
            json!({"type": "refusal", "category": "cyber", "explanation": "No."});
        Some(Reply::json(200, &body))
    }

    fn rate_limit_headers(&self, limit: u64, remaining: u64) -> Vec<(String, String)> {
        vec![
            (
                "anthropic-ratelimit-requests-limit".into(),
                limit.to_string(),
            ),
            (
                "anthropic-ratelimit-requests-remaining".into(),
                remaining.to_string(),
            ),
        ]
    }

    fn honours_should_retry(&self) -> bool {
        true
    }
}

tollgate_testkit::provider_contract_tests!(AnthropicWire;
    skip {
        embeddings_are_sent_in_batches_of_max_batch_one_reservation_each: "Anthropic serves no embeddings",
        a_failed_embeddings_request_is_resent_alone: "Anthropic serves no embeddings",
        an_embeddings_request_carries_the_purpose_and_the_width: "Anthropic serves no embeddings",
        the_secret_never_shows_in_embeddings_errors: "Anthropic serves no embeddings",
    }
);
