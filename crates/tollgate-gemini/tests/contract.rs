//! The provider contract kit (`tollgate-testkit`) against the Gemini API wire format
//! (`gemini`). Vertex AI (`vertex`) runs the same codec and endpoint; what differs, its
//! URL and OAuth tokens, is tested in `tests/http.rs`.

use serde_json::{Value, json};
use tollgate::{ModelEntry, ModelsBuilder};
use tollgate_gemini::GeminiProvider;
use tollgate_testkit::provider::{Recorded, Reply, StreamScript, WireScript, WireUsage};

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

    fn stream_error(&self) -> Option<Vec<u8>> {
        let error =
            json!({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}});
        Some(format!("data: {error}\r\n\r\n").into_bytes())
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

tollgate_testkit::provider_contract_tests!(GeminiWire);
