//! The `sim` provider acting on a request's settings, whole and streamed: a JSON object
//! answer, at most one tool call, a signed thinking block under reasoning (within its
//! budget, empty when omitted), and answers drawn from a seed.

use std::sync::Arc;

mod common;

use common::{models, tool};
use futures::StreamExt;
use tollgate::{
    Block, Conversation, LlmClient, LlmRequest, LlmResponse, Reasoning, ReasoningEffort,
    ReasoningSummary, SamplingParams, StopReason, StreamEvent, Thinking, ToolChoice,
};

async fn chat() -> Arc<dyn LlmClient> {
    models().chat("m").await.unwrap()
}

fn asking(params: SamplingParams) -> LlmRequest {
    Conversation::new()
        .user("How do tokens refill?")
        .request("m", params)
        .unwrap()
}

fn reasoning(reasoning: Reasoning) -> LlmRequest {
    asking(SamplingParams::new().with_reasoning(reasoning).unwrap())
}

/// `answer`'s thinking block, which must open it: `(text, signature, origin)`.
fn opening_thinking(answer: &LlmResponse) -> (String, String, String) {
    let Some(Block::Thinking {
        text,
        signature: Some(signature),
        origin: Some(origin),
        ..
    }) = answer.blocks().first()
    else {
        panic!("a signed thinking block first: {:?}", answer.blocks());
    };
    (text.clone(), signature.clone(), origin.clone())
}

fn has_thinking(answer: &LlmResponse) -> bool {
    answer
        .blocks()
        .iter()
        .any(|b| matches!(b, Block::Thinking { .. }))
}

#[tokio::test(start_paused = true)]
async fn sim_json_object_answers_a_json_object_that_parses() {
    let answer = chat()
        .await
        .single_response(&asking(SamplingParams::new().with_json_object()))
        .await
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(&answer.text()).unwrap();
    let text = value["answer"].as_str().unwrap();
    assert!(!text.is_empty(), "{value}");
    assert_eq!(value.as_object().unwrap().len(), 1, "{value}");
}

#[tokio::test(start_paused = true)]
async fn sim_parallel_tool_calls_false_makes_at_most_one_call_of_several_offered_tools() {
    let object = || serde_json::json!({"type": "object"});
    let params = SamplingParams::new()
        .with_tool_choice(ToolChoice::Required)
        .with_parallel_tool_calls(false);
    let request = Conversation::new()
        .with_tool(tool("a", object()))
        .with_tool(tool("b", object()))
        .user("Both, please.")
        .request("m", params)
        .unwrap();
    let answer = chat().await.single_response(&request).await.unwrap();
    let calls = answer
        .blocks()
        .iter()
        .filter(|b| matches!(b, Block::ToolUse { .. }))
        .count();
    assert_eq!(calls, 1, "{:?}", answer.blocks());
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
}

