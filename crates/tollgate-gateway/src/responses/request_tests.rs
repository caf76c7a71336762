//! Decoding Responses bodies: what Codex, the Agents SDK and the AI SDK send reaches the
//! neutral request, and what needs stored state is refused with the field it used.

use serde_json::json;
use tollgate::{Block, DocumentSource, ReasoningEffort, ReasoningSummary, Role, ToolChoice};

use super::{Decoded, ResponsesRequest};
use crate::error::GatewayError;

fn decode(body: serde_json::Value) -> Result<Decoded, GatewayError> {
    let request: ResponsesRequest = serde_json::from_value(body).unwrap();
    request.decode()
}

fn refusal(body: serde_json::Value) -> (String, String, String) {
    match decode(body).unwrap_err() {
        GatewayError::NotKept {
            param,
            code,
            reason,
        } => (param, code.to_owned(), reason),
        GatewayError::BadBody(message) => (String::new(), "invalid_request".into(), message),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_string_input_is_one_user_message_and_instructions_lead_as_system() {
    let d = decode(json!({"model": "m", "input": "hello", "instructions": "be brief"})).unwrap();
    let m = d.request.messages();
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].role, Role::System);
    assert_eq!(m[0].content, vec![Block::text("be brief")]);
    assert_eq!(m[1].role, Role::User);
    assert_eq!(m[1].content, vec![Block::text("hello")]);
}

#[test]
fn a_tool_round_trip_in_input_pairs_call_and_output_by_call_id() {
    let d = decode(json!({"model": "m", "input": [
        {"role": "developer", "content": "use tools"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "sunny"},
    ], "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}, "strict": true}]}))
    .unwrap();
    let m = d.request.messages();
    assert_eq!(m.len(), 4);
    assert_eq!(m[0].role, Role::System);
    match &m[2].content[0] {
        Block::ToolUse {
            id, name, input, ..
        } => {
            assert_eq!((id.as_str(), name.as_str()), ("call_9", "weather"));
            assert_eq!(input.value()["city"], "Oslo");
        }
        other => panic!("expected the call, got {other:?}"),
    }
    assert!(matches!(&m[3].content[0],
        Block::ToolResult { tool_use_id, content, .. } if tool_use_id == "call_9" && content == &vec![Block::text("sunny")]));
    let tool = &d.request.tools_schema()[0];
    assert_eq!((tool.name.as_str(), tool.strict), ("weather", Some(true)));
}

#[test]
fn tool_choice_parallel_text_format_and_reasoning_are_carried_not_dropped() {
    let d = decode(json!({"model": "m", "input": "hi",
        "tools": [{"type": "function", "name": "City", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "City"}, "parallel_tool_calls": false,
        "reasoning": {"effort": "none", "summary": "concise"},
        "text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": false}, "verbosity": "low"},
        "max_output_tokens": 300, "temperature": 0.5}))
    .unwrap();
    let p = d.request.sampling_params();
    assert_eq!(p.tool_choice(), Some(&ToolChoice::Tool("City".into())));
    assert_eq!(p.parallel_tool_calls(), Some(false));
    assert_eq!(p.reasoning().effort, Some(ReasoningEffort::None));
    assert_eq!(p.reasoning().summary, Some(ReasoningSummary::Concise));
    let shape = p.response_shape().expect("the schema is carried");
    assert_eq!((shape.name.as_str(), shape.strict), ("out", Some(false)));
    assert_eq!(p.verbosity(), Some(tollgate::Verbosity::Low));
    assert!(
        p.drops_hints(),
        "a hint the upstream has no field for is left out"
    );
    let loud = decode(json!({"model": "m", "input": "hi", "text": {"verbosity": "loud"}}));
    let Err(refused) = loud else {
        panic!("an unknown verbosity is refused");
    };
    let message = refused.to_string();
    assert!(
        message.contains("text.verbosity") && message.contains("low, medium, high"),
        "{message}"
    );
    let json_mode =
        decode(json!({"model": "m", "input": "hi", "text": {"format": {"type": "json_object"}}}))
            .unwrap();
    assert!(json_mode.request.sampling_params().json_object());
    assert!(
        json_mode
            .request
            .sampling_params()
            .response_shape()
            .is_none()
    );
    for (choice, want) in [
        ("required", ToolChoice::Required),
        ("none", ToolChoice::None),
    ] {
        let d = decode(json!({"model": "m", "input": "hi", "tool_choice": choice,
            "tools": [{"type": "function", "name": "City", "parameters": {"type": "object"}}]}))
        .unwrap();
        assert_eq!(d.request.sampling_params().tool_choice(), Some(&want));
    }
}

#[test]
fn previous_response_id_is_refused_as_previous_response_not_found() {
    let (param, code, reason) =
        refusal(json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}));
    assert_eq!(
        (param.as_str(), code.as_str()),
        ("previous_response_id", "previous_response_not_found")
    );
    assert!(
        reason.contains("resp_1") && reason.contains("input"),
        "{reason}"
    );
    let (param, code, _) = refusal(json!({"model": "m", "input": "hi", "conversation": "conv_1"}));
    assert_eq!(
        (param.as_str(), code.as_str()),
        ("conversation", "conversation_not_found")
    );
    let (param, _, reason) =
        refusal(json!({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}));
    assert_eq!(param, "input[0]");
    assert!(reason.contains("store: false"), "{reason}");
    let (param, _, _) = refusal(json!({"model": "m", "input": "hi", "background": true}));
    assert_eq!(param, "background");
}

