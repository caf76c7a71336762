//! Decoding Anthropic messages bodies: the fields real clients send reach the neutral request.

use serde_json::json;
use tollgate::{Block, CacheMark, Reasoning, ReasoningEffort, Role, Thinking, ToolChoice};

use super::MessagesRequest;

fn decode(body: serde_json::Value) -> Result<tollgate::LlmRequest, crate::error::GatewayError> {
    let request: MessagesRequest = serde_json::from_value(body).unwrap();
    request.to_llm_request()
}

#[test]
fn claude_codes_system_message_inside_messages_is_accepted_in_place() {
    let r = decode(json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
    ]}))
    .unwrap();
    assert_eq!(r.turns()[1].role, Role::System);
}

#[test]
fn tool_choice_thinking_and_effort_are_carried_not_dropped() {
    let r = decode(json!({"model": "m", "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "City", "input_schema": {"type": "object"}, "strict": true}],
        "tool_choice": {"type": "tool", "name": "City", "disable_parallel_tool_use": true},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"}}))
    .unwrap();
    let p = r.sampling_params();
    assert_eq!(p.tool_choice(), Some(&ToolChoice::Tool("City".into())));
    assert_eq!(p.parallel_tool_calls(), Some(false));
    assert_eq!(
        *p.reasoning(),
        Reasoning {
            effort: Some(ReasoningEffort::High),
            thinking: Some(Thinking::Adaptive),
            summary: None
        }
    );
    assert_eq!(r.tools_schema()[0].strict, Some(true));
}

#[test]
fn redacted_thinking_documents_and_server_tool_blocks_decode() {
    let r = decode(json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "title": "r"},
            {"type": "text", "text": "summarise"}]},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "done"}]},
        {"role": "user", "content": "more"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]}))
    .unwrap();
    assert!(matches!(r.turns()[0].content[0], Block::Document { .. }));
    assert!(
        matches!(&r.turns()[1].content[0], Block::RedactedThinking { data, .. } if data == "opaque")
    );
    assert!(
        matches!(&r.turns()[1].content[2], Block::Native { provider, .. } if provider == "anthropic")
    );
    let native = r.tools_schema()[0].native.as_ref().expect("a server tool");
    assert_eq!(native.definition.value()["max_uses"], json!(2));
    assert_eq!(
        native.definition.value()["type"],
        json!("web_search_20250305")
    );
}

#[test]
fn an_unknown_block_type_is_named_with_the_accepted_ones_not_serdes_words() {
    let err = decode(json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "hologram", "data": 1}]}]}))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("messages[0].content[0].type `hologram`"),
        "{err}"
    );
    assert!(err.contains("document"), "{err}");
    assert!(!err.contains("untagged"), "{err}");
}

#[test]
fn a_bad_tool_choice_names_the_accepted_values() {
    let err = decode(json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tool_choice": {"type": "sometimes"}}))
    .unwrap_err()
    .to_string();
    assert!(err.contains("auto, any, tool, none"), "{err}");
}

#[test]
fn a_client_tools_defer_loading_is_carried_not_dropped() {
    let r = decode(json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Read", "input_schema": {"type": "object"}, "defer_loading": true},
                  {"name": "Bash", "input_schema": {"type": "object"}}]}))
    .unwrap();
    let deferred: Vec<bool> = r.tools_schema().iter().map(|t| t.defer_loading).collect();
    assert_eq!(deferred, [true, false]);
}

#[test]
fn a_client_tools_cache_control_is_carried_not_dropped() {
    let r = decode(json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Read", "input_schema": {"type": "object"}},
                  {"name": "Bash", "input_schema": {"type": "object"},
                   "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}))
    .unwrap();
    let marks: Vec<Option<CacheMark>> = r.tools_schema().iter().map(|t| t.cache).collect();
    assert_eq!(marks, [None, Some(CacheMark::OneHour)]);
    let bad = decode(json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"},
                   "cache_control": {"ttl": 5}}]}));
    assert!(bad.is_err());
}
