//! The request settings the neutral request carries, as Chat Completions writes them:
//! each one reaches the body, or the request is refused naming it.

use serde_json::json;
use tollgate::{
    Block, DocumentSource, Error, Json, LlmRequest, Message, Reasoning, ReasoningEffort,
    ResponseShape, Role, SamplingParams, Thinking, ToolChoice, ToolDefinition, Verbosity,
};
use tollgate_openai::OutputLimitField;
use tollgate_openai::codec::{EncodeOptions, encode_request};

fn options() -> EncodeOptions {
    EncodeOptions {
        max_tokens: Some(100),
        stream_usage: true,
        ..EncodeOptions::new("gpt-4o", OutputLimitField::MaxCompletionTokens)
    }
}

fn city() -> ToolDefinition {
    ToolDefinition::new(
        "City",
        "Names a city",
        Json::new(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
    )
}

fn body(params: SamplingParams, tools: Vec<ToolDefinition>) -> tollgate::Result<serde_json::Value> {
    let request = LlmRequest::new("m", vec![Message::user("hi")], tools, params)?;
    encode_request(&request, &options())
}

#[test]
fn a_requests_tool_choice_overrides_the_catalogs_and_reaches_the_body() {
    let named = body(
        SamplingParams::new().with_tool_choice(ToolChoice::Tool("City".into())),
        vec![city()],
    )
    .unwrap();
    assert_eq!(
        named["tool_choice"],
        json!({"type": "function", "function": {"name": "City"}})
    );
    let required = body(
        SamplingParams::new().with_tool_choice(ToolChoice::Required),
        vec![city()],
    )
    .unwrap();
    assert_eq!(required["tool_choice"], json!("required"));
    let auto = body(
        SamplingParams::new().with_tool_choice(ToolChoice::Auto),
        vec![city()],
    )
    .unwrap();
    assert_eq!(auto["tool_choice"], json!("auto"));
}

#[test]
fn a_forced_tool_choice_without_tools_is_refused_naming_the_field() {
    let err = body(
        SamplingParams::new().with_tool_choice(ToolChoice::Required),
        vec![],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("sampling_params.tool_choice"),
        "{err}"
    );
}

#[test]
fn parallel_tool_calls_reaches_the_body() {
    let b = body(
        SamplingParams::new().with_parallel_tool_calls(false),
        vec![city()],
    )
    .unwrap();
    assert_eq!(b["parallel_tool_calls"], json!(false));
}

#[test]
fn reasoning_effort_and_seed_reach_the_body() {
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::XHigh))
        .unwrap()
        .with_seed(42);
    let b = body(params, vec![]).unwrap();
    assert_eq!(b["reasoning_effort"], json!("xhigh"));
    assert_eq!(b["seed"], json!(42));
}

#[test]
fn verbosity_reaches_the_body_as_a_top_level_field() {
    let b = body(
        SamplingParams::new().with_verbosity(Verbosity::High),
        vec![],
    )
    .unwrap();
    assert_eq!(b["verbosity"], json!("high"));
    assert!(
        body(SamplingParams::new(), vec![])
            .unwrap()
            .get("verbosity")
            .is_none()
    );
}

#[test]
fn a_thinking_budget_is_refused_as_unsupported_not_dropped() {
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 2048 }))
        .unwrap();
    let err = body(params, vec![]).unwrap_err();
    assert!(
        matches!(&err, Error::UnsupportedSetting { provider, model, .. } if provider == "openai" && model == "gpt-4o"),
        "{err}"
    );
}

#[test]
fn json_object_stays_json_object_and_never_becomes_a_schema() {
    let b = body(SamplingParams::new().with_json_object(), vec![]).unwrap();
    assert_eq!(b["response_format"], json!({"type": "json_object"}));
}

#[test]
fn a_shapes_strict_is_sent_as_the_caller_says() {
    let schema = Json::new(json!({"type": "object"}));
    let loose = body(
        SamplingParams::new()
            .with_response_shape(ResponseShape::new("s", schema.clone()).with_strict(Some(false))),
        vec![],
    )
    .unwrap();
    assert_eq!(
        loose["response_format"]["json_schema"]["strict"],
        json!(false)
    );
    let unsaid = body(
        SamplingParams::new()
            .with_response_shape(ResponseShape::new("s", schema).with_strict(None)),
        vec![],
    )
    .unwrap();
    assert!(
        unsaid["response_format"]["json_schema"]
            .get("strict")
            .is_none()
    );
}

#[test]
fn a_tools_own_strict_reaches_the_body_and_is_absent_when_unsaid() {
    let b = body(SamplingParams::new(), vec![city().with_strict(Some(true))]).unwrap();
    assert_eq!(b["tools"][0]["function"]["strict"], json!(true));
    let b = body(SamplingParams::new(), vec![city()]).unwrap();
    assert!(b["tools"][0]["function"].get("strict").is_none());
}

#[test]
fn a_pdf_document_is_a_file_part_and_a_pdf_by_url_is_refused() {
    let pdf = Block::Document {
        source: DocumentSource::Base64 {
            media_type: "application/pdf".into(),
            data: "JVBERi0=".into(),
        },
        name: Some("report.pdf".into()),
        cache: None,
    };
    let request = LlmRequest::new(
        "m",
        vec![Message {
            role: Role::User,
            content: vec![pdf, Block::text("summarise")],
        }],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let b = encode_request(&request, &options()).unwrap();
    assert_eq!(
        b["messages"][0]["content"][0],
        json!({"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "report.pdf"}})
    );
    let by_url = Block::Document {
        source: DocumentSource::Url {
            url: "https://example.com/a.pdf".into(),
        },
        name: None,
        cache: None,
    };
    let request = LlmRequest::new(
        "m",
        vec![Message {
            role: Role::User,
            content: vec![by_url],
        }],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let err = encode_request(&request, &options()).unwrap_err();
    assert!(err.to_string().contains("by URL"), "{err}");
}

#[test]
fn a_later_system_message_stays_in_place() {
    let request = LlmRequest::new(
        "m",
        vec![
            Message::user("hi"),
            Message::system("# Environment"),
            Message::assistant("ok"),
        ],
        vec![],
        SamplingParams::new(),
    )
    .unwrap();
    let b = encode_request(&request, &options()).unwrap();
    assert_eq!(b["messages"][1]["role"], json!("system"));
}
