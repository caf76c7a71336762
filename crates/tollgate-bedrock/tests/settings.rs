//! The request settings the neutral request carries, as `bedrock-converse` writes them
//! (against a wiremock Converse endpoint on 127.0.0.1, the sent body read back): each one
//! reaches the body in Converse's form, or the request is refused naming it, the provider
//! and the model before anything is sent.

mod common;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::{
    Block, DocumentSource, Error, Json, LlmRequest, Message, NativeTool, Reasoning,
    ReasoningEffort, ReasoningSummary, ResponseShape, Role, SamplingParams, StreamEvent, Thinking,
    ToolChoice, ToolDefinition,
};
use tollgate_bedrock::BedrockConverseProvider;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

const MODEL: &str = "claude";
const MODEL_ID: &str = "anthropic.claude-test";

async fn setup() -> Setup {
    setup_with(BedrockConverseProvider, |uri| {
        vec![entry(MODEL, "bedrock-converse", MODEL_ID, uri)]
    })
    .await
}

fn answer(content: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}}))
}

fn lookup() -> ToolDefinition {
    ToolDefinition::new(
        "lookup",
        "Looks things up",
        Json::new(json!({"type": "object"})),
    )
}

fn request(
    messages: Vec<Message>,
    tools: Vec<ToolDefinition>,
    params: SamplingParams,
) -> LlmRequest {
    LlmRequest::new(MODEL, messages, tools, params).unwrap()
}

/// The body Converse received for `request` (answered `{}`, which any shape the tests
/// ask for accepts).
async fn sent(request: &LlmRequest) -> Value {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path(format!("/model/{MODEL_ID}/converse")))
        .respond_with(answer(json!([{"text": "{}"}])))
        .expect(1)
        .mount(&s.server)
        .await;
    let chat = s.models.chat(MODEL).await.unwrap();
    chat.single_response(request).await.unwrap();
    s.server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap()
}

/// The error `request` is refused with; nothing reached Converse.
async fn refused(request: &LlmRequest) -> Error {
    let s = setup().await;
    Mock::given(method("POST"))
        .respond_with(answer(json!([{"text": "ok"}])))
        .mount(&s.server)
        .await;
    let chat = s.models.chat(MODEL).await.unwrap();
    let err = chat.single_response(request).await.unwrap_err();
    assert!(s.server.received_requests().await.unwrap().is_empty());
    err
}

fn names_setting_provider_and_model(err: &Error, setting: &str) -> bool {
    matches!(err, Error::UnsupportedSetting { feature, provider, model }
        if feature.contains(setting) && provider == "bedrock" && model == MODEL_ID)
}

fn hi() -> Vec<Message> {
    vec![Message::user("hi")]
}

#[tokio::test]
async fn tool_choice_required_and_named_reach_tool_config_as_any_and_tool() {
    let with = |choice| {
        request(
            hi(),
            vec![lookup()],
            SamplingParams::new().with_tool_choice(choice),
        )
    };
    let body = sent(&with(ToolChoice::Required)).await;
    assert_eq!(body["toolConfig"]["toolChoice"], json!({"any": {}}));
    let body = sent(&with(ToolChoice::Tool("lookup".into()))).await;
    assert_eq!(
        body["toolConfig"]["toolChoice"],
        json!({"tool": {"name": "lookup"}})
    );
    let body = sent(&with(ToolChoice::Auto)).await;
    assert!(
        body["toolConfig"].get("toolChoice").is_none(),
        "auto is Converse's default"
    );
}

#[tokio::test]
async fn tool_choice_none_sends_no_tools_and_is_refused_with_tool_history() {
    let none = SamplingParams::new().with_tool_choice(ToolChoice::None);
    let body = sent(&request(hi(), vec![lookup()], none.clone())).await;
    assert!(body.get("toolConfig").is_none(), "{body}");
    let history = vec![
        Message::user("hi"),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "t1".into(),
                name: "lookup".into(),
                input: Json::new(json!({})),
                cache: None,
            }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "t1".into(),
                content: vec![Block::text("found")],
                is_error: false,
                cache: None,
            }],
        },
    ];
    let err = refused(&request(history, vec![lookup()], none)).await;
    assert!(
        names_setting_provider_and_model(&err, "tool_choice: none"),
        "{err}"
    );
}

