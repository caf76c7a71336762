//! The Responses API (`api = "responses"`): the request body (stateless, items, flat
//! tools, tool choice, text format, reasoning and its replay), the whole answer and the
//! stream decoded (text, tool calls, signed reasoning, cut-off and refused answers,
//! failures), and the transport against llmock's own `/v1/responses` (skipped without
//! the peers, as the conformance tier is).

use futures::StreamExt;
use serde_json::{Value, json};
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::provider::{ChunkDecoder, ToolChoice};
use tollgate::{
    Block, Catalog, Conversation, Error, Json, LlmRequest, Message, Models, Reasoning,
    ReasoningEffort, ReasoningSummary, ResponseShape, Role, SamplingParams, StopReason,
    StreamEvent, ToolDefinition, Verbosity,
};
use tollgate_openai::OpenAiProvider;
use tollgate_openai::codec::{
    ResponsesEvents, ResponsesOptions, decode_responses_response, encode_responses_request,
    reasoning_signature,
};

fn options() -> ResponsesOptions {
    ResponsesOptions {
        model: "gpt-5.6".into(),
        max_tokens: Some(500),
        stream: false,
        tool_choice: ToolChoice::Auto,
    }
}

fn weather() -> ToolDefinition {
    ToolDefinition::new(
        "weather",
        "The weather in a city",
        Json::new(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})),
    )
    .with_strict(Some(true))
}

fn request(
    messages: Vec<Message>,
    tools: Vec<ToolDefinition>,
    params: SamplingParams,
) -> LlmRequest {
    LlmRequest::new("chat", messages, tools, params).unwrap()
}

#[test]
fn responses_request_is_stateless_with_items_flat_tools_and_the_tool_choice() {
    let messages = vec![
        Message::new(Role::System, "be brief"),
        Message::new(Role::User, "weather in Oslo?"),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "call_1".into(),
                name: "weather".into(),
                input: Json::new(json!({"city": "Oslo"})),
                cache: None,
            }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "call_1".into(),
                content: vec![Block::text("sunny")],
                is_error: false,
                cache: None,
            }],
        },
    ];
    let params = SamplingParams::new()
        .with_tool_choice(tollgate::ToolChoice::Tool("weather".into()))
        .with_parallel_tool_calls(false);
    let body =
        encode_responses_request(&request(messages, vec![weather()], params), &options()).unwrap();
    assert_eq!(body["store"], false);
    assert_eq!(body["model"], "gpt-5.6");
    assert_eq!(body["max_output_tokens"], 500);
    let input = body["input"].as_array().unwrap();
    assert_eq!(input[0], json!({"role": "system", "content": "be brief"}));
    assert_eq!(
        input[1]["content"][0],
        json!({"type": "input_text", "text": "weather in Oslo?"})
    );
    assert_eq!(input[2]["type"], "function_call");
    assert_eq!(input[2]["call_id"], "call_1");
    assert_eq!(
        serde_json::from_str::<Value>(input[2]["arguments"].as_str().unwrap()).unwrap()["city"],
        "Oslo"
    );
    assert_eq!(
        input[3],
        json!({"type": "function_call_output", "call_id": "call_1", "output": "sunny"})
    );
    assert_eq!(body["tools"][0]["name"], "weather");
    assert_eq!(body["tools"][0]["strict"], true);
    assert!(
        body["tools"][0].get("function").is_none(),
        "Responses tools are flat"
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "weather"})
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert!(
        body.get("include").is_none(),
        "no reasoning asked, none included"
    );
}

#[test]
fn responses_request_writes_text_format_and_reasoning_and_refuses_seed_and_stop() {
    let shaped = SamplingParams::new()
        .with_response_shape(
            ResponseShape::new("out", Json::new(json!({"type": "object"})))
                .with_strict(Some(false)),
        )
        .with_reasoning(Reasoning {
            effort: Some(ReasoningEffort::High),
            thinking: None,
            summary: Some(ReasoningSummary::Detailed),
        })
        .unwrap();
    let body = encode_responses_request(
        &request(vec![Message::new(Role::User, "hi")], vec![], shaped),
        &options(),
    )
    .unwrap();
    assert_eq!(
        body["text"]["format"],
        json!({"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": false})
    );
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "detailed"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    let json_mode = encode_responses_request(
        &request(
            vec![Message::new(Role::User, "hi")],
            vec![],
            SamplingParams::new().with_json_object(),
        ),
        &options(),
    )
    .unwrap();
    assert_eq!(json_mode["text"]["format"], json!({"type": "json_object"}));
    // `text.verbosity` beside a format, and alone.
    for (params, format) in [
        (
            SamplingParams::new().with_json_object(),
            Some(json!({"type": "json_object"})),
        ),
        (SamplingParams::new(), None),
    ] {
        let params = params.with_verbosity(Verbosity::Low);
        let body = encode_responses_request(
            &request(vec![Message::new(Role::User, "hi")], vec![], params),
            &options(),
        )
        .unwrap();
        assert_eq!(body["text"]["verbosity"], json!("low"), "{body}");
        assert_eq!(body["text"].get("format").cloned(), format, "{body}");
    }
    for params in [
        SamplingParams::new().with_seed(4),
        SamplingParams::new().with_stop("END"),
    ] {
        let err = encode_responses_request(
            &request(vec![Message::new(Role::User, "hi")], vec![], params),
            &options(),
        )
        .unwrap_err();
        assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    }
}

