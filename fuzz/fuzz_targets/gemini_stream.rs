//! The Gemini stream: bytes through the SSE parser (in arbitrary chunks) into the codec's
//! `StreamDecoder` (each event a whole response), then `end` when the bytes run out, the
//! way the transport runs it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_gemini::codec::StreamDecoder;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sizes, body) = common::split_sizes(data, 1);
    let mut decoder = StreamDecoder::new();
    for event in common::sse_events(body, sizes) {
        match decoder.event(&event.data) {
            Ok(_) if decoder.is_finished() => return,
            Ok(_) => {}
            Err(_) => return,
        }
    }
    let _ = decoder.end();
});
