//! The request settings the neutral request carries, as `generateContent` writes them:
//! each one reaches the body, or the request is refused naming it.

use serde_json::json;
use tollgate::{
    Block, DocumentSource, Error, Json, LlmRequest, Message, Reasoning, ReasoningEffort, Role,
    SamplingParams, Thinking, ToolChoice, ToolDefinition,
};
use tollgate_gemini::codec::{EncodeOptions, encode_request};

fn body(
    content: Vec<Block>,
    params: SamplingParams,
    tools: Vec<ToolDefinition>,
) -> tollgate::Result<serde_json::Value> {
    let request = LlmRequest::new(
        "m",
        vec![Message {
            role: Role::User,
            content,
        }],
        tools,
        params,
    )?;
    let options = EncodeOptions {
        model: "gemini-2.5-pro".into(),
        ..EncodeOptions::default()
    };
    encode_request(&request, &options)
}

fn hi() -> Vec<Block> {
    vec![Block::text("hi")]
}

#[test]
fn a_requests_tool_choice_reaches_tool_config() {
    let tool = ToolDefinition::new("City", "", Json::new(json!({"type": "object"})));
    let b = body(
        hi(),
        SamplingParams::new().with_tool_choice(ToolChoice::Tool("City".into())),
        vec![tool],
    )
    .unwrap();
    assert_eq!(
        b["toolConfig"]["functionCallingConfig"],
        json!({"mode": "ANY", "allowedFunctionNames": ["City"]})
    );
}

#[test]
fn json_object_seed_and_a_thinking_budget_reach_generation_config() {
    let params = SamplingParams::new()
        .with_json_object()
        .with_seed(9)
        .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 512 }))
        .unwrap();
    let b = body(hi(), params, vec![]).unwrap();
    let config = &b["generationConfig"];
    assert_eq!(config["responseMimeType"], json!("application/json"));
    assert!(config.get("responseJsonSchema").is_none());
    assert_eq!(config["seed"], json!(9));
    assert_eq!(config["thinkingConfig"]["thinkingBudget"], json!(512));
}

#[test]
fn parallel_calls_off_and_an_effort_above_high_are_refused_as_unsupported() {
    for params in [
        SamplingParams::new().with_parallel_tool_calls(false),
        SamplingParams::new()
            .with_reasoning(Reasoning::effort(ReasoningEffort::XHigh))
            .unwrap(),
    ] {
        let err = body(hi(), params, vec![]).unwrap_err();
        assert!(
            matches!(&err, Error::UnsupportedSetting { provider, model, .. } if provider == "gemini" && model == "gemini-2.5-pro"),
            "{err}"
        );
    }
}

#[test]
fn an_effort_level_is_the_thinking_level_and_effort_none_is_thinking_off() {
    let effort = |e| {
        let params = SamplingParams::new()
            .with_reasoning(Reasoning::effort(e))
            .unwrap();
        body(hi(), params, vec![]).unwrap()["generationConfig"]["thinkingConfig"].clone()
    };
    assert_eq!(
        effort(ReasoningEffort::Low),
        json!({"thinkingLevel": "LOW"})
    );
    assert_eq!(
        effort(ReasoningEffort::High),
        json!({"thinkingLevel": "HIGH"})
    );
    assert_eq!(
        effort(ReasoningEffort::Minimal),
        json!({"thinkingLevel": "MINIMAL"})
    );
    assert_eq!(effort(ReasoningEffort::None), json!({"thinkingBudget": 0}));
}

#[test]
fn a_pdf_is_inline_data() {
    let pdf = Block::Document {
        source: DocumentSource::Base64 {
            media_type: "application/pdf".into(),
            data: "JVBERi0=".into(),
        },
        name: None,
        cache: None,
    };
    let b = body(vec![pdf], SamplingParams::new(), vec![]).unwrap();
    assert_eq!(
        b["contents"][0]["parts"][0],
        json!({"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}})
    );
}
