//! The provider contract kit (`tollgate-testkit`) against the Gemini API wire format
//! (`gemini`). Vertex AI (`vertex`) runs the same codec and endpoint; what differs, its
//! URL and OAuth tokens, is tested in `tests/http.rs`.

use serde_json::{Value, json};
use tollgate::{EmbeddingPurpose, ModelEntry, ModelsBuilder};
use tollgate_gemini::GeminiProvider;
use tollgate_testkit::provider::{
    EmbeddingsWire, Recorded, Reply, StreamScript, WireScript, WireToolCall, WireUsage,
    embeddings_entry,
};

struct GeminiWire;

fn usage(usage: WireUsage) -> Value {
    json!({"promptTokenCount": usage.input, "candidatesTokenCount": usage.output,
           "totalTokenCount": usage.input + usage.output})
}

fn response(text: &str, finish: Option<&str>, wire: Option<WireUsage>) -> Value {
    let mut candidate =
        json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    let mut body = json!({"candidates": [candidate], "modelVersion": "gemini-test"});
    if let Some(wire) = wire {
        body["usageMetadata"] = usage(wire);
    }
    body
}

/// The canonical code name Google gives each status.
fn status_name(status: u16) -> &'static str {
    match status {
        400 | 413 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        429 => "RESOURCE_EXHAUSTED",
        503 | 529 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

fn status(code: u16, message: &str, details: Value) -> Reply {
    Reply::json(
        code,
        &json!({"error": {"code": code, "message": message, "status": status_name(code),
                          "details": details}}),
    )
}

fn function_call(call: &WireToolCall) -> Value {
    json!({"functionCall": {"id": call.id, "name": call.name, "args": call.input}})
}

impl WireScript for GeminiWire {
    fn provider(&self) -> &'static str {
        "gemini"
    }

    fn register(&self, models: ModelsBuilder) -> ModelsBuilder {
        models.provider(GeminiProvider::GEMINI)
    }

    fn chat_model(&self, model_id: &str, base_url: &str, credential: &str) -> ModelEntry {
        ModelEntry::new(model_id, "gemini", "gemini-test")
            .with_credential(credential)
            .with_option("base_url", base_url)
    }

    fn sent_identity(&self, request: &Recorded) -> Option<String> {
        request.header("x-goog-api-key").map(str::to_owned)
    }

    fn answer(&self, text: &str, wire: WireUsage) -> Reply {
        Reply::json(200, &response(text, Some("STOP"), Some(wire)))
    }

    /// Each event a whole response; the last carries the finish reason and the usage.
    fn stream(&self, pieces: &[&str], wire: WireUsage) -> StreamScript {
        let last = pieces.len().saturating_sub(1);
        let frames = pieces
            .iter()
            .enumerate()
            .map(|(i, piece)| {
                let end = i == last;
                let chunk = response(piece, end.then_some("STOP"), end.then_some(wire));
                format!("data: {chunk}\r\n\r\n").into_bytes()
            })
            .collect();
        StreamScript {
            content_type: "text/event-stream".into(),
            frames,
            first_event: 0,
        }
    }

    fn stream_error_saying(&self, message: &str) -> Option<Vec<u8>> {
        let error = json!({"error": {"code": 500, "message": message, "status": "INTERNAL"}});
        Some(format!("data: {error}\r\n\r\n").into_bytes())
    }

    /// A text part, then a `functionCall` part; Gemini ends a call with `STOP`.
    fn tool_call(&self, text: &str, call: &WireToolCall, wire: WireUsage) -> Option<Reply> {
        let mut body = response(text, Some("STOP"), Some(wire));
        body["candidates"][0]["content"]["parts"]
            .as_array_mut()?
            .push(function_call(call));
        Some(Reply::json(200, &body))
    }

    /// The text in one chunk, the whole call in the last (Gemini never splits a call).
    fn tool_call_stream(
        &self,
        text: &str,
        call: &WireToolCall,
        wire: WireUsage,
    ) -> Option<StreamScript> {
        let mut last = response("", Some("STOP"), Some(wire));
        last["candidates"][0]["content"]["parts"] = json!([function_call(call)]);
        let frames = [response(text, None, None), last]
            .iter()
            .map(|chunk| format!("data: {chunk}\r\n\r\n").into_bytes())
            .collect();
        Some(StreamScript {
            content_type: "text/event-stream".into(),
            frames,
            first_event: 0,
        })
    }

    fn embeddings(&self) -> Option<&dyn EmbeddingsWire> {
        Some(self)
    }

    fn error(&self, code: u16, message: &str) -> Reply {
        status(code, message, json!([]))
    }

    /// A per-day quota: waiting a minute will not help.
    fn quota_exhausted(&self, message: &str) -> Reply {
        status(
            429,
            message,
            json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]),
        )
    }

    /// A 400 `INVALID_ARGUMENT` whose only sign is its wording.
    fn context_overflow(&self) -> Option<Reply> {
        Some(status(
            400,
            "The input token count (1200293) exceeds the maximum number of tokens allowed \
             (1048576).",
            json!([]),
        ))
    }

    /// Gemini has no finish reason for a full window.
    fn context_window_stop(&self) -> Option<Reply> {
        None
    }

    fn refusal(&self, wire: WireUsage) -> Option<Reply> {
        Some(Reply::json(200, &response("", Some("SAFETY"), Some(wire))))
    }

    /// The Gemini API sends no rate-limit headers; a gateway or mock in front of it
    /// (llmock does) may send OpenAI's, which the codec reads when present.
    fn rate_limit_headers(&self, limit: u64, remaining: u64) -> Vec<(String, String)> {
        vec![
            ("x-ratelimit-limit-requests".into(), limit.to_string()),
            (
                "x-ratelimit-remaining-requests".into(),
                remaining.to_string(),
            ),
        ]
    }
}

