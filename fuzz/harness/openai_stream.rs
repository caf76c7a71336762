//! The OpenAI stream: bytes through the SSE parser (in arbitrary chunks) into the codec's
//! `StreamDecoder`, then `end` when the bytes run out, the way the transport runs it.

use tollgate_openai::codec::{Chunks, StreamDecoder};

use crate::common;

/// One input through the target: what libFuzzer runs, and what the corpus replay
/// (`tests/fuzz-replay`) runs on every committed seed.
pub fn run(data: &[u8]) {
    let done_required = data.first().is_some_and(|b| b & 1 == 1);
    let (sizes, body) = common::split_sizes(data, 2);
    let mut decoder = StreamDecoder::with(Chunks::default().requiring_done(done_required));
    for event in common::sse_events(body, sizes) {
        match decoder.event(&event.data) {
            Ok(_) if decoder.is_finished() => return,
            Ok(_) => {}
            Err(_) => return,
        }
    }
    let _ = decoder.end();
}
