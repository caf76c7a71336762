//! The request settings the neutral request carries, as the Messages API writes them:
//! each one reaches the body, or the request is refused naming it.

use serde_json::json;
use tollgate::{
    Block, DocumentSource, Error, Json, LlmRequest, Message, NativeTool, Reasoning,
    ReasoningEffort, Role, SamplingParams, Thinking, ToolChoice, ToolDefinition,
};
use tollgate_anthropic::codec::{EncodeOptions, encode_request};

fn options() -> EncodeOptions {
    EncodeOptions {
        model: Some("claude-opus-4-8".into()),
        max_tokens: 4096,
        ..EncodeOptions::default()
    }
}

fn city() -> ToolDefinition {
    ToolDefinition::new("City", "Names a city", Json::new(json!({"type": "object"})))
}

fn body(
    messages: Vec<Message>,
    params: SamplingParams,
    tools: Vec<ToolDefinition>,
) -> tollgate::Result<serde_json::Value> {
    let request = LlmRequest::new("m", messages, tools, params)?;
    encode_request(&request, &options())
}

#[test]
fn tool_choice_and_parallel_off_reach_the_body_as_anthropic_spells_them() {
    let b = body(
        vec![Message::user("hi")],
        SamplingParams::new()
            .with_tool_choice(ToolChoice::Required)
            .with_parallel_tool_calls(false),
        vec![city()],
    )
    .unwrap();
    assert_eq!(
        b["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    let b = body(
        vec![Message::user("hi")],
        SamplingParams::new().with_tool_choice(ToolChoice::Tool("City".into())),
        vec![city()],
    )
    .unwrap();
    assert_eq!(b["tool_choice"], json!({"type": "tool", "name": "City"}));
}

#[test]
fn adaptive_thinking_with_effort_and_a_budget_reach_the_body() {
    let params = SamplingParams::new()
        .with_reasoning(Reasoning {
            effort: Some(ReasoningEffort::High),
            thinking: Some(Thinking::Adaptive),
            summary: None,
        })
        .unwrap();
    let b = body(vec![Message::user("hi")], params, vec![]).unwrap();
    assert_eq!(b["thinking"], json!({"type": "adaptive"}));
    assert_eq!(b["output_config"]["effort"], json!("high"));
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 2048 }))
        .unwrap();
    let b = body(vec![Message::user("hi")], params, vec![]).unwrap();
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    let small = SamplingParams::new()
        .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 100 }))
        .unwrap();
    let err = body(vec![Message::user("hi")], small, vec![]).unwrap_err();
    assert!(err.to_string().contains("at least 1024"), "{err}");
}

#[test]
fn json_object_and_seed_are_refused_as_unsupported_not_dropped() {
    for params in [
        SamplingParams::new().with_json_object(),
        SamplingParams::new().with_seed(1),
    ] {
        let err = body(vec![Message::user("hi")], params, vec![]).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { provider, .. } if provider == "anthropic"),
            "{err}"
        );
    }
}

#[test]
fn signed_thinking_goes_back_with_its_signature_and_foreign_thinking_is_left_out() {
    let own = Block::Thinking {
        text: "t".into(),
        signature: Some("sig".into()),
        origin: Some("anthropic".into()),
        cache: None,
    };
    let foreign = Block::Thinking {
        text: "o".into(),
        signature: Some("enc".into()),
        origin: Some("openai".into()),
        cache: None,
    };
    let redacted = Block::RedactedThinking {
        data: "opaque".into(),
        origin: None,
    };
    let messages = vec![
        Message::user("hi"),
        Message {
            role: Role::Assistant,
            content: vec![own, foreign, redacted, Block::text("ok")],
        },
        Message::user("more"),
    ];
    let b = body(messages, SamplingParams::new(), vec![]).unwrap();
    let content = &b["messages"][1]["content"];
    assert_eq!(
        content[0],
        json!({"type": "thinking", "thinking": "t", "signature": "sig"})
    );
    assert_eq!(
        content[1],
        json!({"type": "redacted_thinking", "data": "opaque"})
    );
    assert_eq!(content[2]["type"], json!("text"));
    assert_eq!(content.as_array().unwrap().len(), 3);
}