/// `batchEmbedContents`, two texts a request (`options.embedding_batch`), each with its
/// `taskType` and `outputDimensionality`; the answer reports no usage.
impl EmbeddingsWire for GeminiWire {
    fn model(&self, model_id: &str, base_url: &str, _: &str) -> ModelEntry {
        embeddings_entry(model_id, "gemini", "gemini-embedding-test", base_url)
    }

    fn max_batch(&self) -> Option<usize> {
        Some(2)
    }

    fn texts(&self, request: &Recorded) -> Vec<String> {
        let body = request.json();
        let requests = body["requests"].as_array().cloned().unwrap_or_default();
        requests
            .iter()
            .filter_map(|r| r["content"]["parts"][0]["text"].as_str().map(str::to_owned))
            .collect()
    }

    fn purpose(&self, request: &Recorded) -> Option<EmbeddingPurpose> {
        match request.json()["requests"][0]["taskType"].as_str()? {
            "RETRIEVAL_QUERY" => Some(EmbeddingPurpose::Query),
            "RETRIEVAL_DOCUMENT" => Some(EmbeddingPurpose::Document),
            _ => None,
        }
    }

    fn dimensions(&self, request: &Recorded) -> Option<u64> {
        request.json()["requests"][0]["outputDimensionality"].as_u64()
    }

    fn answer(&self, vectors: &[Vec<f32>], _: u64) -> Reply {
        let embeddings: Vec<Value> = vectors.iter().map(|v| json!({"values": v})).collect();
        Reply::json(200, &json!({ "embeddings": embeddings }))
    }

    fn reports_usage(&self) -> bool {
        false
    }
}

tollgate_testkit::provider_contract_tests!(GeminiWire;
    skip {
        a_context_window_stop_is_typed_and_names_the_model: "Gemini has no full-window stop reason",
        x_should_retry_false_vetoes_the_retry: "Gemini sends no x-should-retry",
    }
    partly {
        a_reported_overflow_moves_to_a_larger_window_when_opted_in:
            "the full-window stop (Gemini has none); the overflow error is checked",
    }
);
