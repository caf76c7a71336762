//! Request settings: each one the neutral request can carry (tools, a response shape,
//! tool choice, parallel
//! calls, reasoning effort, thinking mode and budget, summary, JSON mode, a loose schema,
//! a tool's `strict`, seed, a PDF document) is written into what the provider is sent,
//! or the call fails with [`Error::UnsupportedSetting`] (for content the format cannot
//! carry, [`Error::InvalidRequest`] naming the field) before anything is sent. A body
//! identical to the same request's without the setting is the silent drop this forbids.

use serde_json::json;
use tollgate::{
    Block, DocumentSource, Error, Json, LlmRequest, Message, Reasoning, ReasoningEffort,
    ReasoningSummary, ResponseShape, Role, SamplingParams, Thinking, ToolChoice, ToolDefinition,
    Verbosity,
};

use super::super::harness::{Kit, MODEL, USAGE};
use super::super::outcome::Checked;
use super::super::script::WireScript;

fn tool(strict: Option<bool>) -> ToolDefinition {
    ToolDefinition::new(
        "get_weather",
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
    .with_strict(strict)
}

/// One setting: its name, the request with it, and the same request without it.
struct Case {
    name: &'static str,
    with: LlmRequest,
    without: LlmRequest,
    /// Content, not a setting: a format that cannot carry it may refuse it as an
    /// invalid request naming the field.
    content: bool,
}

fn case(
    name: &'static str,
    tools: bool,
    with: impl FnOnce(SamplingParams) -> SamplingParams,
) -> Case {
    case_of(name, tools, with, Vec::new())
}

fn case_of(
    name: &'static str,
    tools: bool,
    with: impl FnOnce(SamplingParams) -> SamplingParams,
    extra: Vec<Block>,
) -> Case {
    let base = base();
    let tools = if tools { vec![tool(None)] } else { Vec::new() };
    let plain = vec![Message::new(Role::User, "Hello?")];
    let mut added = plain.clone();
    added[0].content.extend(extra);
    let build = |messages: Vec<Message>, params: SamplingParams| {
        LlmRequest::new(MODEL, messages, tools.clone(), params)
            .unwrap_or_else(|e| panic!("the kit's `{name}` request is valid: {e}"))
    };
    Case {
        name,
        with: build(added, with(base.clone())),
        content: false,
        without: build(plain, base),
    }
}

/// What every case's request starts from: room for a thinking budget, and the answer
/// taken as given (the kit's answer is text, which no schema is checked against here:
/// this check is about the body sent).
fn base() -> SamplingParams {
    SamplingParams::new()
        .with_max_output_tokens(1500)
        .expect("a valid limit")
        .with_shape_misses()
}

fn hello() -> Vec<Message> {
    vec![Message::new(Role::User, "Hello?")]
}

fn cases() -> Vec<Case> {
    let reasoning = |r: Reasoning| move |p: SamplingParams| p.with_reasoning(r).expect("valid");
    let mut cases = vec![
        Case {
            name: "tools",
            with: LlmRequest::new(MODEL, hello(), vec![tool(None)], base()).expect("valid"),
            without: LlmRequest::new(MODEL, hello(), vec![], base()).expect("valid"),
            content: false,
        },
        case("a response shape", false, |p| {
            let schema = Json::new(json!({"type": "object"}));
            p.with_response_shape(ResponseShape::new("answer", schema))
        }),
        case("tool_choice: required", true, |p| {
            p.with_tool_choice(ToolChoice::Required)
        }),
        case("tool_choice: none", true, |p| {
            p.with_tool_choice(ToolChoice::None)
        }),
        case("tool_choice: a named tool", true, |p| {
            p.with_tool_choice(ToolChoice::Tool("get_weather".into()))
        }),
        case("parallel_tool_calls: false", true, |p| {
            p.with_parallel_tool_calls(false)
        }),
        case(
            "reasoning effort",
            false,
            reasoning(Reasoning::effort(ReasoningEffort::High)),
        ),
        case(
            "thinking: adaptive",
            false,
            reasoning(Reasoning::thinking(Thinking::Adaptive)),
        ),
        case(
            "thinking: a budget",
            false,
            reasoning(Reasoning::thinking(Thinking::Budget { tokens: 1024 })),
        ),
        case(
            "reasoning summary",
            false,
            reasoning(Reasoning {
                summary: Some(ReasoningSummary::Detailed),
                ..Reasoning::default()
            }),
        ),
        case("json_object", false, SamplingParams::with_json_object),
        case("seed", false, |p| p.with_seed(7)),
        case("verbosity: low", false, |p| {
            p.with_verbosity(Verbosity::Low)
        }),
        case_of(
            "a PDF document",
            false,
            |p| p,
            vec![Block::Document {
                source: DocumentSource::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBERi0xLjQK".into(),
                },
                name: Some("kit.pdf".into()),
                cache: None,
            }],
        ),
    ];
    if let Some(pdf) = cases.last_mut() {
        pdf.content = true;
    }
    // A tool's own `strict`, either way: the same request with the tool's `strict` set
    // and unset.
    for strict in [true, false] {
        cases.push(Case {
            name: if strict {
                "a tool's strict: true"
            } else {
                "a tool's strict: false"
            },
            with: LlmRequest::new(MODEL, hello(), vec![tool(Some(strict))], base()).expect("valid"),
            without: LlmRequest::new(MODEL, hello(), vec![tool(None)], base()).expect("valid"),
            content: false,
        });
    }
    // A shape's `strict: false` against the same shape with `strict` unset.
    let shape = |strict| {
        let schema = Json::new(json!({"type": "object"}));
        let params =
            base().with_response_shape(ResponseShape::new("answer", schema).with_strict(strict));
        LlmRequest::new(MODEL, hello(), vec![], params).expect("valid")
    };
    cases.push(Case {
        name: "a shape with strict: false",
        with: shape(Some(false)),
        without: shape(None),
        content: false,
    });
    cases
}

