//! Request bodies: what each message, tool and setting becomes on Cohere's `/v2/chat`,
//! and what is refused before anything is sent.

use serde_json::{Value, json};
use tollgate::{
    Block, DocumentSource, Error, ImageSource, Json, LlmRequest, Message, Reasoning,
    ReasoningEffort, ResponseShape, Role, SamplingParams, Thinking, ToolChoice, ToolDefinition,
};
use tollgate_cohere::codec::{EncodeOptions, encode_request};

const MODEL: &str = "command-a-03-2025";

fn options() -> EncodeOptions {
    EncodeOptions {
        model: MODEL.into(),
        max_tokens: Some(512),
        stream: false,
        tool_choice: ToolChoice::Auto,
    }
}

fn tool(name: &str, strict: Option<bool>) -> ToolDefinition {
    ToolDefinition::new(
        name,
        "The weather in a city.",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )
    .with_strict(strict)
}

fn request(messages: Vec<Message>, tools: Vec<ToolDefinition>, p: SamplingParams) -> LlmRequest {
    LlmRequest::new("m", messages, tools, p).unwrap()
}

fn hello(params: SamplingParams) -> LlmRequest {
    request(vec![Message::user("Hello?")], vec![], params)
}

fn encode(r: &LlmRequest) -> Value {
    encode_request(r, &options()).unwrap()
}

fn refused(r: &LlmRequest) -> String {
    match encode_request(r, &options()) {
        Err(e @ Error::UnsupportedSetting { .. }) => e.to_string(),
        other => panic!("not refused by type: {other:?}"),
    }
}

#[test]
fn a_plain_request_is_the_model_the_user_turn_and_the_output_limit() {
    assert_eq!(
        encode(&hello(SamplingParams::new())),
        json!({"model": MODEL, "max_tokens": 512,
               "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello?"}]}]})
    );
    let streamed = encode_request(
        &hello(SamplingParams::new()),
        &EncodeOptions {
            stream: true,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(streamed["stream"], json!(true));
}

#[test]
fn leading_system_messages_are_one_system_message_and_later_ones_are_folded() {
    let r = request(
        vec![
            Message::system("Be brief."),
            Message::system("Answer in French."),
            Message::user("Hello?"),
            Message::assistant("Bonjour."),
            Message::system("Now in English."),
            Message::user("Again?"),
        ],
        vec![],
        SamplingParams::new(),
    );
    let messages = encode(&r)["messages"].clone();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "Be brief.\n\nAnswer in French."})
    );
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert!(messages[3].to_string().contains("Now in English."));
}

#[test]
fn a_tool_round_trip_is_the_plan_and_calls_then_tool_messages() {
    let call = Block::ToolUse {
        id: "c1".into(),
        name: "get_weather".into(),
        input: Json::new(json!({"city": "Paris"})),
        cache: None,
    };
    let assistant = Message {
        role: Role::Assistant,
        content: vec![Block::text("I will look it up."), call],
    };
    let result = |id: &str, text: &str, is_error| Block::ToolResult {
        tool_use_id: id.into(),
        content: vec![Block::text(text)],
        is_error,
        cache: None,
    };
    let user = Message {
        role: Role::User,
        content: vec![
            result("c1", "Sunny", false),
            result("c2", "no such city", true),
        ],
    };
    let r = request(
        vec![Message::user("Weather?"), assistant, user],
        vec![tool("get_weather", None)],
        SamplingParams::new(),
    );
    let body = encode(&r);
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "tool_plan": "I will look it up.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "Sunny"})
    );
    assert_eq!(body["messages"][3]["content"], json!("Error: no such city"));
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
    );
    assert!(
        body.get("tool_choice").is_none(),
        "auto is Cohere's default"
    );
}

#[test]
fn an_image_is_an_image_url_part_and_a_text_document_a_text_part() {
    let user = Message {
        role: Role::User,
        content: vec![
            Block::Image {
                source: ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBOR".into(),
                },
                cache: None,
            },
            Block::Document {
                source: DocumentSource::Text {
                    text: "A memo.".into(),
                },
                name: None,
                cache: None,
            },
        ],
    };
    let body = encode(&request(vec![user], vec![], SamplingParams::new()));
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
               {"type": "text", "text": "A memo."}])
    );
}

#[test]
fn a_pdf_is_an_invalid_request_naming_its_block() {
    let user = Message {
        role: Role::User,
        content: vec![Block::Document {
            source: DocumentSource::Base64 {
                media_type: "application/pdf".into(),
                data: "JVBERi0=".into(),
            },
            name: None,
            cache: None,
        }],
    };
    let err = encode_request(
        &request(vec![user], vec![], SamplingParams::new()),
        &options(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "messages[0].content[0]"),
        "{err:?}"
    );
}

#[test]
fn tool_choice_required_and_none_are_written_and_the_request_wins_over_the_catalog() {
    let with = |choice: Option<ToolChoice>, catalog: ToolChoice| {
        let params = match choice {
            Some(c) => SamplingParams::new().with_tool_choice(c),
            None => SamplingParams::new(),
        };
        let r = request(vec![Message::user("Hi")], vec![tool("f", None)], params);
        let options = EncodeOptions {
            tool_choice: catalog,
            ..options()
        };
        encode_request(&r, &options).unwrap()["tool_choice"].clone()
    };
    assert_eq!(
        with(Some(ToolChoice::Required), ToolChoice::Auto),
        "REQUIRED"
    );
    assert_eq!(with(Some(ToolChoice::None), ToolChoice::Auto), "NONE");
    assert_eq!(with(None, ToolChoice::Required), "REQUIRED");
    assert_eq!(
        with(Some(ToolChoice::Auto), ToolChoice::Required),
        Value::Null
    );
}