#[tokio::test(start_paused = true)]
async fn sim_adaptive_thinking_opens_the_answer_with_a_signed_thinking_block() {
    let answer = chat()
        .await
        .single_response(&reasoning(Reasoning::thinking(Thinking::Adaptive)))
        .await
        .unwrap();
    let (text, signature, origin) = opening_thinking(&answer);
    assert!(!text.is_empty());
    assert!(!signature.is_empty());
    assert_eq!(origin, "sim");
    assert!(matches!(&answer.blocks()[1], Block::Text { .. }));
    assert_eq!(answer.blocks().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn sim_an_effort_other_than_none_opens_the_answer_with_thinking() {
    let chat = chat().await;
    let efforts = ReasoningEffort::ACCEPTED
        .split(", ")
        .filter_map(ReasoningEffort::parse);
    for effort in efforts.filter(|e| *e != ReasoningEffort::None) {
        let answer = chat
            .single_response(&reasoning(Reasoning::effort(effort)))
            .await
            .unwrap();
        assert!(!opening_thinking(&answer).0.is_empty(), "{effort:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn sim_thinking_stays_within_its_budget_and_counts_as_output() {
    let chat = chat().await;
    for tokens in [1, 3] {
        let answer = chat
            .single_response(&reasoning(Reasoning {
                effort: Some(ReasoningEffort::Max),
                thinking: Some(Thinking::Budget { tokens }),
                summary: None,
            }))
            .await
            .unwrap();
        let words = opening_thinking(&answer).0.split_whitespace().count() as u64;
        assert!(
            (1..=tokens).contains(&words),
            "{words} words, budget {tokens}"
        );
        assert_eq!(answer.usage().output_tokens, 5 + words);
        assert_eq!(answer.text().split(' ').count(), 5, "{}", answer.text());
    }
}

#[tokio::test(start_paused = true)]
async fn sim_thinking_off_or_effort_none_answers_without_thinking() {
    let chat = chat().await;
    let plain = chat
        .single_response(&asking(SamplingParams::new()))
        .await
        .unwrap();
    for off in [
        Reasoning::thinking(Thinking::Off),
        Reasoning::effort(ReasoningEffort::None),
        Reasoning {
            effort: Some(ReasoningEffort::High),
            thinking: Some(Thinking::Off),
            summary: Some(ReasoningSummary::Detailed),
        },
        Reasoning {
            summary: Some(ReasoningSummary::Auto),
            ..Reasoning::default()
        },
    ] {
        let answer = chat.single_response(&reasoning(off)).await.unwrap();
        assert!(!has_thinking(&answer), "{off:?}: {:?}", answer.blocks());
        assert_eq!(answer.blocks(), plain.blocks(), "{off:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn sim_omitted_summary_gives_a_thinking_block_with_empty_text_but_a_signature() {
    let answer = chat()
        .await
        .single_response(&reasoning(Reasoning {
            thinking: Some(Thinking::Adaptive),
            summary: Some(ReasoningSummary::Omitted),
            ..Reasoning::default()
        }))
        .await
        .unwrap();
    let (text, signature, _) = opening_thinking(&answer);
    assert_eq!(text, "");
    assert!(!signature.is_empty());
    assert!(!answer.text().is_empty());
}

#[tokio::test(start_paused = true)]
async fn sim_thinking_comes_before_a_tool_call() {
    let weather = tool("weather", serde_json::json!({"type": "object"}));
    let params = SamplingParams::new()
        .with_reasoning(Reasoning::effort(ReasoningEffort::Low))
        .unwrap();
    let request = Conversation::new()
        .with_tool(weather)
        .user("Weather?")
        .request("m", params)
        .unwrap();
    let answer = chat().await.single_response(&request).await.unwrap();
    opening_thinking(&answer);
    assert!(matches!(&answer.blocks()[1], Block::ToolUse { name, .. } if name == "weather"));
    assert_eq!(answer.stop_reason(), StopReason::ToolUse);
}

/// The events of `request`'s stream, in order.
async fn streamed(request: &LlmRequest) -> Vec<StreamEvent> {
    let mut stream = chat().await.stream_response(request).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    events
}

#[tokio::test(start_paused = true)]
async fn sim_streams_thinking_deltas_then_the_signature_then_the_text() {
    let events = streamed(&reasoning(Reasoning::effort(ReasoningEffort::High))).await;
    // 0: thinking deltas, 1: the signature, 2: text deltas; never back.
    let stage = |e: &StreamEvent| match e {
        StreamEvent::ThinkingDelta { index: 0, .. } => Some(0),
        StreamEvent::SignatureDelta { index: 0, .. } => Some(1),
        StreamEvent::TextDelta { index: 1, .. } => Some(2),
        StreamEvent::ThinkingDelta { .. }
        | StreamEvent::SignatureDelta { .. }
        | StreamEvent::TextDelta { .. } => panic!("a delta at the wrong index: {e:?}"),
        _ => None,
    };
    let stages: Vec<i32> = events.iter().filter_map(stage).collect();
    assert!(stages.is_sorted(), "{stages:?}");
    assert_eq!(stages.iter().filter(|s| **s == 1).count(), 1, "{stages:?}");
    assert!(stages.contains(&0) && stages.contains(&2), "{stages:?}");
    let (mut thinking, mut signature, mut text) = (String::new(), String::new(), String::new());
    for event in &events {
        match event {
            StreamEvent::ThinkingDelta { text: t, .. } => thinking.push_str(t),
            StreamEvent::SignatureDelta { signature: s, .. } => signature.push_str(s),
            StreamEvent::TextDelta { text: t, .. } => text.push_str(t),
            _ => {}
        }
    }
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("the last event completes: {events:?}");
    };
    assert_eq!(
        opening_thinking(answer),
        (thinking, signature, "sim".into())
    );
    assert_eq!(answer.text(), text);
}

#[tokio::test(start_paused = true)]
async fn sim_streams_an_omitted_thinking_as_its_signature_alone() {
    let events = streamed(&reasoning(Reasoning {
        effort: Some(ReasoningEffort::Medium),
        summary: Some(ReasoningSummary::Omitted),
        ..Reasoning::default()
    }))
    .await;
    let thinking = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ThinkingDelta { .. }))
        .count();
    let signed = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::SignatureDelta { index: 0, signature } if !signature.is_empty()))
        .count();
    assert_eq!((thinking, signed), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn sim_the_same_seed_repeats_the_answer_and_another_seed_changes_it() {
    let chat = chat().await;
    let seeded = |seed| asking(SamplingParams::new().with_seed(seed));
    let first = chat.single_response(&seeded(7)).await.unwrap();
    let again = chat.single_response(&seeded(7)).await.unwrap();
    assert_eq!(first.text(), again.text());
    let others: Vec<String> = futures::future::join_all((8..11).map(|seed| {
        let request = seeded(seed);
        let chat = &chat;
        async move { chat.single_response(&request).await.unwrap().text() }
    }))
    .await;
    assert!(
        others.iter().all(|t| *t != first.text()),
        "{first:?} {others:?}"
    );
}
