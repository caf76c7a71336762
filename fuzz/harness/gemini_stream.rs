//! The Gemini stream: bytes through the SSE parser (in arbitrary chunks) into the codec's
//! `StreamDecoder` (each event a whole response), then `end` when the bytes run out, the
//! way the transport runs it.

use tollgate_gemini::codec::StreamDecoder;

use crate::common;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
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
}