#[test]
fn openai_signed_reasoning_is_replayed_as_its_item_and_other_signatures_are_left_out() {
    let history = vec![
        Message::new(Role::User, "q"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::Thinking {
                    text: "sum".into(),
                    signature: Some(reasoning_signature("rs_1", "ENC")),
                    origin: Some("openai".into()),
                    cache: None,
                },
                Block::Thinking {
                    text: "theirs".into(),
                    signature: Some("anthropic-sig".into()),
                    origin: Some("anthropic".into()),
                    cache: None,
                },
                Block::text("a"),
            ],
        },
        Message::new(Role::User, "more"),
    ];
    let body =
        encode_responses_request(&request(history, vec![], SamplingParams::new()), &options())
            .unwrap();
    let input = body["input"].as_array().unwrap();
    assert_eq!(input.len(), 4, "{input:?}");
    assert_eq!(
        input[1],
        json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC",
        "summary": [{"type": "summary_text", "text": "sum"}]})
    );
    assert_eq!(input[2]["type"], "message");
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
}

#[test]
fn responses_whole_answer_decodes_text_calls_reasoning_and_usage() {
    let body = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.6",
        "output": [
            {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "E9"},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_7", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
        ],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 40}, "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 8}, "total_tokens": 120}});
    let r = decode_responses_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(r.stop_reason(), StopReason::ToolUse);
    let u = r.usage();
    assert_eq!(
        (u.input_tokens, u.cache_read_tokens, u.output_tokens),
        (60, 40, 20)
    );
    assert!(
        matches!(&r.blocks()[0], Block::Thinking { text, signature: Some(s), origin: Some(o), .. }
        if text == "think" && s == "rs_9 E9" && o == "openai")
    );
    assert_eq!(r.blocks()[1], Block::text("Let me check."));
    assert!(
        matches!(&r.blocks()[2], Block::ToolUse { id, input, .. } if id == "call_7" && input.value()["city"] == "Oslo")
    );
}

#[test]
fn responses_incomplete_is_max_tokens_and_a_refusal_part_is_a_refusal() {
    let cut = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "model": "m",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "par"}]}], "usage": {"input_tokens": 5, "output_tokens": 3}});
    assert_eq!(
        decode_responses_response(cut.to_string().as_bytes())
            .unwrap()
            .stop_reason(),
        StopReason::MaxTokens
    );
    let refused = json!({"status": "completed", "model": "m",
        "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}], "usage": {"input_tokens": 5, "output_tokens": 3}});
    let answer = decode_responses_response(refused.to_string().as_bytes()).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::Refusal);
    assert_eq!(answer.refusal_category(), Some("refusal"));
    assert_eq!(answer.text(), "I can't help with that.");
}

/// Runs `events` (each a Responses stream event) through the decoder.
fn decode_stream(events: &[Value]) -> (Vec<StreamEvent>, tollgate::Result<()>) {
    let mut decoder = ResponsesEvents::default();
    let mut out = Vec::new();
    for e in events {
        match decoder.chunk(&e.to_string()) {
            Ok(more) => out.extend(more),
            Err(err) => return (out, Err(err)),
        }
    }
    assert!(decoder.is_finished());
    (out, Ok(()))
}

