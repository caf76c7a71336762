//! The dialect hook that names a content filter's categories ([`Dialect::filtered`]),
//! as Azure OpenAI's `content_filter_results` carry them: a `content_filter` finish is a
//! refusal whose category names what was filtered, whole and streamed.

use serde_json::{Value, json};
use tollgate::provider::StopReason;
use tollgate::{LlmResponse, StreamEvent};
use tollgate_openai::codec::{Chunks, StreamDecoder, decode_response, decode_response_in};
use tollgate_openai::preset::Dialect;

/// The names of `choices[0].content_filter_results` entries with `filtered: true`.
fn filtered(answer: &Value) -> Vec<String> {
    answer["choices"][0]["content_filter_results"]
        .as_object()
        .map(|results| {
            results
                .iter()
                .filter(|(_, r)| r["filtered"] == json!(true))
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

const FILTERING: Dialect = Dialect {
    filtered: Some(filtered),
    ..Dialect::OPENAI
};

fn results(hate: bool, violence: bool) -> Value {
    json!({"hate": {"filtered": hate, "severity": if hate { "high" } else { "safe" }},
           "violence": {"filtered": violence, "severity": if violence { "medium" } else { "safe" }},
           "sexual": {"filtered": false, "severity": "safe"}})
}

fn filtered_answer() -> Vec<u8> {
    json!({"model": "m", "choices": [{"index": 0, "message": {"content": null},
        "finish_reason": "content_filter", "content_filter_results": results(true, true)}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}})
    .to_string()
    .into_bytes()
}

#[test]
fn a_filter_hook_names_the_filtered_categories_of_a_content_filter_answer() {
    let answer = decode_response_in(&filtered_answer(), &FILTERING).unwrap();
    assert_eq!(answer.stop_reason(), StopReason::ContentFilter);
    assert_eq!(
        answer.refusal_category(),
        Some("content_filter:hate,violence")
    );
    assert_eq!(answer.usage().output_tokens, 1);
}

#[test]
fn without_a_filter_hook_a_content_filter_answer_is_of_category_content_filter() {
    let answer = decode_response(&filtered_answer()).unwrap();
    assert_eq!(answer.refusal_category(), Some("content_filter"));
}

fn streamed(dialect: Dialect, chunks: &[Value]) -> LlmResponse {
    let mut decoder = StreamDecoder::with(Chunks::default().in_dialect(dialect));
    for chunk in chunks {
        decoder.event(&chunk.to_string()).unwrap();
    }
    let events = decoder.event("[DONE]").unwrap();
    let Some(StreamEvent::Completed(answer)) = events.last() else {
        panic!("no completed answer: {events:?}");
    };
    answer.clone()
}

#[test]
fn a_filter_hook_names_the_categories_filtered_in_any_chunk_of_a_stream() {
    let chunk = |delta: Value, finish: Value, results: Value| {
        json!({"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                          "content_filter_results": results}]})
    };
    let chunks = [
        chunk(
            json!({"content": "Once"}),
            Value::Null,
            results(false, false),
        ),
        chunk(
            json!({"content": " upon"}),
            Value::Null,
            results(false, true),
        ),
        chunk(json!({}), json!("content_filter"), results(true, true)),
        json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}),
    ];
    let answer = streamed(FILTERING, &chunks);
    assert_eq!(answer.stop_reason(), StopReason::ContentFilter);
    assert_eq!(
        answer.refusal_category(),
        Some("content_filter:violence,hate")
    );
    assert_eq!(answer.text(), "Once upon");
    let plain = streamed(Dialect::OPENAI, &chunks);
    assert_eq!(plain.refusal_category(), Some("content_filter"));
}
