//! A chat-completions body read outside the gateway's handlers (`tollgate run`'s Batch API
//! lines).

/// A chat-completions body (`POST /v1/chat/completions`) as the gateway reads it, for
/// catalog model `model_id` (the body's own `model` is ignored): every field the gateway
/// carries (tools, tool choice, images, response format, reasoning...) reaches the
/// request, and a field it cannot carry is refused, not dropped. Also says whether the
/// body asked for a stream. `tollgate run` reads its Batch API lines with it.
pub fn decode_openai_chat(
    body: &serde_json::Value,
    model_id: &str,
) -> Result<(tollgate::LlmRequest, bool), String> {
    let mut body = body.clone();
    if let Some(obj) = body.as_object_mut() {
        obj.insert("model".into(), model_id.into());
    }
    let request: super::request::ChatRequest =
        serde_json::from_value(body).map_err(|e| format!("the body is not a chat request: {e}"))?;
    let stream = request.stream;
    // Not the gateway's answering: a cut-off answer, a refusal, a missed shape and a
    // setting the provider cannot write are the caller's typed failures.
    request
        .llm_request(tollgate::SamplingParams::new())
        .map(|r| (r, stream))
        .map_err(|e| match e {
            crate::error::GatewayError::BadBody(reason) => reason,
            other => other.to_string(),
        })
}
