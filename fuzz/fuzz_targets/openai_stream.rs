//! The OpenAI stream: bytes through the SSE parser (in arbitrary chunks) into the codec's
//! `StreamDecoder`, then `end` when the bytes run out, the way the transport runs it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_openai::codec::StreamDecoder;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let done_required = data.first().is_some_and(|b| b & 1 == 1);
    let (sizes, body) = common::split_sizes(data, 2);
    let mut decoder = StreamDecoder::new();
    for event in common::sse_events(body, sizes) {
        match decoder.event(&event.data) {
            Ok(_) if decoder.is_finished() => return,
            Ok(_) => {}
            Err(_) => return,
        }
    }
    let _ = decoder.end(done_required);
});
