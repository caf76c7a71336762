//! `POST /v1/responses` over HTTP on 127.0.0.1 against the scripted `fake` provider:
//! whole and streamed answers in the event order the openai SDK, Codex and the AI SDK
//! read, tool calls with the provider's call id, signed reasoning sealed and replayed,
//! cut-off answers as `incomplete`, a stream failing as `response.failed`, and the
//! stateful routes and fields refused in OpenAI's error shape.

mod common;

use common::{models, send_json, sse_events, start};
use serde_json::{Value, json};
use tollgate::{Block, Json, StopReason};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::Gateway;

async fn post(gw: &common::Running, body: Value) -> (u16, String) {
    let (status, _, text) = send_json(gw.at("/v1/responses"), &body, &[]).await;
    (status, text)
}

/// The events of a streamed answer, each its data as JSON, checked for the framing:
/// the `event:` line repeats the data's `type`, and `sequence_number` counts from 0.
fn events(text: &str) -> Vec<Value> {
    let events: Vec<Value> = sse_events(text)
        .into_iter()
        .map(|(name, data)| {
            let v: Value = serde_json::from_str(&data).unwrap();
            assert_eq!(name.as_deref(), v["type"].as_str(), "{data}");
            v
        })
        .collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i, "{e}");
    }
    events
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn responses_answers_whole_with_a_message_item_and_usage() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("Hello there"));
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "Hi", "instructions": "Be brief.",
        "metadata": {"run": "7"}}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["object"], "response");
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["model"], "chat");
    assert_eq!(v["instructions"], "Be brief.");
    assert_eq!(v["metadata"]["run"], "7");
    assert_eq!(v["store"], false);
    let item = &v["output"][0];
    assert_eq!(item["type"], "message");
    assert!(item["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(item["content"][0]["type"], "output_text");
    assert_eq!(item["content"][0]["text"], "Hello there");
    assert_eq!(v["usage"]["output_tokens"], 2);
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let total = v["usage"]["input_tokens"].as_u64().unwrap() + 2;
    assert_eq!(v["usage"]["total_tokens"], total);
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.system().count(), 1);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_stream_sends_created_items_deltas_and_completed_in_order() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("one two three"));
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "count", "stream": true}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let events = events(&text);
    let kinds = types(&events);
    assert_eq!(
        &kinds[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(
        kinds[kinds.len() - 4..],
        [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "one two three");
    let item_id = events[2]["item"]["id"].as_str().unwrap();
    assert!(
        events
            .iter()
            .filter_map(|e| e.get("item_id"))
            .all(|id| id == item_id)
    );
    let completed = events.last().unwrap();
    assert_eq!(completed["response"]["status"], "completed");
    assert_eq!(completed["response"]["output"][0]["id"], item_id);
    assert_eq!(
        completed["response"]["output"][0]["content"][0]["text"],
        "one two three"
    );
    assert_eq!(completed["response"]["usage"]["output_tokens"], 3);
    assert_eq!(events[0]["response"]["id"], completed["response"]["id"]);
    gw.stop().await.unwrap();
}

fn call_reply() -> FakeReply {
    FakeReply::blocks(vec![
        Block::Thinking {
            text: "need weather".into(),
            signature: Some("sig-1".into()),
            origin: None,
            cache: None,
        },
        Block::ToolUse {
            id: "toolu_7".into(),
            name: "weather".into(),
            input: Json::new(json!({"city": "Oslo"})),
            cache: None,
        },
    ])
    .with_stop(StopReason::ToolUse)
}

fn weather() -> Value {
    json!([{"type": "function", "name": "weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

#[tokio::test]
async fn responses_stream_a_tool_call_after_reasoning_with_the_providers_call_id() {
    let fake = FakeProvider::new();
    fake.reply("chat", call_reply());
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "weather in Oslo?",
        "tools": weather(), "tool_choice": "required", "stream": true}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let events = events(&text);
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    assert_eq!(done.len(), 2, "{text}");
    assert_eq!(done[0]["type"], "reasoning");
    assert_eq!(done[0]["summary"][0]["text"], "need weather");
    assert!(
        done[0]["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("tg1:")
    );
    assert_eq!(done[1]["type"], "function_call");
    assert_eq!(done[1]["call_id"], "toolu_7");
    assert_eq!(done[1]["name"], "weather");
    assert_eq!(done[1]["status"], "completed");
    let args: Value = serde_json::from_str(done[1]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["city"], "Oslo");
    let arg_deltas: String = events
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&arg_deltas).unwrap(), args);
    assert_eq!(
        events[events.len() - 1]["response"]["output"][1]["call_id"],
        "toolu_7"
    );
    // The tool choice reached the provider.
    assert_eq!(
        fake.requests()[0].sampling_params().tool_choice(),
        Some(&tollgate::ToolChoice::Required)
    );

    // The client replays the items with the tool's output: the signed thinking comes
    // back as the block it was, and the output pairs with the call by its id.
    fake.reply("chat", FakeReply::text("sunny"));
    let mut input = vec![json!({"role": "user", "content": "weather in Oslo?"})];
    input.extend(done.iter().map(|i| (*i).clone()));
    input.push(
        json!({"type": "function_call_output", "call_id": "toolu_7", "output": "sunny, 20C"}),
    );
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": input, "tools": weather()}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let sent = fake.requests().pop().unwrap();
    let assistant = &sent.messages()[1].content;
    assert!(
        matches!(&assistant[0], Block::Thinking { signature: Some(s), origin: Some(o), .. }
        if s == "sig-1" && o == "fake"),
        "{assistant:?}"
    );
    assert!(matches!(&assistant[1], Block::ToolUse { id, .. } if id == "toolu_7"));
    assert!(
        matches!(&sent.messages()[2].content[0], Block::ToolResult { tool_use_id, .. } if tool_use_id == "toolu_7")
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_whole_tool_call_and_custom_tool_call_items() {
    let fake = FakeProvider::new();
    fake.reply(
        "chat",
        FakeReply::blocks(vec![Block::ToolUse {
            id: "call_2".into(),
            name: "apply_patch".into(),
            input: Json::new(json!({"input": "*** Begin Patch"})),
            cache: None,
        }])
        .with_stop(StopReason::ToolUse),
    );
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "patch it",
        "tools": [{"type": "custom", "name": "apply_patch", "description": "edit"}]}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let item = &v["output"][0];
    assert_eq!(item["type"], "custom_tool_call");
    assert_eq!(item["call_id"], "call_2");
    assert_eq!(item["input"], "*** Begin Patch");
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_cut_off_answers_are_incomplete_with_max_output_tokens() {
    let fake = FakeProvider::new();
    fake.reply(
        "chat",
        FakeReply::text("a long").with_stop(StopReason::MaxTokens),
    );
    fake.reply(
        "chat",
        FakeReply::text("a long").with_stop(StopReason::MaxTokens),
    );
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "go", "max_output_tokens": 16}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "go", "max_output_tokens": 16, "stream": true}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let last = events(&text).pop().unwrap();
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_stream_that_fails_midway_ends_with_error_and_response_failed() {
    let fake = FakeProvider::new();
    fake.reply(
        "chat",
        FakeReply::text("one two three four").interrupted_after(2),
    );
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(&gw, json!({"model": "chat", "input": "go", "stream": true})).await;
    assert_eq!(status, 200, "{text}");
    let events = events(&text);
    let kinds = types(&events);
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["error", "response.failed"],
        "{text}"
    );
    let failed = &events[events.len() - 1]["response"];
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"]["code"].is_string());
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request"),
        "{failed}"
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_previous_response_id_is_a_400_previous_response_not_found() {
    let fake = FakeProvider::new();
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "again", "previous_response_id": "resp_9"}),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], "previous_response_not_found");
    assert_eq!(v["error"]["param"], "previous_response_id");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(fake.calls("chat"), 0);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_stored_routes_answer_404_in_openai_shape() {
    let fake = FakeProvider::new();
    let gw = start(Gateway::new(models(&fake))).await;
    let client = common::client();
    for (method, path) in [
        ("GET", "/v1/responses/resp_1"),
        ("DELETE", "/v1/responses/resp_1"),
        ("POST", "/v1/responses/resp_1/cancel"),
        ("GET", "/v1/responses/resp_1/input_items"),
    ] {
        let r = client
            .request(method.parse().unwrap(), gw.at(path))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{method} {path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("stores no responses")
        );
    }
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_a_namespaced_tools_call_comes_back_with_its_namespace() {
    let fake = FakeProvider::new();
    fake.reply(
        "chat",
        FakeReply::blocks(vec![Block::ToolUse {
            id: "call_5".into(),
            name: "spawn_agent".into(),
            input: Json::new(json!({})),
            cache: None,
        }])
        .with_stop(StopReason::ToolUse),
    );
    let gw = start(Gateway::new(models(&fake))).await;
    let (status, text) = post(&gw, json!({"model": "chat", "input": "spawn", "tools": [
        {"type": "namespace", "name": "multi_agent_v1", "description": "sub-agents",
         "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]}]})).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["output"][0]["type"], "function_call");
    assert_eq!(v["output"][0]["namespace"], "multi_agent_v1");
    assert_eq!(fake.requests()[0].tools_schema()[0].name, "spawn_agent");
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_two_namespaces_with_one_tool_name_are_served_and_answered_by_namespace() {
    let fake = FakeProvider::new();
    fake.reply(
        "chat",
        FakeReply::blocks(vec![Block::ToolUse {
            id: "call_7".into(),
            name: "web__search".into(),
            input: Json::new(json!({"q": "rust"})),
            cache: None,
        }])
        .with_stop(StopReason::ToolUse),
    );
    let gw = start(Gateway::new(models(&fake))).await;
    let group = |ns: &str| {
        json!({"type": "namespace", "name": ns, "description": ns,
            "tools": [{"type": "function", "name": "search", "parameters": {"type": "object"}}]})
    };
    let (status, text) = post(
        &gw,
        json!({"model": "chat", "input": "find", "tools": [group("docs"), group("web")]}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let call = &v["output"][0];
    assert_eq!(call["type"], "function_call", "{v}");
    assert_eq!(
        (call["name"].as_str(), call["namespace"].as_str()),
        (Some("search"), Some("web")),
        "{v}"
    );
    let sent: Vec<String> = fake.requests()[0]
        .tools_schema()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(sent, ["docs__search", "web__search"]);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn responses_openais_own_tool_items_are_answered_as_openai_wrote_them() {
    let fake = FakeProvider::new();
    let call = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
    let reply = || {
        FakeReply::blocks(vec![
            Block::Native {
                provider: "openai".into(),
                value: Json::new(call.clone()),
            },
            Block::text("found it"),
        ])
    };
    fake.reply("chat", reply());
    fake.reply("chat", reply());
    let gw = start(Gateway::new(models(&fake))).await;
    let body = json!({"model": "chat", "input": "news?", "tools": [{"type": "web_search"}]});
    let (status, text) = post(&gw, body.clone()).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["output"][0], call);
    assert_eq!(v["output"][1]["content"][0]["text"], "found it");
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let (status, text) = post(&gw, streamed).await;
    assert_eq!(status, 200, "{text}");
    let events = events(&text);
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| &e["item"])
        .collect();
    assert_eq!(done[0], &call, "{text}");
    // The built-in tool reached the provider as OpenAI's own.
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.tools_schema()[0].native.as_ref().unwrap().provider,
        "openai"
    );
    gw.stop().await.unwrap();
}
