//! Decoding chat-completion bodies: the fields real clients send reach the neutral request.

use serde_json::json;
use tollgate::{Block, ReasoningEffort, ToolChoice};

use super::ChatRequest;

fn decode(body: serde_json::Value) -> Result<tollgate::LlmRequest, crate::error::GatewayError> {
    let request: ChatRequest = serde_json::from_value(body).unwrap();
    request.to_llm_request()
}

#[test]
fn tool_choice_parallel_effort_seed_and_strict_are_carried_not_dropped() {
    let r = decode(json!({"model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "City", "parameters": {"type": "object"}, "strict": false}}],
        "tool_choice": {"type": "function", "function": {"name": "City"}},
        "parallel_tool_calls": false, "reasoning_effort": "minimal", "seed": 5,
        "verbosity": "high"}))
    .unwrap();
    let p = r.sampling_params();
    assert_eq!(p.tool_choice(), Some(&ToolChoice::Tool("City".into())));
    assert_eq!(p.parallel_tool_calls(), Some(false));
    assert_eq!(p.reasoning().effort, Some(ReasoningEffort::Minimal));
    assert_eq!(p.seed(), Some(5));
    assert_eq!(p.verbosity(), Some(tollgate::Verbosity::High));
    assert_eq!(r.tools_schema()[0].strict, Some(false));
    let required = decode(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "City", "parameters": {"type": "object"}}}]})).unwrap();
    assert_eq!(
        required.sampling_params().tool_choice(),
        Some(&ToolChoice::Required)
    );
}

#[test]
fn json_object_is_json_mode_not_a_schema() {
    let r = decode(
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_object"}}),
    )
    .unwrap();
    assert!(r.sampling_params().json_object());
    assert!(r.sampling_params().response_shape().is_none());
}

#[test]
fn a_pdf_file_part_is_a_document_and_a_file_id_is_refused_naming_it() {
    let r = decode(json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "part-1.pdf"}}]}]}))
    .unwrap();
    assert!(
        matches!(&r.turns()[0].content[0], Block::Document { name: Some(n), .. } if n == "part-1.pdf")
    );
    let err = decode(
        json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "file", "file": {"file_id": "file-abc"}}]}]}),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("file-abc"), "{err}");
}

#[test]
fn a_bad_reasoning_effort_names_the_accepted_values() {
    let err = decode(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "extreme"}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("none, minimal, low"), "{err}");
}