#[test]
fn a_forced_named_tool_is_refused_by_type() {
    let params = SamplingParams::new().with_tool_choice(ToolChoice::Tool("f".into()));
    let text = refused(&request(
        vec![Message::user("Hi")],
        vec![tool("f", None)],
        params,
    ));
    assert!(text.contains("`f`") && text.contains("cohere"), "{text}");
}

#[test]
fn strict_tools_is_written_when_every_tool_agrees_and_a_mix_is_refused() {
    let strict = |tools| {
        encode(&request(
            vec![Message::user("Hi")],
            tools,
            SamplingParams::new(),
        ))
    };
    assert_eq!(
        strict(vec![tool("a", Some(true)), tool("b", Some(true))])["strict_tools"],
        true
    );
    assert_eq!(
        strict(vec![tool("a", Some(false)), tool("b", None)])["strict_tools"],
        false
    );
    assert!(strict(vec![tool("a", None)]).get("strict_tools").is_none());
    let mixed = request(
        vec![Message::user("Hi")],
        vec![tool("a", Some(true)), tool("b", None)],
        SamplingParams::new(),
    );
    assert!(refused(&mixed).contains("strict on 1 of 2 tools"));
}

#[test]
fn sampling_settings_are_written_in_coheres_names() {
    let params = SamplingParams::new()
        .with_temperature(0.2)
        .unwrap()
        .with_top_p(0.9)
        .unwrap()
        .with_stop("END")
        .with_seed(7)
        .with_max_output_tokens(100)
        .unwrap();
    let body = encode(&hello(params));
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["p"], 0.9);
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["seed"], 7);
    assert_eq!(body["max_tokens"], 100, "the request's limit wins");
}

#[test]
fn a_top_p_cohere_does_not_take_and_more_than_five_stops_are_invalid_requests() {
    let err = encode_request(
        &hello(SamplingParams::new().with_top_p(1.0).unwrap()),
        &options(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "top_p"),
        "{err:?}"
    );
    let stops = (0..6).fold(SamplingParams::new(), |p, i| p.with_stop(format!("s{i}")));
    let err = encode_request(&hello(stops), &options()).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidRequest { field, .. } if field == "stop"),
        "{err:?}"
    );
}

#[test]
fn a_shape_is_a_json_schema_and_json_mode_a_json_object() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let shaped = hello(
        SamplingParams::new()
            .with_response_shape(ResponseShape::new("out", Json::new(schema.clone()))),
    );
    assert_eq!(
        encode(&shaped)["response_format"],
        json!({"type": "json_object", "json_schema": schema})
    );
    let json_mode = hello(SamplingParams::new().with_json_object());
    assert_eq!(
        encode(&json_mode)["response_format"],
        json!({"type": "json_object"})
    );
}

#[test]
fn thinking_off_adaptive_and_a_budget_are_written() {
    let thinking = |t| {
        let params = SamplingParams::new()
            .with_max_output_tokens(4000)
            .unwrap()
            .with_reasoning(Reasoning::thinking(t))
            .unwrap();
        encode(&hello(params))["thinking"].clone()
    };
    assert_eq!(thinking(Thinking::Off), json!({"type": "disabled"}));
    assert_eq!(thinking(Thinking::Adaptive), json!({"type": "enabled"}));
    assert_eq!(
        thinking(Thinking::Budget { tokens: 1024 }),
        json!({"type": "enabled", "token_budget": 1024})
    );
}

#[test]
fn settings_cohere_has_no_field_for_are_refused_by_type() {
    let with_tool = |p| request(vec![Message::user("Hi")], vec![tool("f", None)], p);
    assert!(
        refused(&with_tool(
            SamplingParams::new().with_parallel_tool_calls(false)
        ))
        .contains("parallel_tool_calls")
    );
    let effort = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::High))
        .unwrap();
    assert!(refused(&hello(effort)).contains("reasoning.effort"));
    let loose =
        ResponseShape::new("out", Json::new(json!({"type": "object"}))).with_strict(Some(false));
    assert!(
        refused(&hello(SamplingParams::new().with_response_shape(loose))).contains("strict: false")
    );
}

#[test]
fn tool_choice_is_sent_only_with_tools() {
    let options = EncodeOptions {
        tool_choice: ToolChoice::Required,
        ..options()
    };
    let body = encode_request(&hello(SamplingParams::new()), &options).unwrap();
    assert!(body.get("tool_choice").is_none(), "{body}");
    assert!(body.get("tools").is_none(), "{body}");
}

#[test]
fn an_image_by_url_is_sent_as_its_url() {
    let user = Message {
        role: Role::User,
        content: vec![Block::Image {
            source: ImageSource::Url {
                url: "https://example.com/cat.png".into(),
            },
            cache: None,
        }],
    };
    let body = encode(&request(vec![user], vec![], SamplingParams::new()));
    assert_eq!(
        body["messages"][0]["content"][0]["image_url"]["url"],
        "https://example.com/cat.png"
    );
}