#[test]
fn responses_stream_decodes_reasoning_text_and_a_call_in_output_order() {
    let events = vec![
        json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "plan"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "ENC"}}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "message", "id": "msg_1", "content": []}}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Hel"}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "lo"}),
        json!({"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_3", "name": "weather", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"city\":"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "\"Oslo\"}"}),
        json!({"type": "response.completed", "response": {"status": "completed", "model": "gpt-5.6", "output": [],
            "usage": {"input_tokens": 10, "output_tokens": 7}}}),
    ];
    let (out, end) = decode_stream(&events);
    end.unwrap();
    assert!(out.iter().any(|e| matches!(e, StreamEvent::SignatureDelta { index: 0, signature } if signature == "rs_1 ENC")));
    let text: String = out
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { index: 1, text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
    let Some(StreamEvent::Completed(r)) = out.last() else {
        panic!("{out:?}")
    };
    assert_eq!(r.stop_reason(), StopReason::ToolUse);
    assert!(
        matches!(&r.blocks()[0], Block::Thinking { signature: Some(s), origin: Some(o), .. }
            if s == "rs_1 ENC" && o == "openai")
    );
    assert_eq!(r.blocks()[1], Block::text("Hello"));
    assert!(
        matches!(&r.blocks()[2], Block::ToolUse { id, input, .. } if id == "call_3" && input.value()["city"] == "Oslo")
    );
    assert_eq!(r.usage().output_tokens, 7);
}

#[test]
fn a_call_whose_arguments_come_whole_with_its_done_keeps_them() {
    let (out, end) = decode_stream(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": ""}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}),
        json!({"type": "response.completed", "response": {"status": "completed", "model": "m", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    ]);
    end.unwrap();
    let Some(StreamEvent::Completed(r)) = out.last() else {
        panic!("{out:?}")
    };
    assert!(
        matches!(&r.blocks()[0], Block::ToolUse { input, .. } if input.value()["city"] == "Oslo"),
        "{:?}",
        r.blocks()
    );
}

#[test]
fn responses_stream_failure_is_typed_and_a_body_without_completed_was_cut() {
    let failed = vec![
        json!({"type": "response.created", "response": {"status": "in_progress"}}),
        json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}}),
    ];
    let (_, end) = decode_stream(&failed);
    let err = end.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(tollgate::ProviderError::RateLimited { .. })
        ),
        "{err:?}"
    );
    let invalid = vec![
        json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "invalid_prompt", "message": "flagged"}}}),
    ];
    let (_, end) = decode_stream(&invalid);
    let err = end.unwrap_err();
    assert!(
        matches!(err, Error::ProviderRequest(ref r) if r.status == 400),
        "{err:?}"
    );
    let mut decoder = ResponsesEvents::default();
    decoder.chunk(&json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "x"}).to_string()).unwrap();
    assert!(!decoder.is_finished());
    let cut = decoder.ended().unwrap_err();
    assert!(
        matches!(
            cut,
            Error::Provider(tollgate::ProviderError::Connection { .. })
        ),
        "{cut:?}"
    );
}

/// A catalog of one `openai` model on llmock's Responses endpoint.
fn llmock_models(base_url: &str, name: &str) -> Models {
    let limits = Limits {
        rpm: 6000,
        tpm: 100_000_000,
        ..Limits::default()
    };
    let catalog = Catalog::builder()
        .model(
            ModelEntry::new("chat", "openai", name)
                .with_credential("peer")
                .with_output_tokens(200, 50)
                .with_limits(limits)
                .with_option("base_url", base_url)
                .with_option("api", "responses"),
        )
        .build()
        .unwrap();
    Models::builder()
        .catalog(catalog)
        .credentials(MemoryCredentialStore::new().with("peer", "sk-peer-test"))
        .provider(OpenAiProvider::OPENAI)
        .build()
        .unwrap()
}