#[tokio::test]
async fn settings_converse_cannot_write_are_refused_naming_them() {
    let loose =
        ResponseShape::new("s", Json::new(json!({"type": "object"}))).with_strict(Some(false));
    let summary = Reasoning {
        summary: Some(ReasoningSummary::Concise),
        ..Reasoning::default()
    };
    for (params, setting) in [
        (
            SamplingParams::new().with_parallel_tool_calls(false),
            "parallel_tool_calls",
        ),
        (SamplingParams::new().with_json_object(), "json_object"),
        (SamplingParams::new().with_seed(7), "seed"),
        (
            SamplingParams::new().with_response_shape(loose),
            "strict: false",
        ),
        (
            SamplingParams::new().with_reasoning(summary).unwrap(),
            "reasoning.summary",
        ),
    ] {
        let err = refused(&request(hi(), vec![lookup()], params)).await;
        assert!(
            names_setting_provider_and_model(&err, setting),
            "{setting}: {err}"
        );
    }
}

#[tokio::test]
async fn a_thinking_budget_reaches_additional_model_request_fields() {
    let params = SamplingParams::new()
        .with_max_output_tokens(1900)
        .unwrap()
        .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 1024 }))
        .unwrap();
    let body = sent(&request(hi(), vec![], params)).await;
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})
    );
    let small = SamplingParams::new()
        .with_reasoning(Reasoning::thinking(Thinking::Budget { tokens: 100 }))
        .unwrap();
    let err = refused(&request(hi(), vec![], small)).await;
    assert!(err.to_string().contains("at least 1024"), "{err}");
}

#[tokio::test]
async fn adaptive_thinking_and_effort_reach_the_body_and_effort_none_disables_thinking() {
    let params = SamplingParams::new()
        .with_response_shape(ResponseShape::new(
            "s",
            Json::new(json!({"type": "object"})),
        ))
        .with_reasoning(Reasoning {
            effort: Some(ReasoningEffort::XHigh),
            thinking: Some(Thinking::Adaptive),
            summary: None,
        })
        .unwrap();
    let body = sent(&request(hi(), vec![], params)).await;
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "adaptive"}})
    );
    assert_eq!(body["outputConfig"]["effort"], json!("xhigh"));
    assert_eq!(
        body["outputConfig"]["textFormat"]["type"],
        json!("json_schema")
    );
    let minimal = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::Minimal))
        .unwrap();
    let body = sent(&request(hi(), vec![], minimal)).await;
    assert_eq!(body["outputConfig"], json!({"effort": "low"}));
    assert!(body.get("additionalModelRequestFields").is_none());
    let none = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::None))
        .unwrap();
    let body = sent(&request(hi(), vec![], none)).await;
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"thinking": {"type": "disabled"}})
    );
    assert!(body.get("outputConfig").is_none());
}

#[tokio::test]
async fn a_tools_strict_flag_reaches_its_tool_spec() {
    let tool = lookup().with_strict(Some(true));
    let body = sent(&request(hi(), vec![tool], SamplingParams::new())).await;
    assert_eq!(
        body["toolConfig"]["tools"][0]["toolSpec"]["strict"],
        json!(true)
    );
}

#[tokio::test]
async fn a_server_tool_of_another_provider_is_refused_not_sent_as_a_function() {
    let search = ToolDefinition {
        native: Some(NativeTool {
            provider: "anthropic".into(),
            definition: Json::new(json!({"type": "web_search_20250305", "name": "web_search"})),
        }),
        ..ToolDefinition::new("web_search", "", Json::new(json!({})))
    };
    let err = refused(&request(hi(), vec![search], SamplingParams::new())).await;
    assert!(
        names_setting_provider_and_model(&err, "web_search"),
        "{err}"
    );
}

fn document(source: DocumentSource, name: Option<&str>) -> Block {
    Block::Document {
        source,
        name: name.map(str::to_owned),
        cache: None,
    }
}

