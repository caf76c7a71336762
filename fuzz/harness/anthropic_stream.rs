//! The Anthropic stream: bytes through the SSE parser (in arbitrary chunks) into the
//! codec's `StreamDecoder`, event by event, the way the transport runs it.

use tollgate_anthropic::codec::StreamDecoder;

use crate::common;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let (sizes, body) = common::split_sizes(data, 2);
    let mut decoder = StreamDecoder::new();
    for event in common::sse_events(body, sizes) {
        match decoder.event(&event.data) {
            Ok(_) if decoder.is_finished() => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
}