#[test]
fn custom_tools_travel_as_one_string_argument_and_their_calls_replay() {
    let d = decode(json!({"model": "m", "input": [
        {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "done"},
    ], "tools": [{"type": "custom", "name": "apply_patch", "description": "edit files",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]}))
    .unwrap();
    assert!(d.custom_tools.contains("apply_patch"));
    let tool = &d.request.tools_schema()[0];
    assert_eq!(tool.input_schema.value()["required"], json!(["input"]));
    assert!(
        tool.description.contains("lark grammar"),
        "{}",
        tool.description
    );
    assert!(matches!(&d.request.messages()[0].content[0],
        Block::ToolUse { input, .. } if input.value()["input"] == "*** Begin Patch"));
}

#[test]
fn built_in_tools_and_their_items_are_openais_own_and_unknown_items_are_refused() {
    let d = decode(json!({"model": "m", "input": [
        {"role": "user", "content": "search"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    ], "tools": [{"type": "web_search", "external_web_access": false}]}))
    .unwrap();
    let tool = &d.request.tools_schema()[0];
    let native = tool
        .native
        .as_ref()
        .expect("a built-in tool is a native tool");
    assert_eq!(native.provider, "openai");
    assert_eq!(native.definition.value()["external_web_access"], false);
    assert!(matches!(&d.request.messages()[1].content[0],
        Block::Native { provider, value } if provider == "openai" && value.value()["id"] == "ws_1"));
    let (_, _, reason) =
        refusal(json!({"model": "m", "input": [{"type": "frobnicate", "id": "x"}]}));
    assert!(
        reason.contains("input[0].type") && reason.contains("frobnicate"),
        "{reason}"
    );
    let (_, _, reason) =
        refusal(json!({"model": "m", "input": [{"role": "robot", "content": "x"}]}));
    assert!(reason.contains("input[0].role"), "{reason}");
    let (_, _, reason) =
        refusal(json!({"model": "m", "input": "hi", "reasoning": {"effort": "huge"}}));
    assert!(
        reason.contains("reasoning.effort") && reason.contains("minimal"),
        "{reason}"
    );
}

#[test]
fn built_in_tools_get_names_of_their_own_so_two_never_clash() {
    let d = decode(json!({"model": "m", "input": "hi", "tools": [
        {"type": "function", "name": "web_search", "parameters": {"type": "object"}},
        {"type": "web_search"},
        {"type": "mcp", "server_label": "docs"},
        {"type": "mcp", "server_label": "docs"},
    ]}))
    .unwrap();
    let names: Vec<&str> = d
        .request
        .tools_schema()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["web_search", "web_search_1", "docs", "docs_3"]);
}

#[test]
fn namespace_tools_are_the_clients_own_functions_remembered_by_namespace() {
    let d = decode(json!({"model": "m", "input": "spawn one", "tools": [
        {"type": "namespace", "name": "multi_agent_v1", "description": "sub-agents", "tools": [
            {"type": "function", "name": "close_agent", "parameters": {"type": "object"}},
            {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
        ]},
    ]}))
    .unwrap();
    let names: Vec<&str> = d
        .request
        .tools_schema()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["close_agent", "spawn_agent"]);
    assert!(d.request.tools_schema().iter().all(|t| t.native.is_none()));
    assert_eq!(d.namespaces["spawn_agent"].namespace, "multi_agent_v1");
}

#[test]
fn namespaced_tools_with_one_name_are_qualified_by_their_namespace_and_replayed_so() {
    let group = |ns: &str| {
        json!({"type": "namespace", "name": ns, "tools": [
            {"type": "function", "name": "search", "parameters": {"type": "object"}}]})
    };
    let d = decode(json!({"model": "m", "tools": [group("docs"), group("web"),
            {"type": "function", "name": "open", "parameters": {"type": "object"}}],
        "input": [
            {"role": "user", "content": "find it"},
            {"type": "function_call", "call_id": "c1", "name": "search", "namespace": "web",
             "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "none"}]}))
    .unwrap();
    let names: Vec<&str> = d
        .request
        .tools_schema()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, ["docs__search", "web__search", "open"]);
    assert_eq!(d.namespaces["web__search"].namespace, "web");
    assert_eq!(d.namespaces["web__search"].name, "search");
    let replayed = d
        .request
        .messages()
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            Block::ToolUse { name, .. } => Some(name.as_str()),
            _ => None,
        });
    assert_eq!(
        replayed,
        Some("web__search"),
        "the call goes back under the name sent"
    );
}

#[test]
fn input_files_become_documents_and_a_stored_file_id_is_refused() {
    let d = decode(json!({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="},
        {"type": "input_file", "file_url": "https://example.com/b.pdf"},
    ]}]}))
    .unwrap();
    let c = &d.request.messages()[0].content;
    assert!(
        matches!(&c[0], Block::Document { source: DocumentSource::Base64 { media_type, .. }, name: Some(n), .. }
        if media_type == "application/pdf" && n == "a.pdf")
    );
    assert!(matches!(
        &c[1],
        Block::Document {
            source: DocumentSource::Url { .. },
            ..
        }
    ));
    let (_, _, reason) = refusal(json!({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_file", "file_id": "file-123"}]}]}));
    assert!(reason.contains("file-123"), "{reason}");
}

#[test]
fn a_reasoning_item_the_gateway_sealed_replays_its_signed_block() {
    let block = Block::Thinking {
        text: "think".into(),
        signature: Some("sig".into()),
        origin: Some("anthropic".into()),
        cache: None,
    };
    let sealed = super::super::envelope::seal(&block).unwrap();
    let d = decode(json!({"model": "m", "input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": sealed},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
    ]}))
    .unwrap();
    let m = d.request.messages();
    assert_eq!(m[1].role, Role::Assistant);
    assert_eq!(m[1].content, vec![block, Block::text("a")]);
    // OpenAI's own blob is kept as OpenAI's, which other providers' codecs leave out.
    let d = decode(json!({"model": "m", "input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA-openai"},
    ]}))
    .unwrap();
    assert!(matches!(&d.request.messages()[1].content[0],
        Block::Thinking { origin: Some(o), signature: Some(s), .. } if o == "openai" && s == "rs_2 gAAAA-openai"));
}

#[test]
fn a_function_tools_defer_loading_is_carried_not_dropped() {
    let d = decode(json!({"model": "m", "input": "hi", "tools": [
        {"type": "function", "name": "a", "parameters": {"type": "object"}, "defer_loading": true},
        {"type": "function", "name": "b", "parameters": {"type": "object"}}]}))
    .unwrap();
    let deferred: Vec<bool> = d
        .request
        .tools_schema()
        .iter()
        .map(|t| t.defer_loading)
        .collect();
    assert_eq!(deferred, [true, false]);
}
