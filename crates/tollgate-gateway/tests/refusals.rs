//! A model's refusal reaches the client as the provider would answer it: a 200 with the
//! dialect's refusal (`message.refusal` and `finish_reason: content_filter` in chat, a
//! `refusal` part in Responses, `stop_reason: "refusal"` in messages), whole and
//! streamed, whether the provider refused in its answer or its codec read a refusal; and
//! an answer that misses its declared shape is passed on as given, sent once.

mod common;

use common::{models, send_json, sse_events, start};
use serde_json::{Value, json};
use tollgate::StopReason;
use tollgate_fake::{FakeProvider, FakeReply, Fault};
use tollgate_gateway::Gateway;

const WHY: &str = "I can't help with that.";

fn queue_refusals(fake: &FakeProvider, n: usize) {
    for i in 0..n {
        if i % 2 == 0 {
            fake.reply("chat", FakeReply::text(WHY).with_stop(StopReason::Refusal));
        } else {
            fake.fail(
                "chat",
                Fault::Refusal {
                    category: "cyber".into(),
                    explanation: WHY.into(),
                },
            );
        }
    }
}

async fn post(gw: &common::Running, path: &str, body: Value) -> (u16, String) {
    let (status, _, text) =
        send_json(gw.at(path), &body, &[("anthropic-version", "2023-06-01")]).await;
    (status, text)
}

#[tokio::test]
async fn a_refusal_is_a_200_with_the_dialects_refusal_whole_and_streamed() {
    let fake = FakeProvider::new();
    // Each dialect twice whole and twice streamed: once a refusal the model wrote as its
    // text, once one with the provider's category and explanation apart from the text.
    queue_refusals(&fake, 12);
    let gw = start(Gateway::new(models(&fake))).await;
    let chat = json!({"model": "chat", "messages": [{"role": "user", "content": "x"}]});
    for _ in 0..2 {
        let (status, text) = post(&gw, "/v1/chat/completions", chat.clone()).await;
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["choices"][0]["message"]["refusal"], WHY, "{v}");
        assert!(v["choices"][0]["message"]["content"].is_null(), "{v}");
        assert_eq!(v["choices"][0]["finish_reason"], "content_filter");
    }
    for _ in 0..2 {
        let mut body = chat.clone();
        body["stream"] = json!(true);
        let (status, text) = post(&gw, "/v1/chat/completions", body).await;
        assert_eq!(status, 200, "{text}");
        // A refusal the model streamed as text stays the text the client already read; one
        // whose explanation came apart from the text is sent as OpenAI streams it, `refusal`.
        let said: String = sse_events(&text)
            .iter()
            .filter(|(_, d)| d != "[DONE]")
            .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
            .filter_map(|c| {
                let delta = &c["choices"][0]["delta"];
                delta["refusal"]
                    .as_str()
                    .or(delta["content"].as_str())
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(said, WHY, "{text}");
        assert!(
            text.contains("\"finish_reason\":\"content_filter\""),
            "{text}"
        );
    }
    let responses = json!({"model": "chat", "input": "x"});
    for stream in [false, false, true, true] {
        let mut body = responses.clone();
        body["stream"] = json!(stream);
        let (status, text) = post(&gw, "/v1/responses", body).await;
        assert_eq!(status, 200, "{text}");
        let object = if stream {
            let last = sse_events(&text).pop().unwrap();
            serde_json::from_str::<Value>(&last.1).unwrap()["response"].clone()
        } else {
            serde_json::from_str::<Value>(&text).unwrap()
        };
        assert_eq!(object["status"], "completed", "{object}");
        let part = &object["output"][0]["content"][0];
        if stream && part["type"] == "output_text" {
            // Streamed as text before the stop said refusal: kept as what was streamed.
            assert_eq!(part["text"], WHY, "{object}");
        } else {
            assert_eq!(
                part,
                &json!({"type": "refusal", "refusal": WHY}),
                "{object}"
            );
        }
    }
    let messages =
        json!({"model": "chat", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]});
    for stream in [false, false, true, true] {
        let mut body = messages.clone();
        body["stream"] = json!(stream);
        let (status, text) = post(&gw, "/v1/messages", body).await;
        assert_eq!(status, 200, "{text}");
        if stream {
            assert!(text.contains("\"stop_reason\":\"refusal\""), "{text}");
            // The model's refusal text as streamed, and the explanation in `stop_details`
            // (the provider's own, or the text when the provider gave none).
            let events: Vec<Value> = sse_events(&text)
                .iter()
                .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
                .collect();
            let said: String = events
                .iter()
                .filter_map(|e| e["delta"]["text"].as_str())
                .collect();
            let details = events
                .iter()
                .find(|e| e["type"] == "message_delta")
                .map(|e| e["delta"]["stop_details"].clone())
                .unwrap_or_default();
            assert_eq!(details["type"], "refusal", "{text}");
            assert_eq!(details["explanation"], WHY, "{text}");
            assert!(said == WHY || said.is_empty(), "{text}");
        } else {
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["stop_reason"], "refusal");
            let category = v["stop_details"]["category"].as_str();
            if category == Some("cyber") {
                assert_eq!(v["stop_details"]["explanation"], WHY, "{v}");
            } else {
                assert_eq!(v["content"][0]["text"], WHY, "{v}");
            }
        }
    }
    // One send each: a refusal is never re-sent.
    assert_eq!(fake.calls("chat"), 12);
    gw.stop().await.unwrap();
}

#[tokio::test]
async fn an_answer_that_misses_its_shape_is_passed_on_as_given_and_sent_once() {
    let fake = FakeProvider::new();
    fake.reply("chat", FakeReply::text("{\"colour\": 7}"));
    fake.reply("chat", FakeReply::text("not json"));
    let gw = start(Gateway::new(models(&fake))).await;
    let schema = json!({"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]});
    let (status, text) = post(&gw, "/v1/chat/completions", json!({"model": "chat",
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema, "strict": true}}})).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "{\"colour\": 7}");
    let (status, text) = post(
        &gw,
        "/v1/responses",
        json!({"model": "chat", "input": "x",
        "text": {"format": {"type": "json_schema", "name": "c", "schema": schema}}}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["output"][0]["content"][0]["text"], "not json");
    assert_eq!(fake.calls("chat"), 2, "no correction was asked for");
    gw.stop().await.unwrap();
}