async fn journal(url: &str, model: &str) -> Vec<Value> {
    let journal: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{url}/_llmock/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    journal["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["model"] == model)
        .cloned()
        .collect()
}

#[tokio::test]
async fn the_responses_api_answers_text_streams_and_tool_calls_from_llmock() {
    let Some(url) = tollgate_testkit::peers::url("TOLLGATE_LLMOCK_URL") else {
        return;
    };
    let name = format!("gpt-responses-{}", std::process::id());
    let models = llmock_models(&url, &name);
    let chat = models.chat("chat").await.unwrap();
    let ask = Conversation::new()
        .user("Why reserve first?")
        .request("chat", SamplingParams::new())
        .unwrap();
    let whole = chat.single_response(&ask).await.unwrap();
    assert!(!whole.text().is_empty());
    assert_eq!(whole.stop_reason(), StopReason::EndTurn);
    assert!(whole.usage().output_tokens > 0);

    let mut stream = chat.stream_response(&ask).await.unwrap();
    let (mut deltas, mut completed) = (String::new(), None);
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            StreamEvent::TextDelta { text, .. } => deltas.push_str(&text),
            StreamEvent::Completed(r) => completed = Some(r),
            _ => {}
        }
    }
    let completed = completed.expect("the stream completes");
    assert!(!deltas.is_empty());
    assert_eq!(completed.text(), deltas);

    let forced = LlmRequest::new(
        "chat",
        vec![Message::new(Role::User, "weather in Oslo?")],
        vec![weather()],
        SamplingParams::new().with_tool_choice(tollgate::ToolChoice::Tool("weather".into())),
    )
    .unwrap();
    for streamed in [false, true] {
        let r = if streamed {
            chat.stream_response(&forced)
                .await
                .unwrap()
                .into_response()
                .await
                .unwrap()
        } else {
            chat.single_response(&forced).await.unwrap()
        };
        assert_eq!(r.stop_reason(), StopReason::ToolUse, "streamed: {streamed}");
        let call = r.blocks().iter().find_map(|b| match b {
            Block::ToolUse {
                id, name, input, ..
            } => Some((id.clone(), name.clone(), input.value().clone())),
            _ => None,
        });
        let (id, tool, input) = call.expect("a tool call");
        assert!(!id.is_empty());
        assert_eq!(tool, "weather");
        assert!(input["city"].is_string(), "{input}");
    }

    // What reached llmock: Responses bodies, stateless, with the forced choice.
    let sent = journal(&url, &name).await;
    assert_eq!(sent.len(), 4, "{sent:?}");
    for record in &sent {
        assert_eq!(record["status"], 200, "{record}");
        assert_eq!(record["path"], "/v1/responses", "{record}");
        assert_eq!(record["body"]["store"], false, "{record}");
    }
    for record in &sent[2..] {
        assert_eq!(
            record["body"]["tool_choice"],
            json!({"type": "function", "name": "weather"})
        );
        assert_eq!(record["body"]["tools"][0]["name"], "weather");
    }
}

#[test]
fn openais_own_tools_and_their_items_go_back_as_openai_wrote_them() {
    let mut search = ToolDefinition::new("web_search", "", Json::new(json!({})));
    search.native = Some(tollgate::NativeTool {
        provider: "openai".into(),
        definition: Json::new(json!({"type": "web_search", "external_web_access": false})),
    });
    let call = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
    let history = vec![
        Message::new(Role::User, "news?"),
        Message {
            role: Role::Assistant,
            content: vec![Block::Native {
                provider: "openai".into(),
                value: Json::new(call.clone()),
            }],
        },
        Message::new(Role::User, "more"),
    ];
    let body = encode_responses_request(
        &request(history, vec![search], SamplingParams::new()),
        &options(),
    )
    .unwrap();
    assert_eq!(
        body["tools"][0],
        json!({"type": "web_search", "external_web_access": false})
    );
    assert_eq!(body["input"][1], call);
    // Another provider's own tool is refused by type.
    let mut theirs = ToolDefinition::new("web_search", "", Json::new(json!({})));
    theirs.native = Some(tollgate::NativeTool {
        provider: "anthropic".into(),
        definition: Json::new(json!({"type": "web_search_20250305", "name": "web_search"})),
    });
    let err = encode_responses_request(
        &request(
            vec![Message::new(Role::User, "q")],
            vec![theirs],
            SamplingParams::new(),
        ),
        &options(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnsupportedSetting { .. }), "{err:?}");
    // In an answer, the call item is kept whole, whole and streamed.
    let answer = json!({"status": "completed", "model": "m", "usage": {"input_tokens": 1, "output_tokens": 1},
        "output": [call.clone(), {"type": "message", "content": [{"type": "output_text", "text": "done"}]}]});
    let r = decode_responses_response(answer.to_string().as_bytes()).unwrap();
    assert!(
        matches!(&r.blocks()[0], Block::Native { provider, value } if provider == "openai" && value.value() == &call)
    );
    let (out, end) = decode_stream(&[
        json!({"type": "response.output_item.done", "output_index": 0, "item": call}),
        json!({"type": "response.completed", "response": {"status": "completed", "model": "m", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    ]);
    end.unwrap();
    assert!(out.iter().any(|e| matches!(
        e,
        StreamEvent::WholeBlock {
            index: 0,
            block: Block::Native { .. }
        }
    )));
}

#[test]
fn responses_request_writes_a_deferred_tools_defer_loading() {
    let body = encode_responses_request(
        &request(
            vec![Message::new(Role::User, "hi")],
            vec![weather().with_defer_loading(true)],
            SamplingParams::new(),
        ),
        &options(),
    )
    .unwrap();
    assert_eq!(body["tools"][0]["defer_loading"], json!(true), "{body}");
    let loaded = encode_responses_request(
        &request(
            vec![Message::new(Role::User, "hi")],
            vec![weather()],
            SamplingParams::new(),
        ),
        &options(),
    )
    .unwrap();
    assert!(
        loaded["tools"][0].get("defer_loading").is_none(),
        "{loaded}"
    );
}
