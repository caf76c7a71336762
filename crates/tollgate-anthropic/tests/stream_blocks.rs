//! Streamed blocks that arrive whole (a canned SSE body from a wiremock server on
//! 127.0.0.1, through the pipeline): `redacted_thinking` and server-tool results are
//! handed on as `WholeBlock`s from their `content_block_start`, a `server_tool_use` once
//! its streamed input is complete, and each is kept at its place in the final answer.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use tollgate::catalog::{Limits, ModelEntry};
use tollgate::credentials::MemoryCredentialStore;
use tollgate::{Block, Catalog, Conversation, Json, Models, SamplingParams, StreamEvent};
use tollgate_anthropic::AnthropicProvider;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A web search turn as Anthropic streams it: redacted thinking, the server tool's call
/// (its input in two `input_json_delta`s), its result, then text.
const WEB_SEARCH_TURN: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"tollgate"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" rust\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.com","title":"Example","encrypted_content":"enc","page_age":null}]}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"Found it."}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

"#;

async fn models(server: &MockServer) -> Models {
    let entry = ModelEntry::new("claude", "anthropic-direct", "claude-test")
        .with_credential("key")
        .with_output_tokens(2000, 500)
        .with_limits(Limits {
            rpm: 1000,
            tpm: 10_000_000,
            ..Limits::default()
        })
        .with_option("base_url", server.uri());
    Models::builder()
        .catalog(Catalog::builder().model(entry).build().unwrap())
        .credentials_arc(Arc::new(
            MemoryCredentialStore::new().with("key", "sk-test"),
        ))
        .provider(AnthropicProvider)
        .build()
        .unwrap()
}

fn expected() -> Vec<Block> {
    vec![
        Block::RedactedThinking {
            data: "EmwKAhgBEgy3va".into(),
            origin: Some("anthropic".into()),
        },
        Block::Native {
            provider: "anthropic".into(),
            value: Json::new(json!({"type": "server_tool_use", "id": "srvtoolu_1",
                                    "name": "web_search", "input": {"query": "tollgate rust"}})),
        },
        Block::Native {
            provider: "anthropic".into(),
            value: Json::new(
                json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                "content": [{"type": "web_search_result", "url": "https://example.com",
                             "title": "Example", "encrypted_content": "enc", "page_age": null}]}),
            ),
        },
        Block::text("Found it."),
    ]
}

#[tokio::test]
async fn redacted_thinking_and_server_tool_blocks_are_streamed_whole_and_kept_in_the_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(WEB_SEARCH_TURN, "text/event-stream"))
        .mount(&server)
        .await;
    let request = Conversation::new()
        .user("Search for tollgate")
        .request("claude", SamplingParams::new())
        .unwrap();
    let chat = models(&server).await.chat("claude").await.unwrap();
    let mut stream = chat.stream_response(&request).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    let wholes: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::WholeBlock { index, block } => Some((*index, block.clone())),
            _ => None,
        })
        .collect();
    let blocks = expected();
    assert_eq!(
        wholes,
        vec![
            (0, blocks[0].clone()),
            (1, blocks[1].clone()),
            (2, blocks[2].clone())
        ]
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolUseDelta { .. })),
        "a server tool's input is not a client tool call: {events:?}"
    );
    assert!(events.contains(&StreamEvent::TextDelta {
        index: 3,
        text: "Found it.".into()
    }));
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("no answer: {events:?}");
    };
    assert_eq!(answer.blocks(), &blocks[..]);
}

#[tokio::test]
async fn a_server_tool_use_whose_streamed_input_is_not_json_fails_the_stream() {
    let server = MockServer::start().await;
    let broken = WEB_SEARCH_TURN.replace(r#" rust\"}"#, r#" rust\""#);
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(broken, "text/event-stream"))
        .mount(&server)
        .await;
    let request = Conversation::new()
        .user("Search")
        .request("claude", SamplingParams::new())
        .unwrap();
    let models = models(&server).await;
    let models = models.for_job(tollgate::JobContext::new("no-retries", 0));
    let chat = models.chat("claude").await.unwrap();
    let mut failed = false;
    match chat.stream_response(&request).await {
        Err(_) => failed = true,
        Ok(mut stream) => {
            while let Some(event) = stream.next().await {
                if event.is_err() {
                    failed = true;
                    break;
                }
            }
        }
    }
    assert!(failed, "input that is not JSON must fail the stream");
}
