//! The first-call benchmark's parts: its server's answer through both keys, the line a
//! child prints, and the table. Nothing here reads a time.

use std::time::Duration;

use tollgate_bench::first_call::{self, CHUNKS, Cell, FirstCall, KEYS};

#[tokio::test]
async fn first_call_server_answers_both_keys_with_a_complete_stream() {
    assert_eq!(
        first_call::stream_body()
            .matches("chat.completion.chunk")
            .count(),
        CHUNKS
    );
    let port = first_call::serve().await.unwrap();
    let url = format!("http://127.0.0.1:{port}");
    for key in KEYS {
        let call = first_call::first_call(key, &url, Duration::ZERO)
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        // Nine text deltas, the stop, the usage and the completed answer.
        assert_eq!(call.events, 12, "{key}");
    }
}

#[test]
fn first_call_line_reads_back_what_a_child_printed() {
    let call = FirstCall {
        build_to_answer: Duration::from_nanos(123_456_789),
        send_to_answer: Duration::from_nanos(4_567),
        events: 12,
    };
    assert_eq!(FirstCall::parse(&call.line()), Some(call));
    assert_eq!(FirstCall::parse("something else"), None);
}

#[test]
fn first_call_section_reports_p50_and_max_per_key_and_pause() {
    let call = |send_ms: u64| FirstCall {
        build_to_answer: Duration::from_millis(send_ms + 10),
        send_to_answer: Duration::from_millis(send_ms),
        events: 12,
    };
    let cell = Cell {
        key: "openai",
        pause: Duration::from_millis(300),
        calls: vec![call(1), call(2), call(9)],
        processes: vec![Duration::from_millis(20); 3],
    };
    let md = first_call::section(&[cell], "cmd").to_markdown();
    let row = md.lines().find(|l| l.starts_with("| `openai`")).unwrap();
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(
        cells[1..10],
        [
            "`openai`", "300 ms", "3", "2.0", "9.0", "12.0", "19.0", "20.0", "20.0"
        ]
    );
    assert!(md.contains("Command: `cmd`"));
}
