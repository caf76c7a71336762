//! The Anthropic stream: bytes through the SSE parser (in arbitrary chunks) into the
//! codec's `StreamDecoder`, event by event, the way the transport runs it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_anthropic::codec::StreamDecoder;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sizes, body) = common::split_sizes(data, 2);
    let mut decoder = StreamDecoder::new();
    for event in common::sse_events(body, sizes) {
        match decoder.event(&event.data) {
            Ok(_) if decoder.is_finished() => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
});
