//! The `sim` provider's tool calls under a request's tool choice, whole and streamed, and
//! its brief answer to a client's large `max_tokens`: what a client's tool loop needs
//! from the demo with no keys.

mod common;

use common::{models, tool};
use futures::StreamExt;
use tollgate::{
    Block, Conversation, LlmRequest, SamplingParams, StopReason, StreamEvent, ToolChoice,
};

/// A request offering `weather` (a required string and an optional number) then
/// `convert` (a required number and boolean), under `choice`.
fn offered(choice: Option<ToolChoice>) -> LlmRequest {
    let weather = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "number"}},
        "required": ["city"],
    });
    let convert = serde_json::json!({
        "type": "object",
        "properties": {"amount": {"type": "number"}, "exact": {"type": "boolean"}},
        "required": ["amount", "exact"],
    });
    let mut params = SamplingParams::new()
        .with_max_output_tokens(128000)
        .unwrap();
    if let Some(choice) = choice {
        params = params.with_tool_choice(choice);
    }
    Conversation::new()
        .with_tool(tool("weather", weather))
        .with_tool(tool("convert", convert))
        .user("Weather in Paris, and 3 EUR in USD?")
        .request("m", params)
        .unwrap()
}

/// The one tool call of `answer`'s blocks, as `(name, input)`.
fn the_call(blocks: &[Block]) -> (String, serde_json::Value) {
    let [Block::ToolUse { name, input, .. }] = blocks else {
        panic!("one tool call block: {blocks:?}");
    };
    (name.clone(), input.value().clone())
}

#[tokio::test(start_paused = true)]
async fn sim_tool_choice_auto_calls_the_first_offered_tool() {
    let chat = models().chat("m").await.unwrap();
    let answer = chat
        .single_response(&offered(Some(ToolChoice::Auto)))
        .await
        .unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let (name, input) = the_call(answer.blocks());
    assert_eq!(name, "weather");
    assert_eq!(input, serde_json::json!({"city": "sim"}));
}

#[tokio::test(start_paused = true)]
async fn sim_tool_choice_required_forces_a_tool_call() {
    let chat = models().chat("m").await.unwrap();
    let answer = chat
        .single_response(&offered(Some(ToolChoice::Required)))
        .await
        .unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    assert_eq!(the_call(answer.blocks()).0, "weather");
}

#[tokio::test(start_paused = true)]
async fn sim_tool_choice_naming_a_tool_calls_that_tool_with_arguments_fitting_its_schema() {
    let chat = models().chat("m").await.unwrap();
    let request = offered(Some(ToolChoice::Tool("convert".into())));
    let answer = chat.single_response(&request).await.unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
    let (name, input) = the_call(answer.blocks());
    assert_eq!(name, "convert");
    assert_eq!(input, serde_json::json!({"amount": 0.0, "exact": true}));
}

#[tokio::test(start_paused = true)]
async fn sim_tool_choice_none_answers_text_though_tools_are_offered() {
    let chat = models().chat("m").await.unwrap();
    let answer = chat
        .single_response(&offered(Some(ToolChoice::None)))
        .await
        .unwrap();
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert!(!answer.text().is_empty());
    assert!(
        answer
            .blocks()
            .iter()
            .all(|b| matches!(b, Block::Text { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn sim_streams_the_named_tool_s_call_and_the_tool_use_stop() {
    let chat = models().chat("m").await.unwrap();
    let request = offered(Some(ToolChoice::Tool("convert".into())));
    let mut stream = chat.stream_response(&request).await.unwrap();
    let (mut json, mut named, mut stop, mut completed) = (String::new(), None, None, None);
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            StreamEvent::ToolUseDelta {
                name, input_json, ..
            } => {
                named = named.or(name);
                json.push_str(&input_json);
            }
            StreamEvent::Stop(reason) => stop = Some(reason),
            StreamEvent::Completed(response) => completed = Some(response),
            _ => {}
        }
    }
    assert_eq!(named.as_deref(), Some("convert"));
    let input: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(input, serde_json::json!({"amount": 0.0, "exact": true}));
    assert_eq!(stop, Some(StopReason::ToolUse));
    assert_eq!(the_call(completed.unwrap().blocks()).0, "convert");
}

#[tokio::test(start_paused = true)]
async fn sim_answers_briefly_to_a_client_s_large_max_tokens() {
    let chat = models().chat("m").await.unwrap();
    let request = Conversation::new()
        .user("Hello?")
        .request(
            "m",
            SamplingParams::new()
                .with_max_output_tokens(128000)
                .unwrap(),
        )
        .unwrap();
    let answer = chat.single_response(&request).await.unwrap();
    assert_eq!(answer.usage().output_tokens, 5);
    assert_eq!(answer.stop_reason(), StopReason::EndTurn);
    assert!(answer.text().split(' ').count() <= 5, "{}", answer.text());
}

#[tokio::test(start_paused = true)]
async fn sim_streams_text_once_the_last_message_is_a_tool_result_even_when_a_tool_is_forced() {
    let chat = models().chat("m").await.unwrap();
    let request = offered(Some(ToolChoice::Required));
    let call = chat.single_response(&request).await.unwrap();
    let Block::ToolUse { id, .. } = &call.blocks()[0] else {
        panic!("a tool call: {:?}", call.blocks());
    };
    let result = tollgate::Message {
        role: tollgate::Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: id.clone(),
            content: vec![Block::text("18C")],
            is_error: false,
            cache: None,
        }],
    };
    let assistant = tollgate::Message {
        role: tollgate::Role::Assistant,
        content: call.blocks().to_vec(),
    };
    let round_trip = request.with_appended([assistant, result]).unwrap();
    let mut stream = chat.stream_response(&round_trip).await.unwrap();
    let (mut text, mut tool_deltas, mut stop) = (String::new(), 0, None);
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            StreamEvent::TextDelta { text: t, .. } => text.push_str(&t),
            StreamEvent::ToolUseDelta { .. } => tool_deltas += 1,
            StreamEvent::Stop(reason) => stop = Some(reason),
            _ => {}
        }
    }
    assert!(!text.is_empty());
    assert_eq!(tool_deltas, 0);
    assert_eq!(stop, Some(StopReason::EndTurn));
}
