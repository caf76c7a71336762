//! The provider contract kit (`tollgate-testkit`) against Cohere's v2 wire format
//! (`cohere`): `/v2/chat` answers, its SSE events, `{"message": …}` error bodies, the
//! trial rate-limit headers and `/v2/embed`.

use serde_json::{Value, json};
use tollgate::{EmbeddingPurpose, ModelEntry, ModelsBuilder};
use tollgate_cohere::CohereProvider;
use tollgate_testkit::provider::{
    EmbeddingsWire, Recorded, Reply, StreamScript, WireScript, WireToolCall, WireUsage,
    embeddings_entry,
};

struct CohereWire;

fn usage(usage: WireUsage) -> Value {
    let units = json!({"input_tokens": usage.input, "output_tokens": usage.output});
    json!({"billed_units": units, "tokens": units})
}

fn answer(message: Value, finish: &str, wire: WireUsage) -> Value {
    json!({"id": "c0ffee", "finish_reason": finish, "message": message, "usage": usage(wire)})
}

/// One SSE event as Cohere sends it: `event:` naming its type, then its data.
fn sse(data: &Value) -> Vec<u8> {
    let kind = data["type"].as_str().unwrap_or_default();
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

fn message_start() -> Value {
    json!({"type": "message-start", "id": "c0ffee", "delta": {"message": {
        "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}})
}

fn message_end(finish: &str, wire: WireUsage) -> Value {
    json!({"type": "message-end", "id": "c0ffee",
           "delta": {"finish_reason": finish, "usage": usage(wire)}})
}

fn script(events: &[Value], first_event: usize) -> StreamScript {
    StreamScript {
        content_type: "text/event-stream".into(),
        frames: events.iter().map(sse).collect(),
        first_event,
    }
}

impl WireScript for CohereWire {
    fn provider(&self) -> &'static str {
        "cohere"
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(CohereProvider)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, "cohere", "command-a-03-2025")
            .with_credential(credential)
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.bearer()
    }

    fn answer(&self, text: &str, wire: WireUsage) -> Reply {
        let message = json!({"role": "assistant", "content": [{"type": "text", "text": text}]});
        Reply::json(200, &answer(message, "COMPLETE", wire))
    }

    fn stream(&self, pieces: &[&str], wire: WireUsage) -> StreamScript {
        let mut events = vec![
            message_start(),
            json!({"type": "content-start", "index": 0,
                   "delta": {"message": {"content": {"type": "text", "text": ""}}}}),
        ];
        let first_event = events.len();
        for piece in pieces {
            events.push(json!({"type": "content-delta", "index": 0,
                               "delta": {"message": {"content": {"text": piece}}}}));
        }
        events.push(json!({"type": "content-end", "index": 0}));
        events.push(message_end("COMPLETE", wire));
        script(&events, first_event)
    }

    /// A generation that failed mid-stream: `message-end` with `finish_reason: ERROR`
    /// and the error's message.
    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        Some(sse(&json!({"type": "message-end", "id": "c0ffee",
                         "delta": {"finish_reason": "ERROR", "error": message}})))
    }

    fn tool_call(&self, text: &str, call: &WireToolCall, wire: WireUsage) -> Option<Reply> {
        let message = json!({"role": "assistant", "tool_plan": text, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.name, "arguments": call.input.to_string()}}]});
        Some(Reply::json(200, &answer(message, "TOOL_CALL", wire)))
    }

    /// The plan, then the call with its arguments' JSON text in two pieces.
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        wire: WireUsage,
    ) -> Option<StreamScript> {
        let arguments = call.input.to_string();
        let (head, tail) = arguments.split_at(arguments.len() / 2);
        let piece = |p: &str| {
            json!({"type": "tool-call-delta", "index": 0,
                   "delta": {"message": {"tool_calls": {"function": {"arguments": p}}}}})
        };
        let events = [
            message_start(),
            json!({"type": "tool-plan-delta", "delta": {"message": {"tool_plan": text}}}),
            json!({"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls":
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": ""}}}}}),
            piece(head),
            piece(tail),
            json!({"type": "tool-call-end", "index": 0}),
            message_end("TOOL_CALL", wire),
        ];
        Some(script(&events, 1))
    }

    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        Some(self)
    }

    fn error(&self, status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({"id": "e0", "message": message}))
    }

    fn quota_exhausted(&self, message: &str) -> Reply {
        Reply::json(402, &json!({"id": "e0", "message": message}))
    }

    fn context_overflow(&self) -> Option<Reply> {
        Some(Reply::json(
            400,
            &json!({"id": "e0", "message": "too many tokens: total number of tokens in the \
                    prompt cannot exceed 4081 - received 4292. Try using a shorter prompt."}),
        ))
    }

    /// Cohere has no stop reason for a full window (`MAX_TOKENS` is the output limit).
    fn context_window_stop(&self) -> Option<Reply> {
        None
    }

    /// Cohere has no refusal answer (no refusal field, no filter finish reason).
    fn refusal(&self, _: WireUsage) -> Option<Reply> {
        None
    }

    fn rate_limit_headers(&self, limit: u64, remaining: u64) -> Vec<(String, String)> {
        vec![
            ("x-trial-endpoint-call-limit".into(), limit.to_string()),
            (
                "x-trial-endpoint-call-remaining".into(),
                remaining.to_string(),
            ),
        ]
    }
}

/// `/v2/embed`, at most two texts a request (`options.embedding_batch`), the purpose as
/// `input_type`, the width as `output_dimension`.
impl EmbeddingsWire for CohereWire {
    fn model(&self, model_id: &str, base_url: &str, _: &str) -> ModelEntry {
        embeddings_entry(model_id, "cohere", "embed-v4.0", base_url)
    }

    fn max_batch(&self) -> Option<usize> {
        Some(2)
    }

    fn texts(&self, request: &Recorded) -> Vec<String> {
        request.strings("/texts")
    }

    fn purpose(&self, request: &Recorded) -> Option<EmbeddingPurpose> {
        match request.json()["input_type"].as_str() {
            Some("search_document") => Some(EmbeddingPurpose::Document),
            Some("search_query") => Some(EmbeddingPurpose::Query),
            _ => None,
        }
    }

    fn dimensions(&self, request: &Recorded) -> Option<u64> {
        request.json()["output_dimension"].as_u64()
    }

    fn answer(&self, vectors: &[Vec<f32>], input_tokens: u64) -> Reply {
        Reply::json(
            200,
            &json!({"id": "e1", "response_type": "embeddings_by_type",
                    "embeddings": {"float": vectors}, "texts": [],
                    "meta": {"api_version": {"version": "2"},
                             "billed_units": {"input_tokens": input_tokens}}}),
        )
    }
}

tollgate_testkit::provider_contract_tests!(CohereWire;
    skip {
        a_refusal_is_a_provider_refusal_costed_at_its_usage: "Cohere has no refusal answer",
        a_context_window_stop_is_typed_and_names_the_model: "Cohere has no full-window stop reason",
        x_should_retry_false_vetoes_the_retry: "Cohere sends no x-should-retry",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (Cohere has none); the overflow error is checked",
    }
);
