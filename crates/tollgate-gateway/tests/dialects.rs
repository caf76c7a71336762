//! Both dialects over HTTP on 127.0.0.1 against the scripted `fake` provider: whole and
//! streamed answers, tools, json_schema, embeddings, the model list, unknown models.

mod common;

use common::{client, models, send_json, sse_events, start};
use serde_json::{Value, json};
use tollgate::{Block, Json, StopReason};
use tollgate_fake::{FakeProvider, FakeReply};
use tollgate_gateway::Gateway;

async fn open_gateway(fake: &FakeProvider) -> common::Running {
    start(Gateway::new(models(fake))).await
}

async fn post(url: String, body: Value) -> (u16, reqwest::header::HeaderMap, String) {
    send_json(url, &body, &[]).await
}

fn tool_reply() -> FakeReply {
    FakeReply::blocks(vec![Block::ToolUse {
        id: "call_1".into(),
        name: "get_weather".into(),
        input: Json::new(json!({"city": "Paris"})),
        cache: None,
    }])
    .with_stop(StopReason::ToolUse)
}

fn weather_tool_openai() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

#[tokio::test]
async fn openai_chat_completion_answers_whole_with_usage() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("Hello there"));
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "chat", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]});
    let (status, _, text) = post(gw.at("/v1/chat/completions"), body).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "chat");
    assert_eq!(v["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(v["usage"]["completion_tokens"], 2);
    // The system message reached the model as tollgate's leading system message.
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.system().count(), 1);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn openai_stream_sends_chunks_then_a_usage_chunk_then_done() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("one two three"));
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "chat", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Count"}]});
    let (status, headers, text) = post(gw.at("/v1/chat/completions"), body).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["content-type"], "text/event-stream");
    let events = sse_events(&text);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "one two three");
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 3);
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish["usage"].is_null());
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn openai_stream_without_include_usage_has_no_usage_chunk() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("hi"));
    let gw = open_gateway(&fake).await;
    let body =
        json!({"model": "chat", "stream": true, "messages": [{"role": "user", "content": "x"}]});
    let (_, _, text) = post(gw.at("/v1/chat/completions"), body).await;
    let events = sse_events(&text);
    assert_eq!(events.last().unwrap().1, "[DONE]");
    assert!(!text.contains("\"usage\""), "{text}");
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn openai_tools_become_tool_calls_and_tool_results_go_back() {
    let fake = FakeProvider::new();
    fake.reply("chat", tool_reply());
    fake.reply("chat", FakeReply::text("Sunny"));
    let gw = open_gateway(&fake).await;
    let first = json!({"model": "chat", "tools": weather_tool_openai(),
        "messages": [{"role": "user", "content": "Weather in Paris?"}]});
    let (status, _, text) = post(gw.at("/v1/chat/completions"), first).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}));
    assert_eq!(fake.requests()[0].tools_schema()[0].name, "get_weather");

    let second = json!({"model": "chat", "tools": weather_tool_openai(), "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}]});
    let (status, _, text) = post(gw.at("/v1/chat/completions"), second).await;
    assert_eq!(status, 200, "{text}");
    let sent = fake.requests().pop().unwrap();
    let turns = sent.turns();
    assert!(matches!(&turns[1].content[0], Block::ToolUse { name, .. } if name == "get_weather"));
    assert!(
        matches!(&turns[2].content[0], Block::ToolResult { tool_use_id, .. } if tool_use_id == "call_1")
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn openai_tool_call_streams_as_tool_call_deltas() {
    let fake = FakeProvider::new();
    fake.reply("chat", tool_reply());
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "chat", "stream": true, "tools": weather_tool_openai(),
        "messages": [{"role": "user", "content": "Weather?"}]});
    let (_, _, text) = post(gw.at("/v1/chat/completions"), body).await;
    let events = sse_events(&text);
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(calls[0]["id"], "call_1");
    let args: String = calls
        .iter()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn openai_json_schema_response_format_becomes_the_response_shape() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text(r#"{"colour":"red"}"#));
    let gw = open_gateway(&fake).await;
    let schema = json!({"type": "object", "properties": {"colour": {"type": "string"}},
        "required": ["colour"]});
    let body = json!({"model": "chat", "messages": [{"role": "user", "content": "A colour"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "colour", "schema": schema}}});
    let (status, _, text) = post(gw.at("/v1/chat/completions"), body).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let content: Value =
        serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"colour": "red"}));
    let sent = fake.requests().pop().unwrap();
    let shape = sent.sampling_params().response_shape().unwrap();
    assert_eq!(shape.name, "colour");
    assert_eq!(shape.schema.value(), &schema);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn anthropic_messages_answer_whole_with_usage_and_stop_reason() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("Bonjour"));
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "chat", "max_tokens": 100, "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]});
    let (status, _, text) = post(gw.at("/v1/messages"), body).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["content"][0], json!({"type": "text", "text": "Bonjour"}));
    assert_eq!(v["stop_reason"], "end_turn");
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(v["usage"]["output_tokens"], 1);
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.sampling_params().max_output_tokens(), Some(100));
    assert_eq!(sent.system().count(), 1);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn anthropic_stream_sends_the_event_sequence_with_usage_and_stop_reason() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("one two"));
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "chat", "max_tokens": 50, "stream": true,
        "messages": [{"role": "user", "content": "Count"}]});
    let (status, _, text) = post(gw.at("/v1/messages"), body).await;
    assert_eq!(status, 200, "{text}");
    let events = sse_events(&text);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(names[1], "content_block_start");
    assert_eq!(
        &names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    assert!(
        names[2..names.len() - 3]
            .iter()
            .all(|n| *n == "content_block_delta")
    );
    let data: Vec<Value> = events
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(data.iter().zip(&names).all(|(d, n)| d["type"] == *n));
    assert!(
        data[0]["message"]["usage"]["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    let text_out: String = data
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text_out, "one two");
    let delta = &data[data.len() - 2];
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 2);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn anthropic_tools_come_back_as_tool_use_blocks_whole_and_streamed() {
    let fake = FakeProvider::new();
    fake.reply("chat", tool_reply());
    fake.reply("chat", tool_reply());
    let gw = open_gateway(&fake).await;
    let tools = json!([{"name": "get_weather", "description": "Weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let body = json!({"model": "chat", "max_tokens": 100, "tools": tools,
        "messages": [{"role": "user", "content": "Weather?"}]});
    let (status, _, text) = post(gw.at("/v1/messages"), body.clone()).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["content"][0]["type"], "tool_use");
    assert_eq!(v["content"][0]["name"], "get_weather");
    assert_eq!(v["content"][0]["input"], json!({"city": "Paris"}));
    assert_eq!(fake.requests()[0].tools_schema()[0].name, "get_weather");

    let mut streamed = body;
    streamed["stream"] = json!(true);
    let (_, _, text) = post(gw.at("/v1/messages"), streamed).await;
    let data: Vec<Value> = sse_events(&text)
        .iter()
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    let start = data
        .iter()
        .find(|d| d["type"] == "content_block_start")
        .unwrap();
    assert_eq!(start["content_block"]["type"], "tool_use");
    assert_eq!(start["content_block"]["name"], "get_weather");
    let json_text: String = data
        .iter()
        .filter_map(|d| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json_text).unwrap(),
        json!({"city": "Paris"})
    );
    let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn embeddings_answer_floats_or_base64_of_the_catalog_width() {
    let fake = FakeProvider::new();
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "embed", "input": ["alpha", "beta"], "encoding_format": "float"});
    let (status, _, text) = post(gw.at("/v1/embeddings"), body).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["index"], 1);
    let floats: Vec<f64> = v["data"][0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(floats.len(), 4);
    let norm: f64 = floats.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-3, "{norm}");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    let body = json!({"model": "embed", "input": "alpha", "encoding_format": "base64"});
    let (_, _, text) = post(gw.at("/v1/embeddings"), body).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let decoded: Vec<f64> = bytes
        .chunks(4)
        .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
        .collect();
    assert_eq!(decoded.len(), 4);
    for (a, b) in decoded.iter().zip(&floats) {
        assert!((a - b).abs() < 1e-6);
    }
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn models_lists_the_catalog_models() {
    let fake = FakeProvider::new();
    let gw = open_gateway(&fake).await;
    let v: Value = client()
        .get(gw.at("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    let mut ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["chat", "embed", "slow"]);
    assert!(
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["object"] == "model" && m["owned_by"] == "fake")
    );
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn unknown_model_is_a_404_naming_it_in_each_dialect() {
    let fake = FakeProvider::new();
    let gw = open_gateway(&fake).await;
    let body = json!({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]});
    let (status, _, text) = post(gw.at("/v1/chat/completions"), body.clone()).await;
    assert_eq!(status, 404, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(v["error"]["code"], "model_not_found");
    assert!(v["error"]["message"].as_str().unwrap().contains("gpt-9"));

    let (status, _, text) = post(gw.at("/v1/messages"), body).await;
    assert_eq!(status, 404, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "not_found_error");
    assert!(v["error"]["message"].as_str().unwrap().contains("gpt-9"));
    assert_eq!(fake.requests().len(), 0);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn malformed_requests_are_400_in_the_dialect() {
    let fake = FakeProvider::new();
    let gw = open_gateway(&fake).await;
    let (status, _, text) = post(gw.at("/v1/chat/completions"), json!({"model": "chat"})).await;
    assert_eq!(status, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let bad_temperature = json!({"model": "chat", "temperature": 7.0, "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}]});
    let (status, _, text) = post(gw.at("/v1/messages"), bad_temperature).await;
    assert_eq!(status, 400, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("temperature")
    );
    gw.stop().await.unwrap();
}
