//! The SSE parser: any bytes in any chunking. Checks that the chunking does not change
//! the events (the parser's promise), against the same bytes fed whole and byte by byte.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sizes, body) = common::split_sizes(data, 4);
    let chunked = common::sse_events(body, sizes);
    let whole = common::sse_events(body, &[]);
    assert_eq!(chunked, whole, "chunking changed the events");
    if body.len() <= 1024 {
        let bytewise = common::sse_events(body, &[1]);
        assert_eq!(bytewise, whole, "byte-by-byte feeding changed the events");
    }
});