/// Every request setting is written into the body sent, or refused by type before
/// anything is sent: never sent as if it had not been asked.
pub async fn every_request_setting_is_written_or_refused_by_type(
    script: &dyn WireScript,
) -> Checked {
    let kit = Kit::new(script).await;
    kit.server.only(script.answer("ok", USAGE));
    let chat = kit.models.chat(MODEL).await.expect("the kit's chat model");
    let mut dropped = Vec::new();
    for case in cases() {
        let before = kit.server.hits();
        let refused = match chat.single_response(&case.with).await {
            Ok(_) => false,
            // Refused by type: a setting the provider cannot do, or content its format
            // cannot carry (a document where only text goes), naming the field.
            Err(Error::UnsupportedSetting { .. }) => true,
            Err(Error::InvalidRequest { .. }) if case.content => true,
            Err(other) => panic!(
                "`{}` failed with {other:?}: a setting is written, or refused with \
                 Error::UnsupportedSetting (Error::InvalidRequest for content)",
                case.name
            ),
        };
        if refused {
            assert_eq!(
                kit.server.hits(),
                before,
                "`{}` was refused after a send: a setting is refused before anything is sent",
                case.name
            );
            continue;
        }
        let sent_with = kit.server.requests()[kit.server.hits() - 1].body.clone();
        chat.single_response(&case.without)
            .await
            .unwrap_or_else(|e| panic!("`{}` without the setting failed: {e}", case.name));
        let sent_without = kit.server.requests()[kit.server.hits() - 1].body.clone();
        if sent_with == sent_without {
            dropped.push(case.name);
        }
    }
    // A tool that belongs to a provider no codec is (a server tool defined elsewhere):
    // refused by type, never sent as a function of its name.
    let mut foreign = tool(None);
    foreign.native = Some(tollgate::NativeTool {
        provider: "kit-elsewhere".into(),
        definition: Json::new(json!({"type": "kit_search_2099"})),
    });
    let before = kit.server.hits();
    let request = LlmRequest::new(MODEL, hello(), vec![foreign], base()).expect("valid");
    let err = chat
        .single_response(&request)
        .await
        .expect_err("another provider's own tool is refused");
    assert!(
        matches!(err, Error::UnsupportedSetting { .. }),
        "another provider's own tool: {err:?}"
    );
    assert_eq!(kit.server.hits(), before, "refused before anything is sent");
    assert!(
        dropped.is_empty(),
        "these settings were dropped: the body sent with each is the body sent without it; \
         write each in the provider's form, or refuse it with Error::UnsupportedSetting \
         (tollgate::provider::refuse_unwritten): {dropped:?}"
    );
    Checked::Passed
}