#[test]
fn documents_reach_the_body_as_document_blocks() {
    let pdf = Block::Document {
        source: DocumentSource::Url {
            url: "https://example.com/a.pdf".into(),
        },
        name: Some("A".into()),
        cache: None,
    };
    let text = Block::Document {
        source: DocumentSource::Text {
            text: "plain".into(),
        },
        name: None,
        cache: None,
    };
    let b = body(
        vec![Message {
            role: Role::User,
            content: vec![pdf, text],
        }],
        SamplingParams::new(),
        vec![],
    )
    .unwrap();
    assert_eq!(
        b["messages"][0]["content"][0],
        json!({"type": "document", "title": "A", "source": {"type": "url", "url": "https://example.com/a.pdf"}})
    );
    assert_eq!(
        b["messages"][0]["content"][1]["source"],
        json!({"type": "text", "media_type": "text/plain", "data": "plain"})
    );
}

#[test]
fn a_server_tool_passes_through_as_anthropic_defines_it() {
    let search = ToolDefinition {
        native: Some(NativeTool {
            provider: "anthropic".into(),
            definition: Json::new(
                json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2}),
            ),
        }),
        ..ToolDefinition::new("web_search", "", Json::new(json!({})))
    };
    let b = body(
        vec![Message::user("hi")],
        SamplingParams::new(),
        vec![search],
    )
    .unwrap();
    assert_eq!(
        b["tools"][0],
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2})
    );
}

#[test]
fn a_later_system_message_is_folded_into_the_user_turn_not_a_panic() {
    let messages = vec![
        Message::user("hi"),
        Message::system("# Environment"),
        Message::assistant("ok"),
        Message::user("go"),
    ];
    let b = body(messages, SamplingParams::new(), vec![]).unwrap();
    let first = b["messages"][0]["content"].to_string();
    assert!(first.contains("<system-reminder>"), "{first}");
    assert_eq!(b["messages"].as_array().unwrap().len(), 3);
}

#[test]
fn a_later_system_message_passes_through_in_place_where_the_model_takes_it() {
    let messages = vec![
        Message::system("Be brief."),
        Message::user("hi"),
        Message::system("# Environment"),
        Message::assistant("ok"),
    ];
    let request = LlmRequest::new("m", messages, vec![], SamplingParams::new()).unwrap();
    let passing = EncodeOptions {
        mid_conversation_system: true,
        ..options()
    };
    let b = encode_request(&request, &passing).unwrap();
    assert_eq!(b["system"][0]["text"], "Be brief.");
    let turns = b["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{turns:?}");
    assert_eq!(turns[1]["role"], "system");
    assert_eq!(turns[1]["content"][0]["text"], "# Environment");
    assert!(!b.to_string().contains("<system-reminder>"));
    // The catalog option that says the model takes them.
    let entry = tollgate::ModelEntry::new("m", "anthropic-direct", "claude-opus-5-5")
        .with_option("mid_conversation_system", true);
    let read = tollgate_anthropic::AnthropicOptions::from_model(&entry).unwrap();
    assert!(read.mid_conversation_system);
    let default = tollgate::ModelEntry::new("m", "anthropic-direct", "claude-sonnet-4-5");
    assert!(
        !tollgate_anthropic::AnthropicOptions::from_model(&default)
            .unwrap()
            .mid_conversation_system
    );
}

#[test]
fn thinking_display_omitted_reaches_the_body_and_a_concise_summary_is_refused() {
    let params = SamplingParams::new()
        .with_reasoning(Reasoning {
            thinking: Some(Thinking::Adaptive),
            summary: Some(tollgate::ReasoningSummary::Omitted),
            effort: None,
        })
        .unwrap();
    let b = body(vec![Message::user("hi")], params, vec![]).unwrap();
    assert_eq!(
        b["thinking"],
        json!({"type": "adaptive", "display": "omitted"})
    );
    let concise = SamplingParams::new()
        .with_reasoning(Reasoning {
            summary: Some(tollgate::ReasoningSummary::Concise),
            ..Reasoning::default()
        })
        .unwrap();
    let err = body(vec![Message::user("hi")], concise, vec![]).unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedSetting { feature, .. } if feature.contains("concise")),
        "{err:?}"
    );
}

#[test]
fn a_deferred_tool_is_sent_with_defer_loading_and_a_loaded_one_without() {
    let b = body(
        vec![Message::new(Role::User, "hi")],
        SamplingParams::new(),
        vec![
            city().with_defer_loading(true),
            ToolDefinition::new("Other", "", Json::new(json!({"type": "object"}))),
        ],
    )
    .unwrap();
    assert_eq!(b["tools"][0]["defer_loading"], json!(true), "{b}");
    assert!(b["tools"][1].get("defer_loading").is_none(), "{b}");
}
