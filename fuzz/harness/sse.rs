//! The SSE parser: any bytes in any chunking. Checks that the chunking does not change
//! the events (the parser's promise), against the same bytes fed whole and byte by byte.

use crate::common;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let (sizes, body) = common::split_sizes(data, 4);
    let chunked = common::sse_events(body, sizes);
    let whole = common::sse_events(body, &[]);
    assert_eq!(chunked, whole, "chunking changed the events");
    if body.len() <= 1024 {
        let bytewise = common::sse_events(body, &[1]);
        assert_eq!(bytewise, whole, "byte-by-byte feeding changed the events");
    }
}