#[tokio::test]
async fn documents_go_as_document_blocks_with_names_converse_accepts() {
    let pdf = || DocumentSource::Base64 {
        media_type: "application/pdf".into(),
        data: "JVBERi0x".into(),
    };
    let content = vec![
        document(pdf(), Some("Q3_report.v2.pdf")),
        document(pdf(), Some("Q3 report v2 pdf")),
        document(
            DocumentSource::Text {
                text: "plain".into(),
            },
            None,
        ),
        document(pdf(), Some("  Résumé\t\t2026 [final].pdf ")),
        Block::text("Compare them."),
    ];
    let messages = vec![Message {
        role: Role::User,
        content,
    }];
    let body = sent(&request(messages, vec![], SamplingParams::new())).await;
    let content = &body["messages"][0]["content"];
    assert_eq!(
        content[0],
        json!({"document": {"format": "pdf", "name": "Q3-report-v2-pdf", "source": {"bytes": "JVBERi0x"}}})
    );
    assert_eq!(content[1]["document"]["name"], json!("Q3 report v2 pdf"));
    assert_eq!(
        content[2],
        json!({"document": {"format": "txt", "name": "document-3", "source": {"text": "plain"}}})
    );
    assert_eq!(
        content[3]["document"]["name"],
        json!("R-sum- 2026 [final]-pdf")
    );
    let twice = vec![Message {
        role: Role::User,
        content: vec![document(pdf(), Some("a")), document(pdf(), Some("a"))],
    }];
    let body = sent(&request(twice, vec![], SamplingParams::new())).await;
    assert_eq!(
        body["messages"][0]["content"][1]["document"]["name"],
        json!("a (2)")
    );
}

#[tokio::test]
async fn a_document_by_url_is_refused_naming_it() {
    let url = DocumentSource::Url {
        url: "https://example.com/a.pdf".into(),
    };
    let messages = vec![Message {
        role: Role::User,
        content: vec![document(url, Some("a"))],
    }];
    let err = refused(&request(messages, vec![], SamplingParams::new())).await;
    assert!(
        names_setting_provider_and_model(&err, "a document by URL"),
        "{err}"
    );
}

fn thinking(signature: &str, origin: &str) -> Block {
    Block::Thinking {
        text: format!("thought by {origin}"),
        signature: Some(signature.into()),
        origin: Some(origin.into()),
        cache: None,
    }
}

#[tokio::test]
async fn thinking_signed_by_bedrock_is_replayed_and_thinking_signed_elsewhere_is_not() {
    let redacted = |origin: &str| Block::RedactedThinking {
        data: "AAEC".into(),
        origin: Some(origin.into()),
    };
    let messages = vec![
        Message::user("hi"),
        Message {
            role: Role::Assistant,
            content: vec![
                thinking("sig-b", "bedrock"),
                thinking("sig-a", "anthropic"),
                redacted("bedrock"),
                redacted("anthropic"),
                Block::text("ok"),
            ],
        },
        Message::user("more"),
    ];
    let body = sent(&request(messages, vec![], SamplingParams::new())).await;
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"reasoningContent": {"reasoningText": {"text": "thought by bedrock", "signature": "sig-b"}}},
            {"reasoningContent": {"redactedContent": "AAEC"}},
            {"text": "ok"},
        ])
    );
}

#[tokio::test]
async fn redacted_reasoning_in_an_answer_is_kept_as_bedrocks_and_streamed_whole() {
    let s = setup().await;
    Mock::given(method("POST"))
        .and(path(format!("/model/{MODEL_ID}/converse")))
        .respond_with(answer(
            json!([{"reasoningContent": {"redactedContent": "AAEC"}},
                                     {"text": "ok"}]),
        ))
        .mount(&s.server)
        .await;
    let frames = [
        event_frame("messageStart", &json!({"role": "assistant"})),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "AAEC"}}}),
        ),
        event_frame("contentBlockStop", &json!({"contentBlockIndex": 0})),
        event_frame(
            "contentBlockDelta",
            &json!({"contentBlockIndex": 1, "delta": {"text": "ok"}}),
        ),
        event_frame("messageStop", &json!({"stopReason": "end_turn"})),
        event_frame(
            "metadata",
            &json!({"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                    "metrics": {"latencyMs": 1}}),
        ),
    ];
    Mock::given(method("POST"))
        .and(path(format!("/model/{MODEL_ID}/converse-stream")))
        .respond_with(event_stream(&frames))
        .mount(&s.server)
        .await;
    let expected = Block::RedactedThinking {
        data: "AAEC".into(),
        origin: Some("bedrock".into()),
    };
    let chat = s.models.chat(MODEL).await.unwrap();
    let reply = chat.single_response(&ask(MODEL)).await.unwrap();
    assert_eq!(reply.blocks()[0], expected);
    let mut stream = chat.stream_response(&ask(MODEL)).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    assert_eq!(
        events[0],
        StreamEvent::WholeBlock {
            index: 0,
            block: expected.clone()
        }
    );
    let Some(StreamEvent::Completed(streamed)) = events.last() else {
        panic!("no answer: {events:?}");
    };
    assert_eq!(streamed.blocks(), &[expected, Block::text("ok")][..]);
}
